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
)

// TestParserScope crawls a site under a crawl spec whose deny pattern
// excludes one section: the parser drops every link into it (counted in
// links_dropped as filtered), nothing in it is fetched, and every document
// gets its document_meta row with a simhash. (Redirect targets are
// published by the fetcher, not filtered by the parser.)
func TestParserScope(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{
		site:  demosite.Config{Hosts: 1, PagesPerHost: 12, FirstHostOctet: 80},
		delay: e2eDelay,
	})

	// Publish the spec, and give the parser's control-topic follower a
	// moment before the first page arrives.
	w := kafkaio.NewWriter(e.p.Kafka, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	msg, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, &crawlv1.CrawlSpec{
		CrawlId: e.crawlID, Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Scope: &crawlv1.Scope{DenyPatterns: []string{`/sec3/`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []kafka.Message{msg}...); err != nil {
		t.Fatalf("publish crawl spec: %v", err)
	}
	time.Sleep(time.Second)
	e.seed(ctx, []string{e.site.URL(0, demosite.PathIndex)}, "")
	s := e.drain(ctx, 90*time.Second)
	t.Logf("crawl drained: %s", s.Line())

	for _, r := range e.fetchLog(ctx) {
		if strings.Contains(r.URL, "/sec3/") {
			t.Errorf("denied section fetched: %s", r.URL)
		}
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
	if err := conn.QueryRow(ctx, "SELECT sum(n) FROM links_dropped WHERE crawl_id = ? AND reason = 'filtered'", e.crawlID).
		Scan(&filtered); err != nil {
		t.Fatalf("query links_dropped: %v", err)
	}
	// page0, page2 and page4 link to page3, page7 and page11 (/sec3/).
	if filtered < 3 {
		t.Errorf("%d filtered links counted, want at least 3", filtered)
	}
	e.stop()
	t.Logf("%d documents, %d links into the denied section dropped", len(docs), filtered)
}
