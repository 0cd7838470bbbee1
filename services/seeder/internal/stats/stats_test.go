package stats_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestPartitions reads the partitions of a crawl's admitted URLs.
func TestPartitions(t *testing.T) {
	s := chtest.NewStore(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	rows := []chstore.SeenRow{
		{CrawlID: "c", Partition: 7, FP: 1, URL: "http://127.0.0.2/a", FirstSeen: now},
		{CrawlID: "c", Partition: 2, FP: 2, URL: "http://127.0.0.3/a", FirstSeen: now},
		{CrawlID: "c", Partition: 7, FP: 3, URL: "http://127.0.0.2/b", FirstSeen: now},
		{CrawlID: "other", Partition: 5, FP: 4, URL: "http://127.0.0.4/", FirstSeen: now},
	}
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+chstore.URLSeen.Name+" ("+strings.Join(chstore.URLSeen.Columns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(chstore.URLSeen.Values(r)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	st := stats.New(s)
	for _, tt := range []struct {
		crawl string
		want  []int
	}{{"c", []int{2, 7}}, {"other", []int{5}}, {"none", []int{}}} {
		got, err := st.Partitions(ctx, tt.crawl)
		if err != nil || !slices.Equal(got, tt.want) || got == nil {
			t.Errorf("Partitions(%s) = %v, %v; want %v", tt.crawl, got, err, tt.want)
		}
	}
}

// TestCountsTerminal: the counts of a crawl walked through the states the
// old counts got wrong (rows written with the real writer's table
// description to the real ClickHouse, each twice, as a redelivery does):
// two admitted URLs with one never fetched are not finished, even with a
// fetch_log row of a URL never admitted; a failed attempt whose retry is
// scheduled leaves its URL pending; a redirect is terminal and its target,
// once admitted, is pending until fetched; then the crawl is finished; a
// URL the fetcher refused because the page budget was spent is terminal.
func TestCountsTerminal(t *testing.T) {
	s := chtest.NewStore(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	st := stats.New(s)
	seen := func(fp uint64) chstore.SeenRow {
		return chstore.SeenRow{CrawlID: "c", Partition: 1, FP: fp, URL: fmt.Sprintf("http://127.0.0.2/%d", fp), FirstSeen: now}
	}
	attempt := func(fp uint64, n uint16, status uint16, kind string, final bool) chstore.FetchLogRow {
		return chstore.FetchLogRow{CrawlID: "c", URLFP: fp, URL: fmt.Sprintf("http://127.0.0.2/%d", fp), Host: "127.0.0.2",
			Attempt: n, FetchedAt: now.Add(time.Duration(n) * time.Second), Status: status, ErrorKind: kind, Final: final}
	}
	steps := []struct {
		name    string
		seen    []chstore.SeenRow
		fetches []chstore.FetchLogRow
		want    jobs.Counts
	}{
		{"two admitted, one never fetched", []chstore.SeenRow{seen(1), seen(2)},
			[]chstore.FetchLogRow{attempt(1, 0, 200, "", true), attempt(99, 0, 200, "", true)},
			jobs.Counts{Admitted: 2, Terminal: 1, Pending: 1, Queued: 1, Fetched: 1}},
		{"a retry pending", nil, []chstore.FetchLogRow{attempt(2, 0, 0, "timeout", false)},
			jobs.Counts{Admitted: 2, Terminal: 1, Pending: 1, Retrying: 1, Fetched: 1, Errors: 1}},
		{"redirected, the target admitted", []chstore.SeenRow{seen(3)}, []chstore.FetchLogRow{attempt(2, 1, 301, "redirect", true)},
			jobs.Counts{Admitted: 3, Terminal: 2, Pending: 1, Queued: 1, Fetched: 1, Errors: 2}},
		{"the target fetched", nil, []chstore.FetchLogRow{attempt(3, 0, 200, "", true)},
			jobs.Counts{Admitted: 3, Terminal: 3, Fetched: 2, Errors: 2, Finished: true}},
		{"one refused by the page budget: terminal, not an error", []chstore.SeenRow{seen(4)},
			[]chstore.FetchLogRow{attempt(4, 0, 0, "budget_exhausted", true)},
			jobs.Counts{Admitted: 4, Terminal: 4, Fetched: 2, Errors: 2, Finished: true}},
	}
	for _, tt := range steps {
		insertRows(ctx, t, s, chstore.URLSeen, append(tt.seen, tt.seen...))
		insertRows(ctx, t, s, chstore.FetchLog, append(tt.fetches, tt.fetches...))
		got, err := st.Counts(ctx, "c")
		if err != nil || got != tt.want {
			t.Errorf("%s: Counts = %+v, %v\nwant %+v", tt.name, got, err, tt.want)
		}
	}
}

func insertRows[T any](ctx context.Context, t *testing.T, s *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	if len(rows) == 0 {
		return
	}
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+table.Name+" ("+strings.Join(table.Columns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(table.Values(r)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

// TestDocumentsWithCarried: a re-crawl's documents are its own and those
// it carried over from an earlier crawl, in URL order across batches of
// lookups, with the earlier text; a page of both is listed once, from the
// crawl's own documents; each in its latest version, read from unmerged
// parts; a carried page without an earlier document is left out; an error
// of fn stops the listing.
func TestDocumentsWithCarried(t *testing.T) {
	ctx := t.Context()
	s := chtest.NewStore(t)
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	const n = 140
	var (
		own, old []chstore.DocumentRow
		carried  []chstore.CarriedRow
		want     []string
	)
	for i := range n {
		url := fmt.Sprintf("http://a.test/u%03d", i)
		carried = append(carried, chstore.CarriedRow{CrawlID: "c1", URL: url, URLFP: uint64(5000 + i), Host: "a.test",
			FromCrawl: "c0", FromURLFP: uint64(1000 + i), CheckedAt: at})
		if i != 7 {
			old = append(old, chstore.DocumentRow{CrawlID: "c0", URL: url, URLFP: uint64(1000 + i), Host: "a.test", FetchedAt: at.Add(-time.Hour),
				Status: 200, Title: fmt.Sprintf("old %d", i), Text: "old text"})
		}
		switch {
		case i%10 == 0:
			own = append(own, chstore.DocumentRow{CrawlID: "c1", URL: url, URLFP: uint64(5000 + i), Host: "a.test", FetchedAt: at,
				Status: 200, Title: fmt.Sprintf("own %d", i), Text: "new text"})
			want = append(want, fmt.Sprintf("%s own %d", url, i))
		case i != 7:
			want = append(want, fmt.Sprintf("%s old %d", url, i))
		}
	}
	own = append(own, chstore.DocumentRow{CrawlID: "c1", URL: "http://a.test/zz", URLFP: 1, Host: "a.test", FetchedAt: at, Title: "last"})
	want = append(want, "http://a.test/zz last")
	// Earlier versions, in parts of their own that are never merged: a
	// page of c1 fetched twice, and a page of c0.
	if err := s.Conn().Exec(ctx, "SYSTEM STOP MERGES "+s.Database()+".documents"); err != nil {
		t.Fatalf("stop merges: %v", err)
	}
	earlier := own[0]
	earlier.FetchedAt, earlier.Title = at.Add(-30*time.Minute), "own earlier"
	older := old[3]
	older.FetchedAt, older.Title, older.Text = at.Add(-2*time.Hour), "older", "older text"
	insertRows(ctx, t, s, chstore.Documents, []chstore.DocumentRow{earlier, older})
	insertRows(ctx, t, s, chstore.Documents, append(own, old...))
	insertRows(ctx, t, s, chstore.Documents, []chstore.DocumentRow{earlier, older})
	insertRows(ctx, t, s, chstore.DocumentsCarried, carried)

	st := stats.New(s)
	var got []string
	if err := st.Documents(ctx, "c1", func(d jobs.Document) error {
		got = append(got, d.URL+" "+d.Title)
		if strings.HasPrefix(d.Title, "old") && (d.Text != "old text" || !d.FetchedAt.Equal(at.Add(-time.Hour))) {
			t.Errorf("%s: text %q fetched at %v, want the earlier crawl's", d.URL, d.Text, d.FetchedAt)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("documents\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	stop := fmt.Errorf("enough")
	calls := 0
	if err := st.Documents(ctx, "c1", func(jobs.Document) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Documents with a failing fn = %v after %d calls, want its error after 1", err, calls)
	}
}
