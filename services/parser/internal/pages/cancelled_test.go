package pages_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestCancelledCrawlEmitsNoOutlinks: the pages of a crawl that is
// cancelled — by its operator, by its time limit (on the processor's
// clock, without a new revision) or by its deletion — publish no outlink,
// sitemaps included, and their links are counted as dropped (cancelled, in
// Prometheus and in links_dropped); their documents are still stored,
// since they were fetched. A running crawl's page in the same batches
// publishes its links.
func TestCancelledCrawlEmitsNoOutlinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, fast, log, nil)
	runWriters(t, docs, dropped)

	specs := crawlcontrol.NewSpecsClock(func() time.Time { return now })
	for _, s := range []*crawlv1.CrawlSpec{
		{CrawlId: "live", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING},
		{CrawlId: "cancelled", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED},
		{CrawlId: "timed", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING, // its hour ended a minute ago
			CreatedAt: timestamppb.New(now.Add(-61 * time.Minute)), Limits: &crawlv1.Limits{MaxDuration: durationpb.New(time.Hour)}},
		{CrawlId: "deleted", Revision: 3, State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED, DeletedAt: timestamppb.New(now.Add(-time.Second))},
	} {
		specs.Apply(s)
	}
	cfg := pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, FollowDuplicates: true}
	r := startParserSpecs(t, cfg, pages.Sinks{Documents: docs, Dropped: dropped}, specs, now)

	page := func(crawl, u string) *crawlv1.FetchedPage {
		p := htmlPage(u, 0, `<title>T</title><p>Some text of `+u+`.</p><a href="/a">a</a> <a href="/b">b</a>`, now.Add(-time.Second))
		p.CrawlId = crawl
		return p
	}
	sitemap := &crawlv1.FetchedPage{CrawlId: "cancelled", Url: "http://127.0.0.2/sitemap.xml", FetchedAt: timestamppb.New(now),
		StatusCode: 200, ContentType: "application/xml", Body: []byte(`<?xml version="1.0"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://127.0.0.2/m1</loc></url><url><loc>http://127.0.0.2/m2</loc></url></urlset>`)}
	r.produce(ctx,
		page("cancelled", "http://127.0.0.2/"), sitemap,
		page("timed", "http://127.0.0.3/"),
		page("deleted", "http://127.0.0.4/"),
		page("live", "http://127.0.0.5/"))
	waitFor(t, ctx, "fetched topic fully committed", func() bool { return r.lag(ctx) == 0 })

	got := readDiscovered(t, ctx, r.kc, 2)
	sort.Slice(got, func(i, j int) bool { return got[i].url < got[j].url })
	if len(got) != 2 || got[0].url != "http://127.0.0.5/a" || got[1].url != "http://127.0.0.5/b" {
		t.Errorf("discovered %+v, want only the live crawl's two links", got)
	}
	if n := counterValue(t, r.reg, "links_dropped_total", "reason", pages.DropCancelled); n != 8 {
		t.Errorf("links_dropped_total{reason=cancelled} = %v, want 8 (two links of each cancelled page, two sitemap URLs)", n)
	}
	byCrawl := make(map[string]uint64)
	waitFor(t, ctx, "links_dropped rows", func() bool {
		rows, err := store.Conn().Query(ctx, "SELECT crawl_id, sum(n) FROM links_dropped_v2 WHERE reason = 'cancelled' GROUP BY crawl_id")
		if err != nil {
			return false
		}
		defer rows.Close()
		clear(byCrawl)
		for rows.Next() {
			var (
				id string
				n  uint64
			)
			if rows.Scan(&id, &n) != nil {
				return false
			}
			byCrawl[id] = n
		}
		return len(byCrawl) == 3
	})
	if byCrawl["cancelled"] != 4 || byCrawl["timed"] != 2 || byCrawl["deleted"] != 2 {
		t.Errorf("links_dropped cancelled rows by crawl = %v, want cancelled 4, timed 2, deleted 2", byCrawl)
	}
	// Fetched, so stored: every HTML page's document, its outlinks counted.
	waitFor(t, ctx, "documents", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT count() FROM documents FINAL WHERE outlinks = 2").Scan(&n)
		return err == nil && n == 4
	})
}
