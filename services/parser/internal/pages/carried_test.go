package pages_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestUnchangedPageCarriedOver: a 304 to the conditional request of a page
// an earlier crawl fetched (document_crawl_id) records the page as carried
// over from that crawl (documents_carried, with the page's fingerprint
// there) without a documents row; a 304 of a revisit (no document crawl)
// stays an HTTP status; a 200 of the same crawl is a document as usual,
// its links published.
func TestUnchangedPageCarriedOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	carried := chstore.NewBatchWriter(store, chstore.DocumentsCarried, fast, log, nil)
	runWriters(t, docs, carried)
	cfg := pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, FollowDuplicates: true}
	r := startParser(t, cfg, pages.Sinks{Documents: docs, Carried: carried}, now)

	unchanged := &crawlv1.FetchedPage{CrawlId: "c", Url: "http://127.0.0.2/same", UrlFp: fingerprint.URL("c", "http://127.0.0.2/same"),
		FetchedAt: timestamppb.New(now), StatusCode: 304, Unchanged: true, DocumentCrawlId: "c0"}
	revisit := &crawlv1.FetchedPage{CrawlId: "c", Url: "http://127.0.0.2/revisited", FetchedAt: timestamppb.New(now),
		StatusCode: 304, Unchanged: true}
	changed := htmlPage("http://127.0.0.2/changed", 1, `<title>New</title><p>new text</p><a href="/new">n</a>`, now)
	changed.DocumentCrawlId = "c0"
	r.produce(ctx, unchanged, revisit, changed)
	waitFor(t, ctx, "fetched topic fully committed", func() bool { return r.lag(ctx) == 0 })

	for outcome, want := range map[string]float64{pages.OutcomeCarried: 1, pages.OutcomeHTTPStatus: 1, pages.OutcomeDocument: 1} {
		if n := counterValue(t, r.reg, "pages_parsed_total", "outcome", outcome); n != want {
			t.Errorf("pages_parsed_total{outcome=%s} = %v, want %v", outcome, n, want)
		}
	}
	got := readDiscovered(t, ctx, r.kc, 1)
	if len(got) != 1 || got[0].url != "http://127.0.0.2/new" {
		t.Errorf("discovered %+v, want the changed page's link only", got)
	}
	var (
		url, from  string
		fp, fromFP uint64
		checked    time.Time
	)
	if err := store.Conn().QueryRow(ctx, "SELECT url, url_fp, from_crawl, from_url_fp, checked_at FROM documents_carried FINAL WHERE crawl_id = 'c'").
		Scan(&url, &fp, &from, &fromFP, &checked); err != nil {
		t.Fatalf("read documents_carried: %v", err)
	}
	if url != unchanged.Url || fp != unchanged.UrlFp || from != "c0" || fromFP != fingerprint.URL("c0", unchanged.Url) || !checked.Equal(now) {
		t.Errorf("carried row %s %x from %s %x at %v, want %s %x from c0 %x at %v",
			url, fp, from, fromFP, checked, unchanged.Url, unchanged.UrlFp, fingerprint.URL("c0", unchanged.Url), now)
	}
	var n uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM documents FINAL WHERE crawl_id = 'c'").Scan(&n); err != nil || n != 1 {
		t.Errorf("documents of crawl c: %d (%v), want 1 (the changed page's)", n, err)
	}
}
