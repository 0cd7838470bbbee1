package chstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// crawlStatus is one row of the documented crawl_status query.
type crawlStatus struct {
	admitted, terminal                                      uint64
	pending                                                 int64
	retrying, fetched, redirected, robotsDenied, failed, cx uint64
	budgetExhausted, dropped                                uint64
	status                                                  string
}

func (c crawlStatus) String() string {
	return fmt.Sprintf("admitted %d terminal %d pending %d retrying %d fetched %d redirected %d robots_denied %d failed %d cancelled %d budget_exhausted %d dropped %d %s",
		c.admitted, c.terminal, c.pending, c.retrying, c.fetched, c.redirected, c.robotsDenied, c.failed, c.cx, c.budgetExhausted, c.dropped, c.status)
}

// queryCrawlStatus runs the documented crawl_status query and returns its
// rows by crawl.
func queryCrawlStatus(ctx context.Context, t *testing.T, s *chstore.Store) map[string]crawlStatus {
	t.Helper()
	var sql string
	for _, q := range readAnalystQueries(t) {
		if q.name == "crawl_status" {
			sql = q.sql
		}
	}
	if sql == "" {
		t.Fatal("no crawl_status query in testdata/analyst_queries.sql")
	}
	rows, err := s.Conn().Query(ctx, strings.TrimSuffix(sql, ";"))
	if err != nil {
		t.Fatalf("crawl_status: %v", err)
	}
	defer rows.Close()
	out := map[string]crawlStatus{}
	for rows.Next() {
		var (
			crawl string
			c     crawlStatus
		)
		if err := rows.Scan(&crawl, &c.admitted, &c.terminal, &c.pending, &c.retrying, &c.fetched, &c.redirected,
			&c.robotsDenied, &c.failed, &c.cx, &c.budgetExhausted, &c.dropped, &c.status); err != nil {
			t.Fatalf("scan crawl_status: %v", err)
		}
		out[crawl] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("crawl_status: %v", err)
	}
	return out
}

