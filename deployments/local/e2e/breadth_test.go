package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// graphSite serves one host of a fixed link graph: each path's page links
// the URLs listed for it (absolute, so one host may link another), and
// robots.txt carries an optional Crawl-delay. It logs every request.
type graphSite struct {
	base  string
	links map[string][]string // path → absolute URLs it links

	mu       sync.Mutex
	requests []graphRequest
}

type graphRequest struct {
	path string
	at   time.Time
}

func startGraphSite(t *testing.T, ip string, crawlDelay int) *graphSite {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &graphSite{base: "http://" + ln.Addr().String(), links: map[string][]string{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Content-Type", "text/plain")
			if crawlDelay > 0 {
				fmt.Fprintf(w, "User-agent: *\nCrawl-delay: %d\n", crawlDelay)
			}
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, graphRequest{path: r.URL.Path, at: time.Now()})
		links, ok := s.links[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><body><p>page %s</p>", r.URL.Path, r.URL.Path)
		for _, l := range links {
			fmt.Fprintf(w, `<a href="%s">%s</a> `, l, l)
		}
		fmt.Fprint(w, "</body>")
	})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// page adds path, linking links (absolute URLs). Call before the crawl.
func (s *graphSite) page(path string, links ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.links[path] = links
}

func (s *graphSite) snapshot() []graphRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.requests)
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// TestBreadthFirstBudget crawls two hosts under a page budget that stops
// the crawl, and checks, on each host, that every page fetched at depth k
// was fetched after every page of the host at a depth below k: a
// budget-stopped crawl has the shallowest pages.
//
// The site is built so that discovery order is not depth order: host X
// (the fetcher's 100 ms delay) is a chain X/ → X/1 → X/2 whose pages link
// into host Y at depth 2 (Y/x1) and 3 (Y/x2); host Y (Crawl-delay 2 s) has
// its own tree Y/ → p1, p2 (depth 1) → q1, q2 (2) → r11, r12, r21, r22
// (3). X runs ahead, so Y/x1 and Y/x2 reach Y's queue before Y/ is even
// fetched, and p1 and p2 only after: a first-in first-out host queue
// fetches Y/x1 (depth 2) and Y/x2 (depth 3) before p1 (depth 1). With
// depth-ordered host queues p1 and p2 go first. The budget of 12 pages
// (of 14) is reached at depth 3: the last two r pages are refused.
func TestBreadthFirstBudget(t *testing.T) {
	const budget = 12
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 1, PagesPerHost: 1, FirstHostOctet: 250}, delay: 100 * time.Millisecond})
	x := startGraphSite(t, "127.0.0.251", 0)
	y := startGraphSite(t, "127.0.0.252", 2)
	x.page("/", x.base+"/1")
	x.page("/1", x.base+"/2", y.base+"/x1")
	x.page("/2", y.base+"/x2")
	y.page("/", y.base+"/p1", y.base+"/p2")
	y.page("/x1")
	y.page("/x2")
	for _, p := range []string{"1", "2"} {
		y.page("/p"+p, y.base+"/q"+p)
		y.page("/q"+p, y.base+"/r"+p+"1", y.base+"/r"+p+"2")
		y.page("/r" + p + "1")
		y.page("/r" + p + "2")
	}
	depth := map[string]map[string]int{
		x.base: {"/": 0, "/1": 1, "/2": 2},
		y.base: {"/": 0, "/p1": 1, "/p2": 1, "/x1": 2, "/q1": 2, "/q2": 2, "/x2": 3, "/r11": 3, "/r12": 3, "/r21": 3, "/r22": 3},
	}

	w := kafkaio.NewWriter(e.p.Kafka, nil, nil)
	spec := &crawlv1.CrawlSpec{CrawlId: e.crawlID, Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Limits: &crawlv1.Limits{MaxPages: budget}}
	m, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, m); err != nil {
		t.Fatalf("publish crawl spec: %v", err)
	}
	_ = w.Close()
	e.seed(ctx, []string{x.base + "/", y.base + "/"}, "")
	e.drain(ctx, 150*time.Second)
	e.stop()

	fetched := checkDepthOrder(t, depth, x, y)
	refused := e.budgetRefused(ctx)
	t.Logf("%d pages fetched, %d refused by the budget of %d", fetched, refused, budget)
	if fetched != budget || refused == 0 {
		t.Errorf("%d pages fetched and %d refused: want the budget of %d to stop the crawl", fetched, refused, budget)
	}
}

// budgetRefused counts the crawl's URLs refused by its page budget: by the
// fetcher (fetch_log rows of kind budget_exhausted) or by the scheduler's
// admission ceiling (url_events).
func (e *crawlEnv) budgetRefused(ctx context.Context) uint64 {
	e.t.Helper()
	var fetcher, scheduler uint64
	if err := e.p.Store.Conn().QueryRow(ctx,
		"SELECT uniqExact(url_fp) FROM fetch_log WHERE crawl_id = ? AND error_kind = 'budget_exhausted'", e.crawlID).Scan(&fetcher); err != nil {
		e.t.Fatalf("query fetch_log: %v", err)
	}
	if err := e.p.Store.Conn().QueryRow(ctx,
		"SELECT count() FROM url_events FINAL WHERE crawl_id = ? AND reason = 'budget_exhausted'", e.crawlID).Scan(&scheduler); err != nil {
		e.t.Fatalf("query url_events: %v", err)
	}
	return fetcher + scheduler
}

