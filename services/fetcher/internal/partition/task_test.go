package partition

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
)

// TestRequest: a queued task's request is decoded again from its record's
// value, with its priority as raised while queued; a value that no longer
// decodes gives the task's own fields and the error.
func TestRequest(t *testing.T) {
	req := &crawlv1.FetchRequest{CrawlId: "c", Url: "http://a/x", UrlFp: 7, Depth: 2, Attempt: 1, Priority: 1, PriorityReason: "sitemap"}
	value, schema, err := crawlmsg.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	of := TaskOf{Value: value, Schema: schema, Host: "a", Crawl: "c"}

	kept := NewTask(req, of, t0)
	got, err := kept.Request()
	if err != nil || got.GetUrl() != "http://a/x" || got.GetUrlFp() != 7 || got.GetPriority() != 1 || got.GetPriorityReason() != "sitemap" {
		t.Fatalf("request of a queued task: %v, %v", got, err)
	}
	if kept.Req != got {
		t.Error("the decoded request is not kept as Req")
	}
	if again, _ := kept.Request(); again != got {
		t.Error("a decoded request was decoded again")
	}

	raised := NewTask(req, of, t0)
	p := newPartition(&clock{t0}, decide.Limits{MaxHostQueue: 10})
	p.Push(raised, t0)
	p.Raise("a", "c", 7, 4, priority.InLinks|priority.Sitemap)
	if got, err := raised.Request(); err != nil || got.GetPriority() != 4 || got.GetPriorityReason() != "sitemap+inlinks" {
		t.Errorf("request of a raised task: priority %d %q, %v; want 4 \"sitemap+inlinks\"", got.GetPriority(), got.GetPriorityReason(), err)
	}

	broken := NewTask(req, TaskOf{Value: []byte{0xff, 0xff}, Schema: schema, Host: "a", Crawl: "c"}, t0)
	got, err = broken.Request()
	if err == nil {
		t.Fatal("an undecodable value decoded")
	}
	if got.GetUrl() != "" || got.GetCrawlId() != "c" || got.GetAttempt() != 1 || got.GetDepth() != 2 || got.GetPriority() != 1 {
		t.Errorf("fallback request %v, want the task's crawl, attempt, depth and priority without a URL", got)
	}
}

// TestStrings: equal strings come back as one copy, and the table starts
// over past MaxStrings.
func TestStrings(t *testing.T) {
	var in Strings
	a := in.Intern(string([]byte("crawl-1")))
	b := in.Intern(string([]byte("crawl-1")))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("two interns of an equal string are two copies")
	}
	for i := range MaxStrings {
		in.Intern(strconv.Itoa(i))
	}
	if len(in) > MaxStrings {
		t.Fatalf("table holds %d strings, want at most %d", len(in), MaxStrings)
	}
}