// TestCrawlStatus walks one crawl through the states the old crawl_status
// (distinct fingerprints of url_seen against fetch_log) got wrong, writing
// each step's rows with the real writers to the real ClickHouse, as the
// scheduler and the fetcher write them: two admitted URLs with one never
// fetched (and a fetch_log row of a URL never admitted), a pending retry,
// a redirect whose target is admitted, and finally every URL terminal.
// Every row is written twice (a redelivery) and must change nothing.
func TestCrawlStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	now := time.Now().Truncate(time.Second)
	seen := func(crawl string, fp uint64) chstore.SeenRow {
		return chstore.SeenRow{CrawlID: crawl, Partition: uint16(fp % 3), FP: fp, URL: fmt.Sprintf("http://h.test/%d", fp), Depth: 1, FirstSeen: now}
	}
	attempt := func(crawl string, fp uint64, n uint16, status uint16, kind string, final bool) chstore.FetchLogRow {
		at := now.Add(time.Duration(n) * time.Second)
		return chstore.FetchLogRow{CrawlID: crawl, URL: fmt.Sprintf("http://h.test/%d", fp), URLFP: fp, Host: "h.test",
			Partition: uint16(fp % 3), Attempt: n, FetchedAt: at, Status: status, ErrorKind: kind, Final: final, Fetcher: "f"}
	}
	twice := func(rows ...chstore.FetchLogRow) []chstore.FetchLogRow { return append(rows, rows...) }

	const (
		a, b, target, never = 1, 2, 3, 99
	)
	steps := []struct {
		name    string
		seen    []chstore.SeenRow
		fetches []chstore.FetchLogRow
		events  []chstore.URLEventRow
		want    crawlStatus
	}{
		{
			name: "two admitted, one never fetched",
			seen: []chstore.SeenRow{seen("c", a), seen("c", b)},
			// a fetched; a URL never admitted (a robots.txt, a test's
			// request) has a row too, which must not stand in for b
			fetches: twice(attempt("c", a, 0, 200, "", true), attempt("c", never, 0, 200, "", true)),
			events: []chstore.URLEventRow{{CrawlID: "c", URL: "http://h.test/1", URLFP: a, Host: "h.test", State: "duplicate",
				Reason: "duplicate", EventTime: now}},
			want: crawlStatus{admitted: 2, terminal: 1, pending: 1, fetched: 1, dropped: 1, status: "running"},
		},
		{
			name:    "b failed, its retry pending",
			fetches: twice(attempt("c", b, 0, 503, "", false)),
			want:    crawlStatus{admitted: 2, terminal: 1, pending: 1, retrying: 1, fetched: 1, dropped: 1, status: "running"},
		},
		{
			name:    "b's retry redirected; its target admitted, not fetched",
			seen:    []chstore.SeenRow{seen("c", target)},
			fetches: twice(attempt("c", b, 1, 301, "redirect", true)),
			want:    crawlStatus{admitted: 3, terminal: 2, pending: 1, fetched: 1, redirected: 1, dropped: 1, status: "running"},
		},
		{
			name:    "the target fetched: every admitted URL terminal",
			fetches: twice(attempt("c", target, 0, 404, "", true)),
			want:    crawlStatus{admitted: 3, terminal: 3, pending: 0, fetched: 2, redirected: 1, dropped: 1, status: "finished"},
		},
	}
	for _, st := range steps {
		if len(st.seen) > 0 {
			write(ctx, t, s, chstore.URLSeen, append(st.seen, st.seen...))
		}
		if len(st.fetches) > 0 {
			write(ctx, t, s, chstore.FetchLog, st.fetches)
		}
		if len(st.events) > 0 {
			write(ctx, t, s, chstore.URLEvents, append(st.events, st.events...))
		}
		if got := queryCrawlStatus(ctx, t, s)["c"]; got != st.want {
			t.Errorf("%s:\n got %v\nwant %v", st.name, got, st.want)
		}
	}

	// Another crawl ends in the other terminal states: robots-denied,
	// failed after its last retry, failed at once, cancelled by the
	// fetcher, cancelled in the scheduler's frontier (never fetched),
	// refused by the fetcher because the page budget was spent, and one
	// deferred in the frontier, still pending.
	const (
		denied, exhausted, tooLarge, cancelledFetch, cancelledFrontier, deferred, overBudget = 11, 12, 13, 14, 15, 16, 17
	)
	var d []chstore.SeenRow
	for _, fp := range []uint64{denied, exhausted, tooLarge, cancelledFetch, cancelledFrontier, deferred, overBudget} {
		d = append(d, seen("d", fp))
	}
	write(ctx, t, s, chstore.URLSeen, d)
	write(ctx, t, s, chstore.FetchLog, twice(
		attempt("d", denied, 0, 0, "robots_denied", true),
		attempt("d", exhausted, 0, 0, "timeout", false), attempt("d", exhausted, 1, 0, "timeout", false),
		attempt("d", exhausted, 2, 0, "timeout", true),
		attempt("d", tooLarge, 0, 200, "body_too_large", true),
		attempt("d", cancelledFetch, 0, 0, "cancelled", true),
		attempt("d", overBudget, 0, 0, "budget_exhausted", true),
	))
	frontier := func(fp uint64, state uint8) chstore.FrontierRow {
		return chstore.FrontierRow{Partition: uint16(fp % 3), CrawlID: "d", Host: "h.test", FP: fp, Depth: 1,
			URL: fmt.Sprintf("http://h.test/%d", fp), DiscoveredAt: now, State: state, UpdatedAt: now}
	}
	write(ctx, t, s, chstore.Frontier, []chstore.FrontierRow{
		frontier(cancelledFrontier, chstore.FrontierPending), frontier(cancelledFrontier, chstore.FrontierCancelled),
		frontier(deferred, chstore.FrontierPending),
	})
	got := queryCrawlStatus(ctx, t, s)
	want := crawlStatus{admitted: 7, terminal: 6, pending: 1, robotsDenied: 1, failed: 2, cx: 2, budgetExhausted: 1, status: "running"}
	if got["d"] != want {
		t.Errorf("crawl d:\n got %v\nwant %v", got["d"], want)
	}
	if got["c"].status != "finished" {
		t.Errorf("crawl c reads %v after crawl d's rows", got["c"])
	}
}