// checkDepthOrder checks, on each site, that every page fetched at depth k
// was fetched after every page of the site at a depth below k (depth: the
// site's pages and their depths), and that no page was requested twice.
// It returns the pages fetched.
func checkDepthOrder(t *testing.T, depth map[string]map[string]int, sites ...*graphSite) (fetched int) {
	t.Helper()
	for _, site := range sites {
		reqs := site.snapshot()
		var order []string
		seen := map[string]bool{}
		for _, r := range reqs {
			d, ok := depth[site.base][r.path]
			if !ok {
				t.Errorf("%s%s requested: not a page of the site", site.base, r.path)
				continue
			}
			order = append(order, fmt.Sprintf("%s(%d)", r.path, d))
			if seen[r.path] {
				t.Errorf("%s%s requested twice", site.base, r.path)
			}
			seen[r.path] = true
		}
		t.Logf("%s fetched in this order: %s", site.base, strings.Join(order, " "))
		fetched += len(seen)
		for i, r := range reqs {
			d := depth[site.base][r.path]
			for path, shallower := range depth[site.base] {
				if shallower >= d {
					continue
				}
				if !slices.ContainsFunc(reqs[:i], func(q graphRequest) bool { return q.path == path }) {
					t.Errorf("%s%s (depth %d) fetched before %s (depth %d) was", site.base, r.path, d, path, shallower)
				}
			}
		}
	}
	return fetched
}

// TestBudgetKeepsShallowPages crawls two hosts under a page budget that
// runs out where host X's links into host Y are still deeper than Y's own
// pages, and checks that the budget, charged when the fetcher starts a
// page, kept each host's shallowest pages: on each host every page fetched
// at depth k after every page below k, and the crawl finished with the
// refused URLs terminal (budget_exhausted).
//
// X (the fetcher's 100 ms delay) is a chain X/ → X/1 → … → X/5 whose page
// X/i links Y/xi at depth i+1; Y (Crawl-delay 2 s) has its own tree Y/ →
// p1, p2 (depth 1) → q1, q2 (2) → r11 … r22 (3). X's six pages and its
// five links into Y are discovered before Y/ is even fetched. Charged at
// admission (before), the budget of 12 went to X's chain, Y/x1…Y/x5 and
// the seeds, Y's p1 and p2 were refused, and Y's site saw / x1(2) x2(3)
// x3(4) …: deep pages and none of depth 1. Charged at the fetch, X takes
// its 6 pages and Y the 6 it starts first, breadth-first: / p1 p2 and
// three of depth 2 (x1 q1 q2); the rest (x2…x5, r11…r22) are refused
// without a request.
func TestBudgetKeepsShallowPages(t *testing.T) {
	const budget = 12
	ctx, cancel := context.WithTimeout(t.Context(), 180*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 1, PagesPerHost: 1, FirstHostOctet: 253}, delay: 100 * time.Millisecond})
	x := startGraphSite(t, "127.0.0.247", 0)
	y := startGraphSite(t, "127.0.0.248", 2)
	const chain = 5
	depth := map[string]map[string]int{x.base: {"/": 0}, y.base: {"/": 0, "/p1": 1, "/p2": 1, "/q1": 2, "/q2": 2}}
	x.page("/", x.base+"/1")
	for i := 1; i <= chain; i++ {
		links := []string{y.base + fmt.Sprintf("/x%d", i)}
		if i < chain {
			links = append(links, x.base+fmt.Sprintf("/%d", i+1))
		}
		x.page(fmt.Sprintf("/%d", i), links...)
		y.page(fmt.Sprintf("/x%d", i))
		depth[x.base][fmt.Sprintf("/%d", i)] = i
		depth[y.base][fmt.Sprintf("/x%d", i)] = i + 1
	}
	y.page("/", y.base+"/p1", y.base+"/p2")
	for _, p := range []string{"1", "2"} {
		y.page("/p"+p, y.base+"/q"+p)
		y.page("/q"+p, y.base+"/r"+p+"1", y.base+"/r"+p+"2")
		y.page("/r" + p + "1")
		y.page("/r" + p + "2")
		depth[y.base]["/r"+p+"1"], depth[y.base]["/r"+p+"2"] = 3, 3
	}

	w := kafkaio.NewWriter(e.p.Kafka, nil, nil)
	spec := &crawlv1.CrawlSpec{CrawlId: e.crawlID, Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Limits: &crawlv1.Limits{MaxPages: budget}}
	m, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, m); err != nil {
		t.Fatalf("publish crawl spec: %v", err)
	}
	_ = w.Close()
	e.seed(ctx, []string{x.base + "/", y.base + "/"}, "")
	e.drain(ctx, 150*time.Second)
	e.stop()

	fetched := checkDepthOrder(t, depth, x, y)
	for _, p := range []string{"/", "/p1", "/p2"} {
		if !slices.ContainsFunc(y.snapshot(), func(r graphRequest) bool { return r.path == p }) {
			t.Errorf("%s%s (depth %d) never fetched: the budget did not keep Y's shallowest pages", y.base, p, depth[y.base][p])
		}
	}
	refused := e.budgetRefused(ctx)
	st := e.crawlStatus(ctx, e.crawlID)
	t.Logf("%d pages fetched, %d refused by the budget of %d; crawl_status %+v", fetched, refused, budget, st)
	if fetched != budget || refused == 0 {
		t.Errorf("%d pages fetched and %d refused: want the budget of %d to stop the crawl", fetched, refused, budget)
	}
	if st.status != "finished" || st.pending != 0 || st.terminal != st.admitted || st.budgetExhausted == 0 || st.failed != 0 ||
		st.fetched+st.budgetExhausted != st.terminal {
		t.Errorf("crawl_status %+v: want finished, every admitted URL terminal: fetched or budget_exhausted", st)
	}
}
