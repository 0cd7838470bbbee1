package consume

import (
	"fmt"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/schedtest"
)

// specsConfig is a Config following specs for crawl states, wired as
// the scheduler's app wires it.
func specsConfig(specs *crawlcontrol.Specs) Config {
	return Config{
		Depth:       admit.FixedDepth(16),
		QuotaWindow: time.Hour, // resumes must not wait for a window
		State:       specs.State,
		Changed:     specs.Changed,
		Paused:      config.PausedCrawls(specs),
		Retired:     config.RetiredCrawls(specs),
	}
}

// TestRetiredCrawlsLeaveMemory: a cancelled crawl's fingerprints leave the
// scheduler's memory at its next batch, are not loaded when a partition is
// assigned, and come back from ClickHouse should the crawl run again (its
// URLs are still duplicates then).
func TestRetiredCrawlsLeaveMemory(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	setState(t, specs, "old", 1, crawlv1.CrawlState_CRAWL_STATE_RUNNING)
	var oldRecs, liveRecs []rec
	for i := range 5 {
		oldRecs = append(oldRecs, disc("old", fmt.Sprintf("http://o.example/%d", i), 1))
		liveRecs = append(liveRecs, disc("live", fmt.Sprintf("http://l.example/%d", i), 1))
	}
	seenSize := func(inst *instance) int { return int(testutil.ToFloat64(inst.s.metrics.seenSize)) }

	first := e.startWith(specsConfig(specs), 0)
	e.publish(append(oldRecs, liveRecs...)...)
	e.drain()
	if n := seenSize(first); n != 10 {
		t.Fatalf("seen set holds %d urls, want 10", n)
	}
	setState(t, specs, "old", 2, crawlv1.CrawlState_CRAWL_STATE_CANCELLED)
	e.publish(disc("live", "http://l.example/more", 1))
	e.drain()
	if n := seenSize(first); n != 6 {
		t.Errorf("after old was cancelled the seen set holds %d urls, want live's 6", n)
	}
	first.stop()

	second := e.startWith(specsConfig(specs), 0)
	e.publish(disc("live", "http://l.example/0", 1)) // a batch: the partition is assigned and loaded
	e.drain()
	if n := seenSize(second); n != 6 {
		t.Errorf("a new owner loaded %d urls, want live's 6 (old is cancelled)", n)
	}
	setState(t, specs, "old", 3, crawlv1.CrawlState_CRAWL_STATE_RUNNING)
	e.publish(oldRecs...)
	e.drain()
	if n := seenSize(second); n != 11 {
		t.Errorf("once old runs again the seen set holds %d urls, want 11", n)
	}
	if n := dropped(second.s, admit.Duplicate); n != 6 {
		t.Errorf("%d duplicates dropped, want 6 (live's repeat and old's five, loaded again)", n)
	}
}

func setState(t *testing.T, specs *crawlcontrol.Specs, id string, rev uint64, st crawlv1.CrawlState) {
	t.Helper()
	if !specs.Apply(&crawlv1.CrawlSpec{CrawlId: id, Revision: rev, State: st}) {
		t.Fatalf("spec %s revision %d not applied", id, rev)
	}
}

func serpDisc(crawl, url string) rec {
	r := disc(crawl, url, 1)
	r.u.SerpEngine = "demo"
	return r
}

