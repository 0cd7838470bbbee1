package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// TestParserScope crawls two hosts under a crawl spec that allows only the
// first and whose deny pattern excludes one of its sections: the parser
// drops every link into the section (counted in links_dropped as
// filtered) and every link to the other host, nothing in either is
// fetched, and every document gets its document_meta row with a simhash.
// The first host's /redirect answers 301 to the other host: the fetcher
// publishes the target, which no parser judged, and the scheduler drops it
// by the same scope (url_events: out_of_scope).
func TestParserScope(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{
		site:  demosite.Config{Hosts: 2, PagesPerHost: 12, FirstHostOctet: 80},
		delay: e2eDelay,
	})
	allowed, err := urlcanon.PolitenessKey(e.site.URL(0, demosite.PathIndex))
	if err != nil {
		t.Fatal(err)
	}
	other, err := urlcanon.PolitenessKey(e.site.URL(1, demosite.PathIndex))
	if err != nil {
		t.Fatal(err)
	}

	// Publish the spec, then seed at once.
	w := kafkaio.NewWriter(e.p.Kafka, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	msg, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, &crawlv1.CrawlSpec{
		CrawlId: e.crawlID, Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Scope: &crawlv1.Scope{AllowHosts: []string{allowed}, DenyPatterns: []string{`/sec1/`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []kafka.Message{msg}...); err != nil {
		t.Fatalf("publish crawl spec: %v", err)
	}
	// No wait: the scheduler and the parser meet a crawl they have no
	// spec of by reading the control topic to its end first
	// (crawlcontrol.Specs.GetSynced).
	e.seed(ctx, []string{e.site.URL(0, demosite.PathIndex)}, "")
	s := e.drain(ctx, 90*time.Second)
	t.Logf("crawl drained: %s", s.Line())

	redirected := false
	for _, r := range e.fetchLog(ctx) {
		if strings.Contains(r.URL, "/sec1/") {
			t.Errorf("denied section fetched: %s", r.URL)
		}
		if strings.Contains(r.URL, "//"+other+"/") {
			t.Errorf("host outside the allowed hosts fetched: %s", r.URL)
		}
		if r.URL == e.site.URL(0, demosite.PathRedirect) && r.Status == 301 {
			redirected = true
		}
	}
	if !redirected {
		t.Errorf("%s not fetched with a 301: the redirect case was not exercised", e.site.URL(0, demosite.PathRedirect))
	}
	target := e.site.URL(1, demosite.PathLanding)
	var redirectDrops uint64
	if err := e.p.Store.Conn().QueryRow(ctx,
		"SELECT count() FROM url_events FINAL WHERE crawl_id = ? AND url = ? AND state = 'out_of_scope' AND reason = 'out_of_scope'",
		e.crawlID, target).Scan(&redirectDrops); err != nil {
		t.Fatalf("query url_events: %v", err)
	}
	if redirectDrops != 1 {
		t.Errorf("redirect target %s: %d out_of_scope rows in url_events, want 1", target, redirectDrops)
	}
	docs := e.documents(ctx)
	if len(docs) == 0 {
		t.Fatal("no documents")
	}
	conn := e.p.Store.Conn()
	var metas, withSimhash uint64
	if err := conn.QueryRow(ctx, "SELECT count(), countIf(simhash != 0) FROM document_meta FINAL WHERE crawl_id = ?", e.crawlID).
		Scan(&metas, &withSimhash); err != nil {
		t.Fatalf("query document_meta: %v", err)
	}
	if metas != uint64(len(docs)) || withSimhash != metas {
		t.Errorf("document_meta: %d rows, %d with simhash; want %d documents", metas, withSimhash, len(docs))
	}
	var filtered uint64
	if err := conn.QueryRow(ctx, "SELECT sum(n) FROM links_dropped_v2 WHERE crawl_id = ? AND reason = 'filtered'", e.crawlID).
		Scan(&filtered); err != nil {
		t.Fatalf("query links_dropped: %v", err)
	}
	// the index links to page1 and page3 to page9 (/sec1/)
	if filtered < 2 {
		t.Errorf("%d filtered links counted, want at least 2", filtered)
	}
	e.stop()
	t.Logf("%d documents, %d links into the denied section dropped", len(docs), filtered)
}
