package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/warcdir"
)

// TestDeleteArchives: a fetcher with --warc-dir (real broker and
// ClickHouse) removes the files of a crawl deleted before it started once
// it has read the control topic, and those of a crawl deleted while it
// runs when the deleting revision arrives; a live crawl's files stay.
func TestDeleteArchives(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := load(t, "", "--warc-dir", dir)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	files := map[string][]string{}
	for i, crawl := range []string{"live", "gone-before", "gone-later"} {
		name := warcdir.Name("trawl", crawl, at, int64(i+1), "test-1") + ".gz"
		files[crawl] = []string{name, name + warcdir.IndexSuffix}
		for _, n := range files[crawl] {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("records"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	exists := func(crawl string) bool {
		for _, n := range files[crawl] {
			if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
				return false
			}
		}
		return true
	}
	gone := func(crawl string) bool {
		for _, n := range files[crawl] {
			if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
				return false
			}
		}
		return true
	}
	w := kafkaio.NewWriter(cfg.Kafka, nil, nil)
	defer w.Close()
	publish := func(spec *crawlv1.CrawlSpec) {
		t.Helper()
		m, err := crawlcontrol.Message(cfg.Kafka.Topics().Control, spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	deleted := timestamppb.New(at)
	publish(&crawlv1.CrawlSpec{CrawlId: "live", Revision: 1})
	publish(&crawlv1.CrawlSpec{CrawlId: "gone-later", Revision: 1})
	publish(&crawlv1.CrawlSpec{CrawlId: "gone-before", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED, DeletedAt: deleted})

	f, err := New(ctx, cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !f.DeletesArchives() {
		t.Fatal("a fetcher with --warc-dir removes no deleted crawl's files")
	}
	rctx, stop := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(rctx)
	g.Go(func() error { return f.FollowSpecs(gctx) })
	g.Go(func() error { return f.DeleteArchives(gctx) })
	g.Go(func() error { return f.Archive()(gctx) })
	for _, wr := range f.Writers() {
		g.Go(func() error { return wr.Run(gctx) })
	}
	defer func() {
		stop()
		if err := g.Wait(); err != nil {
			t.Error(err)
		}
	}()

	poll := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("timed out waiting for %s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	poll("the files of the crawl deleted before the start removed", func() bool { return gone("gone-before") })
	if !exists("live") || !exists("gone-later") {
		t.Fatal("files of crawls not deleted were removed")
	}
	publish(&crawlv1.CrawlSpec{CrawlId: "gone-later", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED, DeletedAt: deleted})
	poll("the files of the crawl deleted while running removed", func() bool { return gone("gone-later") })
	if !exists("live") {
		t.Fatal("the live crawl's files were removed")
	}
}