// eventCounts returns url_events rows per crawl and state/reason.
func (e *env) eventCounts() map[string]int {
	e.t.Helper()
	rows, err := e.store.Conn().Query(e.t.Context(),
		"SELECT concat(crawl_id, ':', state, '/', reason), count() FROM url_events FINAL GROUP BY crawl_id, state, reason")
	if err != nil {
		e.t.Fatalf("query url_events: %v", err)
	}
	defer rows.Close()
	out := make(map[string]int)
	for rows.Next() {
		var (
			k string
			n uint64
		)
		if err := rows.Scan(&k, &n); err != nil {
			e.t.Fatalf("scan url_events: %v", err)
		}
		out[k] = int(n)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	schedtest.WaitFor(t, what, cond)
}

func holdsFor(t *testing.T, window time.Duration, what string, cond func() bool) {
	t.Helper()
	schedtest.HoldsFor(t, window, what, cond)
}

// TestCrawlStates: a running crawl's URLs go out at once carrying their
// SERP engine; a cancelled crawl's URLs are dropped and recorded as
// cancelled; a paused crawl's URLs are held in the frontier until it runs
// again, then released once each with their SERP engine; a crawl cancelled
// while its URLs are held drops them from the frontier.
func TestCrawlStates(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	setState(t, specs, "gone", 1, crawlv1.CrawlState_CRAWL_STATE_CANCELLED)
	setState(t, specs, "paused", 1, crawlv1.CrawlState_CRAWL_STATE_PAUSED)
	setState(t, specs, "paused2", 1, crawlv1.CrawlState_CRAWL_STATE_PAUSED)
	inst := e.startWith(specsConfig(specs), 0)

	want := map[[2]string]uint32{{"run", "http://a.example/s"}: 1}
	recs := []rec{serpDisc("run", "http://a.example/s")}
	for i := range 3 {
		u := fmt.Sprintf("http://b.example/p%d", i)
		recs = append(recs, serpDisc("paused", u), disc("gone", u, 1), disc("paused2", u, 1))
		want[[2]string{"paused", u}] = 1
	}
	e.publish(recs...)
	e.drain()
	// several pump ticks: nothing may leave
	holdsFor(t, 400*time.Millisecond, "one fetch request while paused", func() bool { return len(e.fetches()) <= 1 })
	got := e.fetches()
	if len(got) != 1 || got[0].req.CrawlId != "run" || got[0].req.SerpEngine != "demo" {
		t.Fatalf("fetch requests while paused = %v, want only crawl run's with serp engine demo", got)
	}
	if n := dropped(inst.s, admit.Cancelled); n != 3 {
		t.Errorf("dropped cancelled = %d, want 3", n)
	}

	setState(t, specs, "paused2", 2, crawlv1.CrawlState_CRAWL_STATE_CANCELLED)
	setState(t, specs, "paused", 2, crawlv1.CrawlState_CRAWL_STATE_RUNNING)
	waitFor(t, "held urls released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) >= 3 })
	waitFor(t, "held urls of the cancelled crawl dropped", func() bool { return dropped(inst.s, admit.Cancelled) >= 6 })
	// a wrong second release would show
	holdsFor(t, 400*time.Millisecond, "three held urls released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) <= 3 })
	// Not checkFetches: paused2's URLs were admitted (url_seen) before
	// the crawl was cancelled.
	fetched := make(map[[2]string]int)
	for _, f := range e.fetches() {
		id := [2]string{f.req.CrawlId, f.req.Url}
		fetched[id]++
		if _, ok := want[id]; !ok {
			t.Errorf("unexpected fetch request %v", f.req)
		}
		if f.req.SerpEngine != "demo" {
			t.Errorf("%s %s: serp engine %q, want demo", f.req.CrawlId, f.req.Url, f.req.SerpEngine)
		}
	}
	for id := range want {
		if fetched[id] != 1 {
			t.Errorf("%v fetched %d times, want once", id, fetched[id])
		}
	}
	if n := dropped(inst.s, admit.Cancelled); n != 6 {
		t.Errorf("dropped cancelled = %d, want 6", n)
	}
	ev := e.eventCounts()
	if ev["gone:cancelled/cancelled"] != 3 || ev["paused2:cancelled/cancelled"] != 3 {
		t.Errorf("url_events = %v, want 3 cancelled rows for gone and for paused2", ev)
	}
	var pending uint64
	if err := e.store.Conn().QueryRow(t.Context(), `SELECT count() FROM
		(SELECT fp, max(state) AS st FROM frontier_v2 GROUP BY crawl_id, fp) WHERE st = 0`).Scan(&pending); err != nil {
		t.Fatalf("query frontier_v2: %v", err)
	}
	if pending != 0 {
		t.Errorf("%d frontier rows still pending, want 0", pending)
	}
}

// TestTimeLimit: a crawl past its time limit (limits.max_duration since
// its creation) is cancelled without a new specification: its URLs held in
// the frontier while it was paused are dropped and recorded as cancelled
// when the limit passes (Specs.Changed wakes the pump), its URLs that
// arrive later are dropped as cancelled, its fingerprints leave memory,
// and a crawl without a limit goes on.
func TestTimeLimit(t *testing.T) {
	const limit = 1500 * time.Millisecond
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	created := time.Now()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "timed", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED,
		CreatedAt: timestamppb.New(created), Limits: &crawlv1.Limits{MaxDuration: durationpb.New(limit)}})
	setState(t, specs, "run", 1, crawlv1.CrawlState_CRAWL_STATE_RUNNING)
	inst := e.startWith(specsConfig(specs), 0)

	var recs []rec
	for i := range 3 {
		recs = append(recs, disc("timed", fmt.Sprintf("http://t.example/p%d", i), 1))
	}
	e.publish(append(recs, disc("run", "http://r.example/a", 1))...)
	e.drain()
	if time.Since(created) >= limit {
		t.Skipf("the machine took %v to admit 4 URLs, past the time limit of %v: the held URLs were never held", time.Since(created), limit)
	}
	if n := dropped(inst.s, admit.Cancelled); n != 0 {
		t.Fatalf("%d URLs dropped as cancelled before the time limit", n)
	}
	waitFor(t, "held urls of the timed-out crawl dropped", func() bool { return dropped(inst.s, admit.Cancelled) >= 3 })
	if waited := time.Since(created); waited < limit {
		t.Fatalf("held URLs dropped after %v, before the time limit of %v", waited, limit)
	}
	e.publish(disc("timed", "http://t.example/late", 1), disc("run", "http://r.example/b", 1))
	e.drain()
	if n := dropped(inst.s, admit.Cancelled); n != 4 {
		t.Errorf("dropped cancelled = %d, want 4 (3 held, 1 late)", n)
	}
	for _, f := range e.fetches() {
		if f.req.CrawlId != "run" {
			t.Errorf("fetch request of crawl %s: %s", f.req.CrawlId, f.req.Url)
		}
	}
	if n := len(e.fetches()); n != 2 {
		t.Errorf("%d fetch requests, want run's 2", n)
	}
	ev := e.eventCounts()
	if ev["timed:cancelled/cancelled"] != 4 {
		t.Errorf("url_events = %v, want 4 cancelled rows for timed", ev)
	}
	var pending uint64
	if err := e.store.Conn().QueryRow(t.Context(), `SELECT count() FROM
		(SELECT fp, max(state) AS st FROM frontier_v2 GROUP BY crawl_id, fp) WHERE st = 0`).Scan(&pending); err != nil {
		t.Fatalf("query frontier_v2: %v", err)
	}
	if pending != 0 {
		t.Errorf("%d frontier rows still pending, want 0", pending)
	}
	if n := int(testutil.ToFloat64(inst.s.metrics.seenSize)); n != 2 {
		t.Errorf("seen set holds %d urls, want run's 2 (timed is retired)", n)
	}
}

// TestSerpEngineThroughQuota: a URL deferred by the host quota keeps its
// SERP engine when the pump releases it.
func TestSerpEngineThroughQuota(t *testing.T) {
	e := newEnv(t)
	inst := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 1, QuotaWindow: 100 * time.Millisecond}, 0)
	want := make(map[[2]string]uint32)
	var recs []rec
	for i := range 3 {
		u := fmt.Sprintf("http://serp.example/q%d", i)
		recs = append(recs, serpDisc("c1", u))
		want[[2]string{"c1", u}] = 1
	}
	e.publish(recs...)
	e.drain()
	waitFor(t, "deferred urls released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) >= 2 })
	checkFetches(t, e, want)
	for _, f := range e.fetches() {
		if f.req.SerpEngine != "demo" {
			t.Errorf("%s: serp engine %q, want demo", f.req.Url, f.req.SerpEngine)
		}
	}
}

