package chstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestCrawlTables: the tables a crawl's deletion empties are exactly the
// tables of the migrated schema with a crawl_id column (views aside), the
// fetch log's rollups and the frontier of migration 301 included.
func TestCrawlTables(t *testing.T) {
	s := chtest.NewStore(t)
	got := chstore.CrawlTables()
	want := []string{"change_history", "content_seen", "content_seen_v2", "document_meta", "documents", "documents_carried", "fetch_log", "fetch_per_host_minute",
		"fetch_status_minute", "frontier", "frontier_v2", "links", "links_dropped", "links_dropped_v2", "near_duplicates", "revisits",
		"simhash_bands", "url_events", "url_seen", "warc_files"}
	if !slices.Equal(got, want) {
		t.Errorf("CrawlTables() = %v, want %v", got, want)
	}
	rows, err := s.Conn().Query(t.Context(), `SELECT DISTINCT table FROM system.columns
WHERE database = ? AND name = 'crawl_id'
  AND table IN (SELECT name FROM system.tables WHERE database = ? AND engine LIKE '%MergeTree')
ORDER BY table`, s.Database(), s.Database())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var inDB []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		inDB = append(inDB, name)
	}
	if !slices.Equal(got, inDB) {
		t.Errorf("CrawlTables() = %v, the schema's tables with a crawl_id are %v", got, inDB)
	}
}

// TestAnalystQueriesAfterDelete writes the crawl of TestAnalystQueries,
// deletes crawl-2 (DeleteCrawlRows on every crawl table) and runs every
// analyst query: each answers with crawl-1's rows as before, and none
// with crawl-2's. The mutations are asynchronous: CrawlRows and
// PendingCrawlDeletes follow them to the end. Merges run (a mutation
// needs them), so the raw row counts of the duplicates query are not
// compared.
func TestAnalystQueriesAfterDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	analystQueriesDeleting(ctx, t, s, func(string) error { return nil }, func() string {
		before, err := s.CrawlRows(ctx, "crawl-2")
		if err != nil {
			t.Fatal(err)
		}
		var holding []string
		for table, n := range before {
			if n > 0 {
				holding = append(holding, table)
			}
		}
		slices.Sort(holding)
		// crawl-2's rows as TestAnalystQueries writes them (links: its one
		// link to crawl-1's page)
		if want := []string{"documents", "fetch_log", "fetch_per_host_minute", "fetch_status_minute", "frontier_v2", "links", "url_seen"}; !slices.Equal(holding, want) {
			t.Fatalf("crawl-2 has rows in %v, want %v", holding, want)
		}
		if err := s.DeleteCrawlRows(ctx, "crawl-2", holding); err != nil {
			t.Fatal(err)
		}
		waitDeleted(ctx, t, s, "crawl-2")
		return "crawl-2"
	})
	after, err := s.CrawlRows(ctx, "crawl-1")
	if err != nil {
		t.Fatal(err)
	}
	if after["fetch_log"] == 0 || after["url_seen"] == 0 || after["documents"] == 0 || after["revisits"] == 0 {
		t.Errorf("crawl-1's rows after crawl-2 was deleted: %v", after)
	}
	if err := s.DeleteCrawlRows(ctx, "crawl-2", []string{"robots_txt"}); err == nil {
		t.Error("DeleteCrawlRows on robots_txt, which holds no crawl's rows: no error")
	}
}

// waitDeleted waits until no row of crawlID is left and no mutation
// deleting them is pending.
func waitDeleted(ctx context.Context, t *testing.T, s *chstore.Store, crawlID string) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := s.CrawlRows(ctx, crawlID)
		if err != nil {
			t.Fatal(err)
		}
		pending, err := s.PendingCrawlDeletes(ctx, crawlID)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, c := range left {
			n += c
		}
		if n == 0 && len(pending) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rows of %s left %v, deletes pending in %v", crawlID, left, pending)
		case <-tick.C:
		}
	}
}

// TestDeleteCrawlRowsCluster: in cluster mode (two shards, ZooKeeper) the
// deletion runs on the replicated local tables ON CLUSTER: the crawl's
// rows leave every shard, another crawl's stay.
func TestDeleteCrawlRowsCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), clusterTestTimeout)
	defer cancel()
	_, _, stores := chtest.MigratedCluster(ctx, t, 2, 1, 1)
	s := stores[0]
	now := time.Now().UTC().Truncate(time.Second)
	var seen []chstore.SeenRow
	var fetches []chstore.FetchLogRow
	for i := range 8 { // spread over both shards by partition
		for _, crawl := range []string{"gone", "kept"} {
			seen = append(seen, chstore.SeenRow{CrawlID: crawl, Partition: uint16(i), FP: uint64(i), URL: "http://h.test/", FirstSeen: now})
			fetches = append(fetches, chstore.FetchLogRow{CrawlID: crawl, Partition: uint16(i), URLFP: uint64(i), Host: "h.test", FetchedAt: now, Status: 200, Final: true})
		}
	}
	write(ctx, t, s, chstore.URLSeen, seen)
	write(ctx, t, s, chstore.FetchLog, fetches)
	if err := s.DeleteCrawlRows(ctx, "gone", chstore.CrawlTables()); err != nil {
		t.Fatal(err)
	}
	waitDeleted(ctx, t, s, "gone")
	kept, err := s.CrawlRows(ctx, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if kept["url_seen"] != 8 || kept["fetch_log"] != 8 || kept["fetch_per_host_minute"] == 0 {
		t.Errorf("rows of the crawl kept: %v, want 8 in url_seen and fetch_log and its rollups", kept)
	}
}

// TestPendingCrawlDeletes: a deletion that cannot run yet (merges stopped:
// mutations run in the merge pool) is pending on its table, for its crawl
// only; once merges run it completes.
func TestPendingCrawlDeletes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	if err := s.Conn().Exec(ctx, "SYSTEM STOP MERGES url_seen"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	write(ctx, t, s, chstore.URLSeen, []chstore.SeenRow{{CrawlID: "a.b_c-1", FP: 1, FirstSeen: now}, {CrawlID: "other", FP: 2, FirstSeen: now}})
	if err := s.DeleteCrawlRows(ctx, "a.b_c-1", []string{"url_seen"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		crawl string
		want  []string
	}{{"a.b_c-1", []string{"url_seen"}}, {"other", nil}, {"a.b_c", nil}} {
		got, err := s.PendingCrawlDeletes(ctx, tt.crawl)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("PendingCrawlDeletes(%s) = %v, %v; want %v", tt.crawl, got, err, tt.want)
		}
	}
	if err := s.Conn().Exec(ctx, "SYSTEM START MERGES url_seen"); err != nil {
		t.Fatal(err)
	}
	waitDeleted(ctx, t, s, "a.b_c-1")
	if left, err := s.CrawlRows(ctx, "other"); err != nil || left["url_seen"] != 1 {
		t.Errorf("other crawl's url_seen rows: %v, %v; want 1", left, err)
	}
}
