package consume

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
)

// specPriority returns the compiled priority rules of crawl "c1", whose
// specification raises /product/ by 50, through the specifications'
// table as the service wires it.
func (e *env) specPriority() func(crawlID string) *priority.Rules {
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c1", Revision: 1, Priority: &crawlv1.Priority{Rules: []*crawlv1.PriorityRule{
		{Pattern: `/product/`, Delta: 50},
	}}})
	return config.SpecPriority(specs, e.log)
}

// event is a url_events row's state, reason and priority.
type event struct {
	state, reason string
	priority      int32
	why           string
}

// events returns the url_events rows of a crawl by URL.
func (e *env) events(crawl string) map[string]event {
	e.t.Helper()
	rows, err := e.store.Conn().Query(e.t.Context(),
		"SELECT url, state, reason, priority, priority_reason FROM url_events FINAL WHERE crawl_id = ?", crawl)
	if err != nil {
		e.t.Fatalf("query url_events: %v", err)
	}
	defer rows.Close()
	out := make(map[string]event)
	for rows.Next() {
		var (
			url string
			ev  event
		)
		if err := rows.Scan(&url, &ev.state, &ev.reason, &ev.priority, &ev.why); err != nil {
			e.t.Fatalf("scan url_events: %v", err)
		}
		out[url] = ev
	}
	return out
}

// TestPriorityAtAdmission: the crawl's rules, a sitemap's <priority> and a
// URL's in-links set its fetch request's priority and reason; a known URL
// that comes back with 4 in-links yields one reprioritize request (not a
// second admission, nor a url_events row); url_events rows carry the
// priority.
func TestPriorityAtAdmission(t *testing.T) {
	e := newEnv(t)
	inst := e.startWith(Config{Depth: admit.FixedDepth(3), Priority: e.specPriority()}, 0)
	sitemap := disc("c1", "http://a.example/from-sitemap", 0)
	sitemap.u.Source, sitemap.u.SitemapPriority = crawlv1.Source_SOURCE_SITEMAP, proto.Float32(1)
	e.publish(
		disc("c1", "http://a.example/product/1", 1),
		disc("c1", "http://a.example/plain", 1),
		sitemap,
		disc("c1", "http://a.example/product/deep", 4), // too deep, recorded with its priority
		disc("c2", "http://a.example/product/1", 1),    // another crawl: no rules
	)
	e.drain()
	want := map[[2]string][2]any{
		{"c1", "http://a.example/product/1"}:    {int32(50), "rule"},
		{"c1", "http://a.example/plain"}:        {int32(0), ""},
		{"c1", "http://a.example/from-sitemap"}: {int32(10), "sitemap"},
		{"c2", "http://a.example/product/1"}:    {int32(0), ""},
	}
	for _, f := range e.fetches() {
		w, ok := want[[2]string{f.req.CrawlId, f.req.Url}]
		if !ok || f.req.Reprioritize {
			t.Errorf("unexpected fetch request %v", f.req)
			continue
		}
		if f.req.Priority != w[0] || f.req.PriorityReason != w[1] {
			t.Errorf("%s %s: priority %d (%q), want %d (%q)", f.req.CrawlId, f.req.Url, f.req.Priority, f.req.PriorityReason, w[0], w[1])
		}
	}

	// The plain page, linked now from 4 pages.
	again := disc("c1", "http://a.example/plain", 2)
	again.u.InLinks = 4
	e.publish(again, disc("c1", "http://a.example/plain", 2)) // and a repeat without in-links: nothing
	e.drain()
	var repri []fetched
	admitted := 0
	for _, f := range e.fetches() {
		if f.req.Reprioritize {
			repri = append(repri, f)
		} else {
			admitted++
		}
	}
	if admitted != len(want) {
		t.Errorf("%d fetch requests, want %d: a known url is not admitted again", admitted, len(want))
	}
	if len(repri) != 1 {
		t.Fatalf("%d reprioritize requests, want 1: %v", len(repri), repri)
	}
	r := repri[0]
	key, p := partitionOf(t, "http://a.example/plain")
	if r.req.Url != "http://a.example/plain" || r.req.Priority != 2 || r.req.PriorityReason != "inlinks" || r.req.Depth != 2 ||
		r.key != key || r.partition != p {
		t.Errorf("reprioritize request %v on partition %d key %q, want priority 2 (inlinks) under key %q on %d", r.req, r.partition, r.key, key, p)
	}
	if got := testutil.ToFloat64(inst.s.metrics.reprioritized); got != 1 {
		t.Errorf("reprioritized_total = %v, want 1", got)
	}
	if n := len(e.seenRows()); n != 4 {
		t.Errorf("url_seen holds %d urls, want 4", n)
	}

	events := e.events("c1")
	wantEvents := map[string]event{
		"http://a.example/product/deep": {"out_of_scope", "too_deep", 50, "rule"},
		// The republish for its in-links writes no row (the URL is
		// admitted: no new discovery); the plain repeat writes the
		// duplicate row, with its own priority.
		"http://a.example/plain": {"duplicate", "duplicate", 0, ""},
	}
	if fmt.Sprint(events) != fmt.Sprint(wantEvents) {
		t.Errorf("url_events of c1 = %v, want %v", events, wantEvents)
	}
}

