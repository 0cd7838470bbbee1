package partition

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// The turn tests play the adapter's part (package consume's turn.go)
// without a broker: take a turn from the engine, ask the partition, make
// the request against a local server, feed the answer back, on a fake
// clock.

var limitsOf = decide.Limits{MaxHostQueue: 100, MaxHostWait: time.Minute, HoldHorizon: time.Minute}

// running is a turn's input for a running crawl's request whose
// robots.txt is cached, with spent the budget's answer.
func running(spent bool) decide.TurnInput {
	return decide.TurnInput{State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Robots: func() decide.Robots { return decide.Robots{Fresh: true, FetchedAt: t0} },
		Spent:  func() bool { return spent }}
}

// next takes the next turn due at now; it fails the test when none is.
func next(t *testing.T, p *Partition, now time.Time) (string, *Task) {
	t.Helper()
	host, task, ok := p.Engine().Next(now)
	if !ok {
		t.Fatalf("no turn due at %v", now.Sub(t0))
	}
	return host, task
}

// none fails the test when a turn is due at now.
func none(t *testing.T, p *Partition, now time.Time) {
	t.Helper()
	if host, task, ok := p.Engine().Next(now); ok {
		t.Fatalf("a turn of %s (%s) due at %v", host, task.Req.GetUrl(), now.Sub(t0))
	}
}

// TestTurnFetch runs page turns against a local server: a 503 with
// Retry-After backs its host off until then, and records when the retry
// is useful; the next answer, a 200, ends the back-off, and the host's
// delay runs from the end of each request.
func TestTurnFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("<html><body>ok</body></html>"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	host := u.Host
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 10 * time.Second, ResponseHeaderTimeout: 10 * time.Second})

	c := &clock{t0}
	p := newPartition(c, limitsOf)
	busy := task(host, srv.URL+"/busy", 1, 0, false, c.now)
	fine := task(host, srv.URL+"/fine", 2, 0, false, c.now)
	p.Push(busy, time.Time{})
	p.Push(fine, time.Time{})

	turn := func(now time.Time) (*Task, *httpfetch.Response) {
		t.Helper()
		c.now = now
		h, tk := next(t, p, now)
		if step := p.Turn(h, tk, running(false)); step != decide.TakePage {
			t.Fatalf("turn of %s: %v, want take_page", tk.Req.GetUrl(), step)
		}
		step, yielded := p.Page(h, tk, PageTurn{Crawl: hostdelay.Crawl{}, Left: -1, Allowed: true})
		if yielded || step != decide.Fetch {
			t.Fatalf("page step %v yielded %v", step, yielded)
		}
		if step := p.Charged(h, tk, step, true); step != decide.Fetch {
			t.Fatalf("after the charge: %v", step)
		}
		res := f.Fetch(t.Context(), httpfetch.Request{URL: tk.Req.GetUrl(), Host: h})
		p.Fetched(h, tk, Answer{End: now, Took: res.Duration, Status: res.Status, Kind: res.Kind, RetryAfter: res.RetryAfter})
		res.Release()
		return tk, res
	}
	first := t0.Add(time.Second) // a host's first request waits one delay
	got, res := turn(first)
	if got != busy || res.Status != http.StatusServiceUnavailable {
		t.Fatalf("first turn %s status %d", got.Req.GetUrl(), res.Status)
	}
	if !busy.RetryAfterTime().Equal(first.Add(30 * time.Second)) {
		t.Fatalf("retry useful at %v, want the Retry-After's 30s", busy.RetryAfterTime().Sub(first))
	}
	none(t, p, first.Add(29*time.Second))
	got, res = turn(first.Add(30 * time.Second))
	if got != fine || res.Status != http.StatusOK {
		t.Fatalf("second turn %s status %d", got.Req.GetUrl(), res.Status)
	}
	if p.Changed(host) != nil {
		t.Error("a recovered host with its default delay reported as changed")
	}
	again := task(host, srv.URL+"/again", 1, 0, false, c.now)
	p.Push(again, time.Time{})
	none(t, p, first.Add(30*time.Second+999*time.Millisecond))
	if _, tk := next(t, p, first.Add(31*time.Second)); tk != again {
		t.Fatal("the host's next request did not come one delay after the 200")
	}
}

