package consume

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/budget"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// fetchLogRow is what the priority tests read of a fetch_log row.
type fetchLogRow struct {
	kind     string
	priority int32
	reason   string
}

// priorityRows returns crawl's final fetch_log rows by path (below base).
func priorityRows(ctx context.Context, t *testing.T, store *chstore.Store, crawl, base string) map[string]fetchLogRow {
	t.Helper()
	rows, err := store.Conn().Query(ctx, "SELECT url, error_kind, priority, priority_reason FROM fetch_log FINAL WHERE crawl_id = ? AND final = 1", crawl)
	if err != nil {
		t.Fatalf("query fetch_log: %v", err)
	}
	defer rows.Close()
	out := map[string]fetchLogRow{}
	for rows.Next() {
		var (
			u string
			r fetchLogRow
		)
		if err := rows.Scan(&u, &r.kind, &r.priority, &r.reason); err != nil {
			t.Fatal(err)
		}
		out[u[len(base):]] = r
	}
	return out
}

// TestPriorityTakesTheBudget: one host's requests of mixed priorities
// and depths, read before the first turn, with a page budget of 3 of 7:
// the three of highest priority are fetched, highest first (a deep page
// of high priority before a shallow one of none), and the rest are
// refused by the budget without a request. fetch_log keeps each request's
// priority and reason.
func TestPriorityTakesTheBudget(t *testing.T) {
	const limit = 3
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := startSite(t, "127.0.0.110", pageHandler(""))
	fps := map[string]uint64{}
	writeRequests(ctx, t, kcfg, s, "p", fps,
		&crawlv1.FetchRequest{Url: "/seed", Depth: 0},
		&crawlv1.FetchRequest{Url: "/p1", Depth: 1},
		&crawlv1.FetchRequest{Url: "/product-deep", Depth: 4, Priority: 50, PriorityReason: "rule"},
		&crawlv1.FetchRequest{Url: "/sort", Depth: 1, Priority: -100, PriorityReason: "rule"},
		&crawlv1.FetchRequest{Url: "/linked", Depth: 2, Priority: 2, PriorityReason: "inlinks"},
		&crawlv1.FetchRequest{Url: "/sitemap", Depth: 3, Priority: 10, PriorityReason: "sitemap+inlinks"},
		&crawlv1.FetchRequest{Url: "/p2", Depth: 1},
	)
	tracker := budget.NewTracker(func(string) int64 { return limit }, store.CountFetchedPages, time.Now)
	p := startFetcher(ctx, t, kcfg, store, "priority", 100, Options{
		Politeness: politeness.Options{Delay: 100 * time.Millisecond}, Budget: tracker})
	waitFor(ctx, t, "every request recorded", func() bool { return len(priorityRows(ctx, t, store, "p", s.base)) == 7 })
	p.stop(t)

	spans, _ := s.snapshot()
	var order []string
	for _, sp := range spans {
		order = append(order, sp.path)
	}
	if want := []string{"/robots.txt", "/product-deep", "/sitemap", "/linked"}; !slices.Equal(order, want) {
		t.Errorf("the site saw %v, want %v", order, want)
	}
	want := map[string]fetchLogRow{
		"/product-deep": {"", 50, "rule"},
		"/sitemap":      {"", 10, "sitemap+inlinks"},
		"/linked":       {"", 2, "inlinks"},
		"/seed":         {"budget_exhausted", 0, ""},
		"/p1":           {"budget_exhausted", 0, ""},
		"/p2":           {"budget_exhausted", 0, ""},
		"/sort":         {"budget_exhausted", -100, "rule"},
	}
	got := priorityRows(ctx, t, store, "p", s.base)
	for u, w := range want {
		if got[u] != w {
			t.Errorf("%s: fetch_log %+v, want %+v", u, got[u], w)
		}
	}
}