// TestBreadthFirstSendsNoReprioritize: a crawl whose specification is
// breadth-first gets no priority and no reprioritize request.
func TestBreadthFirstSendsNoReprioritize(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c1", Revision: 1, Priority: &crawlv1.Priority{BreadthFirst: true}})
	inst := e.startWith(Config{Depth: admit.FixedDepth(3), Priority: config.SpecPriority(specs, e.log)}, 0)
	first := disc("c1", "http://a.example/x", 1)
	first.u.InLinks = 8
	again := disc("c1", "http://a.example/x", 1)
	again.u.InLinks = 16
	e.publish(first, again)
	e.drain()
	checkFetches(t, e, map[[2]string]uint32{{"c1", "http://a.example/x"}: 1})
	for _, f := range e.fetches() {
		if f.req.Priority != 0 || f.req.PriorityReason != "" {
			t.Errorf("breadth-first request with priority %d (%q)", f.req.Priority, f.req.PriorityReason)
		}
	}
	if got := testutil.ToFloat64(inst.s.metrics.reprioritized); got != 0 {
		t.Errorf("reprioritized_total = %v, want 0", got)
	}
}

// TestDeferredReleasedBestFirst: URLs deferred by the host quota keep
// their priority in the frontier table and in the released request, and
// the pump releases a host's best first, then the shallowest.
func TestDeferredReleasedBestFirst(t *testing.T) {
	e := newEnv(t)
	inst := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 1, QuotaWindow: 200 * time.Millisecond, Priority: e.specPriority()}, 0)
	want := map[[2]string]uint32{}
	var recs []rec
	for i, depth := range []uint32{1, 3, 2, 3, 1} {
		u := fmt.Sprintf("http://q.example/p%d", i)
		if i == 3 {
			u = "http://q.example/product/p3" // deep, but raised by the rule
		}
		recs = append(recs, disc("c1", u, depth))
		want[[2]string{"c1", u}] = depth
	}
	e.publish(recs...)
	e.drain()
	waitFor(t, "4 deferred URLs released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) >= 4 })
	checkFetches(t, e, want)
	var order []string
	for _, f := range e.fetches() {
		order = append(order, strings.TrimPrefix(f.req.Url, "http://q.example/"))
		if strings.Contains(f.req.Url, "/product/") != (f.req.Priority == 50) ||
			strings.Contains(f.req.Url, "/product/") != (f.req.PriorityReason == "rule") {
			t.Errorf("%s released with priority %d (%q)", f.req.Url, f.req.Priority, f.req.PriorityReason)
		}
	}
	// The first admitted at once; then the frontier: the product page,
	// then by depth.
	if got := strings.Join(order, " "); got != "p0 product/p3 p4 p2 p1" {
		t.Errorf("fetch requests in topic order %q, want %q", got, "p0 product/p3 p4 p2 p1")
	}
	var prio int32
	var why string
	if err := e.store.Conn().QueryRow(t.Context(),
		"SELECT any(priority), any(priority_reason) FROM frontier_v2 WHERE url = 'http://q.example/product/p3'").Scan(&prio, &why); err != nil {
		t.Fatalf("query frontier_v2: %v", err)
	}
	if prio != 50 || why != "rule" {
		t.Errorf("frontier row priority %d (%q), want 50 (rule)", prio, why)
	}
}

// TestCeilingSecondAllowance: past the admission ceiling only URLs whose
// priority is above 0 are admitted, within a second allowance of the
// ceiling's size; a URL dropped as budget_exhausted is admitted when it
// comes back with in-links.
func TestCeilingSecondAllowance(t *testing.T) {
	e := newEnv(t)
	const ceiling = 2
	inst := e.startWith(Config{Depth: admit.FixedDepth(16), Priority: e.specPriority()}, ceiling)
	// One host: one partition, decided in order.
	e.publish(disc("c1", "http://b.example/1", 1), disc("c1", "http://b.example/2", 1),
		disc("c1", "http://b.example/3", 1), disc("c1", "http://b.example/product/4", 5))
	e.drain()
	late := disc("c1", "http://b.example/3", 2)
	late.u.InLinks = 2
	e.publish(late, disc("c1", "http://b.example/5", 1))
	e.drain()
	// Three (the ceiling and two of the allowance) plus the late
	// product page; /5 has no priority.
	checkFetches(t, e, map[[2]string]uint32{
		{"c1", "http://b.example/1"}: 1, {"c1", "http://b.example/2"}: 1,
		{"c1", "http://b.example/product/4"}: 5, {"c1", "http://b.example/3"}: 2,
	})
	if got := dropped(inst.s, admit.BudgetExhausted); got != 2 {
		t.Errorf("%d budget_exhausted drops, want 2 (/3 at first, /5)", got)
	}
}
