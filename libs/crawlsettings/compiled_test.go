package crawlsettings

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// TestCompiled: a specification is compiled once per revision (the same
// value while the follower holds the same spec), again when another
// revision or another value of the spec arrives, per crawl; a compile
// error is reported once per revision and its value kept.
func TestCompiled(t *testing.T) {
	compiles := 0
	var errs []string
	c := NewCompiled(func(spec *crawlv1.CrawlSpec) (string, error) {
		compiles++
		if spec.GetName() == "bad" {
			return "partial", errors.New("bad rule")
		}
		return spec.GetName(), nil
	}, func(crawlID string, err error) { errs = append(errs, crawlID+": "+err.Error()) })

	r1 := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 1, Name: "one"}
	if got := c.Get("a", r1); got != "one" || compiles != 1 {
		t.Fatalf("first Get = %q after %d compiles, want one after 1", got, compiles)
	}
	if got := c.Get("a", r1); got != "one" || compiles != 1 {
		t.Fatalf("same spec: %q after %d compiles, want one, still 1", got, compiles)
	}
	r2 := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 2, Name: "two"}
	if got := c.Get("a", r2); got != "two" || compiles != 2 {
		t.Fatalf("next revision: %q after %d compiles, want two after 2", got, compiles)
	}
	if got := c.Get("b", &crawlv1.CrawlSpec{CrawlId: "b", Revision: 2, Name: "bee"}); got != "bee" || compiles != 3 {
		t.Fatalf("another crawl: %q after %d compiles, want bee after 3", got, compiles)
	}
	bad := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 3, Name: "bad"}
	for range 2 {
		if got := c.Get("a", bad); got != "partial" {
			t.Fatalf("a spec with an error: %q, want the value compile kept", got)
		}
	}
	if len(errs) != 1 || errs[0] != "a: bad rule" || compiles != 4 {
		t.Fatalf("errors %v after %d compiles, want one for a after 4", errs, compiles)
	}
}

// TestCompiledBounded: past maxCompiled crawls the table starts over, and
// a crawl's value is compiled again once.
func TestCompiledBounded(t *testing.T) {
	compiles := 0
	c := NewCompiled(func(spec *crawlv1.CrawlSpec) (string, error) {
		compiles++
		return spec.GetCrawlId(), nil
	}, nil)
	specs := make([]*crawlv1.CrawlSpec, maxCompiled+1)
	for i := range specs {
		specs[i] = &crawlv1.CrawlSpec{CrawlId: fmt.Sprint("c", i), Revision: 1}
		c.Get(specs[i].GetCrawlId(), specs[i])
	}
	if len(c.m) > maxCompiled {
		t.Fatalf("table holds %d crawls, want at most %d", len(c.m), maxCompiled)
	}
	if got := c.Get("c0", specs[0]); got != "c0" || compiles != maxCompiled+2 {
		t.Fatalf("first crawl after the table started over: %q after %d compiles, want c0 after %d", got, compiles, maxCompiled+2)
	}
}

// TestCache: a crawl's settings resolved on the fleet, once per revision;
// a refused identity is reported once per revision, and what of it may be
// sent is kept.
func TestCache(t *testing.T) {
	var refused []string
	c := NewCache(Fleet{MaxPages: 50, Render: crawlv1.RenderMode_RENDER_MODE_AUTO}, func(crawlID string, err error) {
		refused = append(refused, crawlID+": "+err.Error())
	})
	if s := c.Of("none", nil); s.Pages != 50 || s.Render != crawlv1.RenderMode_RENDER_MODE_AUTO || !reflect.DeepEqual(s.Identity, Identity{}) {
		t.Fatalf("crawl without a spec: %+v, want the fleet's budget and render mode, no identity", s)
	}
	spec := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 1, Identity: &crawlv1.Identity{
		UserAgent: "bad agent",
		Headers:   []*crawlv1.Header{{Name: "X-Crawl", Value: "a"}, {Name: "Host", Value: "evil.example"}},
	}}
	for range 2 {
		s := c.Of("a", spec)
		if s.Identity.UserAgent != "" || len(s.Identity.Headers) != 1 || s.Identity.Headers[0].Name != "X-Crawl" {
			t.Fatalf("partly refused identity: %+v, want the fleet's user agent and X-Crawl only", s.Identity)
		}
	}
	if len(refused) != 1 || !strings.HasPrefix(refused[0], "a: user agent: ") || !strings.Contains(refused[0], "Host") {
		t.Fatalf("refusals %q, want one for a naming the user agent and Host", refused)
	}
}