// TestPerHostBudget: with a per-host budget of 2 each host gets two URLs of
// the crawl admitted and the rest recorded as budget_exhausted; the count
// survives a restart (reloaded from url_seen); other crawls are unlimited.
func TestPerHostBudget(t *testing.T) {
	e := newEnv(t)
	cfg := Config{
		Depth:      admit.FixedDepth(16),
		HostLimit:  func(id string) int64 { return map[string]int64{"ph": 2}[id] },
		HostCounts: sinks.CountHosts(e.store),
	}
	first := e.startWith(cfg, 0)
	want := make(map[[2]string]uint32)
	var recs []rec
	for i := range 3 {
		for _, host := range []string{"h1.example", "h2.example"} {
			u := fmt.Sprintf("http://%s/p%d", host, i)
			recs = append(recs, disc("ph", u, 1), disc("free", u, 1))
			want[[2]string{"free", u}] = 1
			if i < 2 {
				want[[2]string{"ph", u}] = 1
			}
		}
	}
	e.publish(recs...)
	e.drain()
	if n := dropped(first.s, admit.HostBudgetExhausted); n != 2 {
		t.Errorf("host budget drops = %d, want 2", n)
	}
	first.stop()
	second := e.startWith(cfg, 0)
	e.publish(disc("ph", "http://h1.example/later", 1), disc("ph", "http://h3.example/new", 1))
	want[[2]string{"ph", "http://h3.example/new"}] = 1
	e.drain()
	if n := dropped(second.s, admit.HostBudgetExhausted); n != 1 {
		t.Errorf("host budget drops after restart = %d, want 1 (h1 full, h3 new)", n)
	}
	checkFetches(t, e, want)
	if ev := e.eventCounts(); ev["ph:budget_exhausted/host_budget_exhausted"] != 3 {
		t.Errorf("url_events = %v, want 3 host_budget_exhausted rows for crawl ph", ev)
	}
}