// TestTurnWithoutRequest: a turn that makes no request (cancelled, the
// budget spent, robots.txt's refusal) frees its host without moving its
// clock, and the request leaves the budget's pending set.
func TestTurnWithoutRequest(t *testing.T) {
	c := &clock{t0}
	p := newPartition(c, limitsOf)
	at := t0.Add(time.Second)
	tasks := []*Task{task("a", "http://a/1", 1, 0, true, c.now), task("a", "http://a/2", 1, 0, true, c.now),
		task("a", "http://a/3", 1, 0, true, c.now), task("a", "http://a/4", 1, 0, true, c.now)}
	for _, tk := range tasks {
		p.Push(tk, time.Time{})
	}
	held := func() int { p.unchargedMu.Lock(); defer p.unchargedMu.Unlock(); return len(p.uncharged) }
	if held() != 4 {
		t.Fatalf("%d pending, want 4", held())
	}
	h, tk := next(t, p, at)
	if step := p.Turn(h, tk, decide.TurnInput{State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED}); step != decide.Cancelled {
		t.Fatalf("cancelled crawl: %v", step)
	}
	h, tk = next(t, p, at) // freed at once: no request was made
	step, _ := p.Page(h, tk, PageTurn{Left: 10, Allowed: true})
	if step := p.Charged(h, tk, step, false); step != decide.Refused {
		t.Fatalf("no page left: %v, want refused", step)
	}
	h, tk = next(t, p, at)
	step, _ = p.Page(h, tk, PageTurn{Left: 10, Allowed: false})
	if step := p.Charged(h, tk, step, true); step != decide.Deny {
		t.Fatalf("robots.txt refuses: %v, want deny", step)
	}
	if held() != 1 {
		t.Fatalf("%d pending after three turns without a request, want 1", held())
	}
	h, tk = next(t, p, at)
	p.CutShort(h, tk, at.Add(2*time.Second))
	none(t, p, at.Add(2*time.Second+999*time.Millisecond))
	if _, again := next(t, p, at.Add(3*time.Second)); again != tk {
		t.Fatal("a request cut short did not come back first, one delay after it ended")
	}
}

// TestRobotsTurn: after robots.txt, an allowed request waits for its
// host's delay, the robots.txt's Crawl-delay applied, at the head of its
// queue; a denied one is charged and denied, or refused with no page left.
func TestRobotsTurn(t *testing.T) {
	c := &clock{t0}
	p := newPartition(c, limitsOf)
	first := task("a", "http://a/1", 1, 0, true, c.now)
	second := task("a", "http://a/2", 0, 0, true, c.now)
	p.Push(first, time.Time{})
	at := t0.Add(time.Second)
	h, tk := next(t, p, at)
	if tk != first {
		t.Fatal("the turn is not the only request's")
	}
	p.Push(second, time.Time{}) // shallower: ahead of a request put back by rank, not by PushFront
	step, capped := p.RobotsFetched(h, tk, RobotsTurn{End: at, CrawlDelay: 5 * time.Second, Allowed: true})
	if step != decide.Requeue || capped {
		t.Fatalf("allowed: %v capped %v", step, capped)
	}
	none(t, p, at.Add(4*time.Second))
	h, tk = next(t, p, at.Add(5*time.Second))
	if tk != second {
		t.Fatal("the shallower request is not first after the Crawl-delay")
	}
	step, _ = p.RobotsFetched(h, second, RobotsTurn{End: at.Add(5 * time.Second), Allowed: false})
	if step != decide.Deny || !step.Charges() {
		t.Fatalf("denied: %v", step)
	}
	if got := p.RobotsCharged(second, step, false); got != decide.Refused {
		t.Fatalf("denied with no page left: %v, want refused", got)
	}
	// The robots.txt request ran the host's clock, with its delay back at
	// the default (this robots.txt has no Crawl-delay).
	none(t, p, at.Add(6*time.Second-time.Millisecond))
	if _, tk := next(t, p, at.Add(6*time.Second)); tk != first {
		t.Fatal("the request robots.txt allowed did not come at the host's next turn")
	}
}