// TestReprioritize: a reprioritize record raises a queued request, which
// is then fetched before the requests of lower priority read before it,
// and logged with the raised priority and reason; a reprioritize record
// of a URL the fetcher does not hold, and one that would not raise, fetch
// nothing and are acked (the group's committed offset passes them: the
// last record of the partition is one). None is logged to fetch_log.
func TestReprioritize(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := startSite(t, "127.0.0.111", pageHandler(""))
	fps := map[string]uint64{}
	writeRequests(ctx, t, kcfg, s, "r", fps,
		&crawlv1.FetchRequest{Url: "/a", Depth: 1},
		&crawlv1.FetchRequest{Url: "/b", Depth: 1},
		&crawlv1.FetchRequest{Url: "/c", Depth: 1, Priority: 1, PriorityReason: "sitemap"},
		&crawlv1.FetchRequest{Url: "/d", Depth: 2},
		&crawlv1.FetchRequest{Url: "/d", Depth: 2, Reprioritize: true, Priority: 3, PriorityReason: "inlinks"},
		&crawlv1.FetchRequest{Url: "/c", Depth: 1, Reprioritize: true, Priority: 1, PriorityReason: "inlinks"},
		&crawlv1.FetchRequest{Url: "/elsewhere", Depth: 1, Reprioritize: true, Priority: 9, PriorityReason: "inlinks"},
	)
	p := startFetcher(ctx, t, kcfg, store, "reprioritize", 100, Options{
		Politeness: politeness.Options{Delay: 100 * time.Millisecond}})
	defer p.stop(t)
	waitFor(ctx, t, "every request recorded and every record committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), kcfg.Topics().Fetch)
		return err == nil && lag == 0 && len(priorityRows(ctx, t, store, "r", s.base)) == 4
	})

	spans, hits := s.snapshot()
	var order []string
	for _, sp := range spans {
		order = append(order, sp.path)
	}
	// robots.txt's turn is /d's (raised to the head by then), which it
	// gives back to the head of the queue.
	if want := []string{"/robots.txt", "/d", "/c", "/a", "/b"}; !slices.Equal(order, want) {
		t.Errorf("the site saw %v, want %v", order, want)
	}
	if hits["/elsewhere"] != 0 {
		t.Errorf("/elsewhere requested %d times, want none", hits["/elsewhere"])
	}
	got := priorityRows(ctx, t, store, "r", s.base)
	want := map[string]fetchLogRow{
		"/d": {"", 3, "inlinks"},
		"/c": {"", 1, "sitemap"},
		"/a": {"", 0, ""},
		"/b": {"", 0, ""},
	}
	if len(got) != len(want) {
		t.Errorf("fetch_log rows %v, want only %v", got, want)
	}
	for u, w := range want {
		if got[u] != w {
			t.Errorf("%s: fetch_log %+v, want %+v", u, got[u], w)
		}
	}
	for result, n := range map[string]float64{"raised": 1, "not_higher": 1, "not_queued": 1} {
		if c := testutil.ToFloat64(p.svc.m.reprioritized.WithLabelValues(result)); c != n {
			t.Errorf("reprioritized_total{result=%q} = %v, want %v", result, c, n)
		}
	}
}

// TestRaisedPriorityTravels: a request raised while queued is decoded for
// its turn, and produced again (a deferral, an eviction), with the raised
// priority and the signals that raised it, its other fields unchanged; one
// never raised keeps its own reason as read.
func TestRaisedPriorityTravels(t *testing.T) {
	topics := kafkaio.Topics{Fetch: "fetch"}
	h := &handler{s: &Service{opts: Options{Topics: topics}, enc: emit.New(emit.Options{Topics: topics})}, log: zap.NewNop()}
	taskOf := func(req *crawlv1.FetchRequest) *partition.Task {
		m, err := kafkaio.NewMessage("fetch", []byte("a.example"), req)
		if err != nil {
			t.Fatal(err)
		}
		return h.newTask(m, req, "a.example", time.Now())
	}
	raised := taskOf(&crawlv1.FetchRequest{CrawlId: "c", Url: "http://a.example/x", UrlFp: 7, Depth: 2, Priority: 1, PriorityReason: "sitemap"})
	part := partition.New(partition.Options{Attempts: partition.NewAttempts(16)})
	part.Push(raised, time.Time{})
	if res := part.Raise("a.example", "c", 7, 4, priority.InLinks|priority.Sitemap); res != politeness.Raised {
		t.Fatalf("raise of a queued request: %v", res)
	}
	m, err := h.s.enc.Defer(raised, h.s.request(raised), time.Now(), true)
	if err != nil {
		t.Fatal(err)
	}
	var got crawlv1.FetchRequest
	if err := kafkaio.Decode(m, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetPriority() != 4 || got.GetPriorityReason() != "sitemap+inlinks" || got.GetUrlFp() != 7 || got.GetDepth() != 2 {
		t.Errorf("deferred copy of a raised request: %v", &got)
	}
	if r := h.s.request(raised); r.GetPriority() != 4 || r.GetPriorityReason() != "sitemap+inlinks" {
		t.Errorf("turn's request of a raised request: %v", r)
	}
	kept := taskOf(&crawlv1.FetchRequest{CrawlId: "c", Url: "http://a.example/y", UrlFp: 8, Priority: 2, PriorityReason: "rule+future"})
	if r := h.s.request(kept); r.GetPriority() != 2 || r.GetPriorityReason() != "rule+future" {
		t.Errorf("request never raised: %v, want its own priority and reason", r)
	}
}
