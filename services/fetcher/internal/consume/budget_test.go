package consume

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/budget"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestPageBudget runs a fetcher whose crawl has a page budget of 4 over one
// host's requests, the deep ones read first: the host's turns take the
// shallowest first, so the budget goes to the depth-1 pages (one of them
// refused by robots.txt, which is a page as it was at admission) and the
// first depth-2 page; the other depth-2 pages get a final fetch_log row of
// kind budget_exhausted and no request. A retry (attempt 1: its URL was
// charged by its first attempt) is fetched although the budget is spent.
// A second fetcher process, started after the first, counts the budget in
// fetch_log: the crawl's new requests are refused without a request, not
// even robots.txt.
func TestPageBudget(t *testing.T) {
	const limit = 4
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := startSite(t, "127.0.0.66", pageHandler("User-agent: *\nDisallow: /private\n"))
	fps := map[string]uint64{}
	write := func(reqs ...*crawlv1.FetchRequest) { writeRequests(ctx, t, kcfg, s, "b", fps, reqs...) }
	// Deep first, as a fast host's links into this one arrive.
	write(&crawlv1.FetchRequest{Url: "/d2a", Depth: 2}, &crawlv1.FetchRequest{Url: "/d2b", Depth: 2},
		&crawlv1.FetchRequest{Url: "/d2c", Depth: 2}, &crawlv1.FetchRequest{Url: "/retry", Depth: 3, Attempt: 1},
		&crawlv1.FetchRequest{Url: "/d1a", Depth: 1}, &crawlv1.FetchRequest{Url: "/d1b", Depth: 1},
		&crawlv1.FetchRequest{Url: "/private", Depth: 1})

	tracker := func() *budget.Tracker {
		return budget.NewTracker(func(crawl string) int64 {
			if crawl == "b" {
				return limit
			}
			return 0
		}, store.CountFetchedPages, time.Now)
	}
	o := Options{Politeness: politeness.Options{Delay: 100 * time.Millisecond}, Budget: tracker()}
	started := time.Now()
	p := startFetcher(ctx, t, kcfg, store, "budget-1", 100, o)
	kinds := func() map[string]string {
		rows, err := store.Conn().Query(ctx, "SELECT url, error_kind, final FROM fetch_log FINAL WHERE crawl_id = 'b'")
		if err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var (
				u, kind string
				final   uint8
			)
			if err := rows.Scan(&u, &kind, &final); err != nil {
				t.Fatal(err)
			}
			if final != 1 {
				kind += " (not final)"
			}
			out[u[len(s.base):]] = kind
		}
		return out
	}
	waitFor(ctx, t, "every request recorded", func() bool { return len(kinds()) == 7 })
	p.stop(t)

	want := map[string]string{"/d1a": "", "/d1b": "", "/private": "robots_denied", "/d2a": "",
		"/d2b": "budget_exhausted", "/d2c": "budget_exhausted", "/retry": ""}
	got := kinds()
	for u, k := range want {
		if got[u] != k {
			t.Errorf("%s: error kind %q, want %q (all: %v)", u, got[u], k, got)
		}
	}
	spans, hits := s.snapshot()
	var order []string
	for _, sp := range spans {
		order = append(order, sp.path)
	}
	t.Logf("the site saw %v", order)
	for _, u := range []string{"/d2b", "/d2c", "/private"} {
		if hits[u] != 0 {
			t.Errorf("%s requested %d times, want no request", u, hits[u])
		}
	}
	if len(order) != 5 || order[0] != "/robots.txt" || order[1] != "/d1a" || order[2] != "/d1b" || order[3] != "/d2a" || order[4] != "/retry" {
		t.Errorf("the site saw %v, want /robots.txt /d1a /d1b /d2a /retry", order)
	}
	if counts, err := store.CountFetchedPages(ctx, []string{"b"}, started); err != nil || len(counts) != 0 {
		t.Errorf("CountFetchedPages before the first request = %v, %v; want none", counts, err)
	}
	counts, err := store.CountFetchedPages(ctx, []string{"b", "none"}, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// 4 charged and the retry's URL (its first attempt, in a real crawl,
	// has a row of its own)
	if counts["b"] != 5 || len(counts) != 1 {
		t.Errorf("CountFetchedPages = %v, want b: 5", counts)
	}

	// A new process: its tracker starts from fetch_log.
	write(&crawlv1.FetchRequest{Url: "/late", Depth: 1})
	o.Budget = tracker()
	p = startFetcher(ctx, t, kcfg, store, "budget-2", 100, o)
	defer p.stop(t)
	waitFor(ctx, t, "the late request recorded", func() bool { return len(kinds()) == 8 })
	if k := kinds()["/late"]; k != "budget_exhausted" {
		t.Errorf("/late: error kind %q after a restart, want budget_exhausted", k)
	}
	if _, hits := s.snapshot(); hits["/late"] != 0 || hits["/robots.txt"] != 1 {
		t.Errorf("after the restart the site saw %v, want nothing more", hits)
	}
}

// TestPageBudgetPrefersShallow gives a crawl a budget of 3 pages and one
// partition holding 3 depth-4 requests of host A and 3 depth-1 requests of
// host B, both hosts at a 150 ms delay, A's read first. The host queues do
// not order A against B; with the budget that short, A's requests yield
// their turns while B's shallower ones would take the last pages: B gets
// the 3 pages, A's requests are refused without a request. Without the
// yield, A and B take turns and A's depth-4 pages take part of the budget.
func TestPageBudgetPrefersShallow(t *testing.T) {
	const limit = 3
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	a := startSite(t, "127.0.0.67", pageHandler(""))
	b := startSite(t, "127.0.0.68", pageHandler(""))
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	fp := uint64(0)
	for _, site := range []struct {
		s     *site
		depth uint32
	}{{a, 4}, {b, 1}} {
		for i := range 3 {
			fp++
			u := fmt.Sprintf("%s/p%d", site.s.base, i)
			key, err := kafkaio.Key(u)
			if err != nil {
				t.Fatal(err)
			}
			m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{
				CrawlId: "s", Url: u, UrlFp: fp, Depth: site.depth, ScheduledAt: timestamppb.Now()})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	tracker := budget.NewTracker(func(string) int64 { return limit }, store.CountFetchedPages, time.Now)
	p := startFetcher(ctx, t, kcfg, store, "shallow", 100, Options{
		Politeness: politeness.Options{Delay: 150 * time.Millisecond}, Budget: tracker})
	defer p.stop(t)
	var spent uint64
	waitFor(ctx, t, "A's requests refused", func() bool {
		if err := store.Conn().QueryRow(ctx,
			"SELECT uniqExact(url_fp) FROM fetch_log WHERE crawl_id = 's' AND error_kind = 'budget_exhausted'").Scan(&spent); err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		return spent+uint64(a.pageHits()+b.pageHits()) >= 6
	})
	t.Logf("A (depth 4): %d pages, B (depth 1): %d pages, %d refused, %v turns yielded",
		a.pageHits(), b.pageHits(), spent, testutil.ToFloat64(p.svc.m.budgetYields))
	if a.pageHits() != 0 || b.pageHits() != limit || spent != 3 {
		t.Errorf("A fetched %d pages and B %d, %d refused; want B's %d shallow pages and none of A's", a.pageHits(), b.pageHits(), spent, limit)
	}
}
