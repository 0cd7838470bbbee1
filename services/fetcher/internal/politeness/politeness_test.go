package politeness

import (
	"fmt"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/hostdelay"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// step is one operation of a scripted scenario against a fake clock.
type step struct {
	clock int // ms since t0; the fake clock is set here before the op

	push      string // host to push item onto
	item      string
	notBefore int // ms, 0 for none
	front     bool

	next     bool   // call Next(clock)
	wantHost string // "" means want ok == false
	wantItem string

	done     string // host whose request ended at clock
	release  string
	requeue  string // host whose turn ends with item put back, held until notBefore
	crawl    string // host for SetCrawlDelay
	crawlD   time.Duration
	capped   bool
	backoff  string // host for Backoff until clock+backoffMs
	backoffD time.Duration

	wakeup   bool // check NextWakeup
	wantWake int  // ms; -1 for none
}

func TestEngine(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "first request waits assignment plus delay",
			opts: Options{Delay: time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, next: true},
				{clock: 999, next: true},
				{clock: 999, wakeup: true, wantWake: 1000},
				{clock: 1000, next: true, wantHost: "a", wantItem: "a1"},
			},
		},
		{
			name: "delay counts from the end of the previous request",
			opts: Options{Delay: time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 1000, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 1500, done: "a"},
				{clock: 2499, next: true},
				{clock: 2499, wakeup: true, wantWake: 2500},
				{clock: 2500, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "one request per host at a time",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 100, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 5000, next: true},
				{clock: 5000, wakeup: true, wantWake: -1},
				{clock: 5000, done: "a"},
				{clock: 5099, next: true},
				{clock: 5100, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "slow host does not stall others",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "slow", item: "s1"},
				{clock: 0, push: "slow", item: "s2"},
				{clock: 0, push: "b", item: "b1"},
				{clock: 0, push: "b", item: "b2"},
				{clock: 100, next: true, wantHost: "b", wantItem: "b1"},
				{clock: 100, next: true, wantHost: "slow", wantItem: "s1"},
				{clock: 110, done: "b"},
				{clock: 210, next: true, wantHost: "b", wantItem: "b2"},
				{clock: 9000, next: true},
			},
		},
		{
			name: "fifo per host and earliest host first",
			opts: Options{Delay: 10 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 0, push: "b", item: "b1"},
				{clock: 10, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 10, done: "a"},
				{clock: 30, next: true, wantHost: "b", wantItem: "b1"},
				{clock: 30, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "crawl delay raises the host delay",
			opts: Options{Delay: time.Second, MaxCrawlDelay: 30 * time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 1000, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 1000, crawl: "a", crawlD: 5 * time.Second},
				{clock: 1200, done: "a"},
				{clock: 6199, next: true},
				{clock: 6200, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "crawl delay is capped",
			opts: Options{Delay: time.Second, MaxCrawlDelay: 3 * time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 1000, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 1000, crawl: "a", crawlD: time.Hour, capped: true},
				{clock: 1000, done: "a"},
				{clock: 3999, next: true},
				{clock: 4000, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "crawl delay below default keeps default",
			opts: Options{Delay: time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 1000, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 1000, crawl: "a", crawlD: time.Millisecond},
				{clock: 1000, done: "a"},
				{clock: 1999, next: true},
				{clock: 2000, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "robots slot then page waits the delay again",
			opts: Options{Delay: 200 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "page"},
				{clock: 200, next: true, wantHost: "a", wantItem: "page"},
				// the worker spent the slot on robots.txt and hands the page back
				{clock: 250, done: "a"},
				{clock: 250, push: "a", item: "page", front: true},
				{clock: 250, push: "a", item: "later"},
				{clock: 449, next: true},
				{clock: 450, next: true, wantHost: "a", wantItem: "page"},
			},
		},
		{
			name: "release keeps the next-allowed time",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "denied"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 100, next: true, wantHost: "a", wantItem: "denied"},
				{clock: 100, release: "a"},
				{clock: 100, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
		{
			name: "not before holds the host",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "a1", notBefore: 700},
				{clock: 0, push: "b", item: "b1"},
				{clock: 0, wakeup: true, wantWake: 100},
				{clock: 100, next: true, wantHost: "b", wantItem: "b1"},
				{clock: 100, wakeup: true, wantWake: 700},
				{clock: 699, next: true},
				{clock: 700, next: true, wantHost: "a", wantItem: "a1"},
			},
		},
		{
			name: "an item not yet due holds back no other item of its host",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "retry", notBefore: 700},
				{clock: 0, push: "a", item: "a2"},
				{clock: 0, wakeup: true, wantWake: 100},
				{clock: 100, next: true, wantHost: "a", wantItem: "a2"},
				{clock: 150, done: "a"},
				{clock: 150, wakeup: true, wantWake: 700},
				{clock: 699, next: true},
				{clock: 700, next: true, wantHost: "a", wantItem: "retry"},
			},
		},
		{
			name: "a due item keeps its place in push order",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "retry", notBefore: 150},
				{clock: 0, push: "a", item: "a2"},
				{clock: 0, push: "a", item: "a3"},
				{clock: 100, next: true, wantHost: "a", wantItem: "a2"},
				{clock: 100, done: "a"},
				{clock: 200, next: true, wantHost: "a", wantItem: "retry"},
				{clock: 200, done: "a"},
				{clock: 300, next: true, wantHost: "a", wantItem: "a3"},
			},
		},
		{
			name: "requeue holds the whole host until its time",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 100, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 100, requeue: "a", item: "a1", notBefore: 500},
				{clock: 100, wakeup: true, wantWake: 500},
				{clock: 499, next: true},
				{clock: 500, next: true, wantHost: "a", wantItem: "a1"},
			},
		},
		{
			name: "backoff after 429 is capped",
			opts: Options{Delay: 100 * time.Millisecond, MaxCrawlDelay: 2 * time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "a1"},
				{clock: 0, push: "a", item: "a2"},
				{clock: 100, next: true, wantHost: "a", wantItem: "a1"},
				{clock: 150, done: "a"},
				{clock: 150, backoff: "a", backoffD: time.Hour},
				{clock: 2149, next: true},
				{clock: 2150, next: true, wantHost: "a", wantItem: "a2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := t0
			e := New[string](func() time.Time { return clock }, tt.opts)
			play(t, e, &clock, tt.steps)
		})
	}
}

// play runs steps against e, setting *clock (e's clock) before each.
func play(t *testing.T, e *Engine[string], clock *time.Time, steps []step) {
	t.Helper()
	for i, s := range steps {
		*clock = at(s.clock)
		where := fmt.Sprintf("step %d (t=%dms)", i, s.clock)
		switch {
		case s.push != "" && s.front:
			e.PushFront(s.push, s.item)
		case s.push != "":
			var nb time.Time
			if s.notBefore > 0 {
				nb = at(s.notBefore)
			}
			e.Push(s.push, s.item, nb)
		case s.next:
			host, item, ok := e.Next(*clock)
			if s.wantHost == "" {
				if ok {
					t.Fatalf("%s: Next = %q %q, want nothing eligible", where, host, item)
				}
				continue
			}
			if !ok || host != s.wantHost || item != s.wantItem {
				t.Fatalf("%s: Next = %q %q %v, want %q %q", where, host, item, ok, s.wantHost, s.wantItem)
			}
		case s.done != "":
			e.Done(s.done, *clock)
		case s.release != "":
			e.Release(s.release)
		case s.requeue != "":
			e.Requeue(s.requeue, s.item, at(s.notBefore))
		case s.crawl != "":
			if got := e.SetCrawlDelay(s.crawl, s.crawlD); got != s.capped {
				t.Fatalf("%s: SetCrawlDelay capped = %v, want %v", where, got, s.capped)
			}
		case s.backoff != "":
			e.Backoff(s.backoff, clock.Add(s.backoffD))
		case s.wakeup:
			w, ok := e.NextWakeup()
			if s.wantWake < 0 {
				if ok {
					t.Fatalf("%s: NextWakeup = %v, want none", where, w)
				}
				continue
			}
			if !ok || !w.Equal(at(s.wantWake)) {
				t.Fatalf("%s: NextWakeup = %v %v, want %v", where, w.Sub(t0), ok, time.Duration(s.wantWake)*time.Millisecond)
			}
		default:
			t.Fatalf("%s: empty step", where)
		}
	}
}

// TestEngineNeverViolatesDelay drives many hosts through a simulated
// dispatcher with random-ish request durations and checks the invariant on
// every request: start >= previous end + delay, and one in flight per host.
func TestEngineNeverViolatesDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	clock := t0
	e := New[int](func() time.Time { return clock }, Options{Delay: delay})
	hosts := []string{"a", "b", "c", "d", "e"}
	total := 0
	for i := range 200 {
		e.Push(hosts[i%len(hosts)], i, time.Time{})
		total++
	}
	type flight struct {
		host string
		end  time.Time
	}
	var inflight []flight
	lastEnd := map[string]time.Time{}
	active := map[string]bool{}
	seen := 0
	for steps := 0; seen < total && steps < 100000; steps++ {
		// start everything eligible (3 workers)
		for len(inflight) < 3 {
			host, _, ok := e.Next(clock)
			if !ok {
				break
			}
			if active[host] {
				t.Fatalf("host %s dispatched twice concurrently", host)
			}
			if le, ok := lastEnd[host]; ok && clock.Sub(le) < delay {
				t.Fatalf("host %s started %v after previous end, want >= %v", host, clock.Sub(le), delay)
			}
			if clock.Before(t0.Add(delay)) {
				t.Fatalf("host %s started before assignment + delay", host)
			}
			active[host] = true
			seen++
			inflight = append(inflight, flight{host: host, end: clock.Add(time.Duration(seen%7) * 13 * time.Millisecond)})
		}
		// advance the clock to the next event
		next := clock.Add(time.Hour)
		if w, ok := e.NextWakeup(); ok && len(inflight) < 3 && w.Before(next) {
			next = w
		}
		for _, f := range inflight {
			if f.end.Before(next) {
				next = f.end
			}
		}
		if next.Before(clock) {
			next = clock
		}
		clock = next
		kept := inflight[:0]
		for _, f := range inflight {
			if !f.end.After(clock) {
				e.Done(f.host, f.end)
				lastEnd[f.host] = f.end
				active[f.host] = false
				continue
			}
			kept = append(kept, f)
		}
		inflight = kept
	}
	if seen != total {
		t.Fatalf("dispatched %d of %d items", seen, total)
	}
	if e.Len() != 0 {
		t.Fatalf("Len = %d after draining", e.Len())
	}
}

func TestEngineForgetsIdleHosts(t *testing.T) {
	clock := t0
	e := New[int](func() time.Time { return clock }, Options{Delay: 10 * time.Millisecond})
	for i := range 10000 {
		host := fmt.Sprintf("h%d", i)
		e.Push(host, i, time.Time{})
		clock = clock.Add(20 * time.Millisecond)
		h, _, ok := e.Next(clock)
		if !ok || h != host {
			t.Fatalf("Next = %q %v, want %q", h, ok, host)
		}
		if got := e.Hosts(); got != 1 {
			t.Fatalf("Hosts = %d while one is in flight", got)
		}
		e.Done(host, clock)
	}
	if got := e.Hosts(); got != 0 {
		t.Fatalf("Hosts = %d after all done", got)
	}
	if n := len(e.hosts); n > 2*minSweep {
		t.Fatalf("engine remembers %d hosts, want bounded", n)
	}
}

// TestWhenIdle: f runs only for a host with no turn in progress and
// nothing queued, and no turn of the host can be taken while it runs.
func TestWhenIdle(t *testing.T) {
	clock := t0
	e := New[int](func() time.Time { return clock }, Options{Delay: time.Millisecond})
	ran := func(host string) bool { return e.WhenIdle(host, func() {}) }
	if !ran("unknown") {
		t.Error("unknown host: f did not run")
	}
	e.Push("h", 1, time.Time{})
	e.Push("h", 2, time.Time{})
	if ran("h") {
		t.Error("host with requests queued: f ran")
	}
	for turn, left := range []int{1, 0} { // requests of h queued during the turn
		clock = clock.Add(time.Second)
		if h, _, ok := e.Next(clock); !ok || h != "h" {
			t.Fatalf("turn %d: Next = %q %v, want h", turn, h, ok)
		}
		if ran("h") {
			t.Errorf("turn %d, %d queued: f ran while the host is in its turn", turn, left)
		}
		e.Done("h", clock)
	}
	if !ran("h") {
		t.Error("host done, nothing queued: f did not run")
	}

	// No turn can be taken while f runs: the engine is locked.
	e.WhenIdle("h", func() {
		if e.mu.TryLock() {
			e.mu.Unlock()
			t.Error("engine unlocked while f runs")
		}
	})
}

// BenchmarkEngine measures one push, dispatch and completion across 1000
// hosts.
func BenchmarkEngine(b *testing.B) {
	clock := t0
	e := New[int](func() time.Time { return clock }, Options{Delay: time.Nanosecond})
	hosts := make([]string, 1000)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("host%d", i)
	}
	clock = clock.Add(time.Second)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.Push(hosts[i%len(hosts)], i, time.Time{})
		clock = clock.Add(time.Microsecond)
		if h, _, ok := e.Next(clock); ok {
			e.Done(h, clock)
		}
	}
}

// TestEngineRestoreAndState: a restored host starts at its persisted
// next-allowed time (earlier or later than the one-delay wait of an
// unknown host) with its persisted delay; State reports what to persist,
// pushing an in-flight host's next time past now + delay.
func TestEngineRestoreAndState(t *testing.T) {
	tests := []struct {
		name      string
		restore   *HostState
		wantStart int // ms: first Next that succeeds
		wantDelay time.Duration
	}{
		{name: "unknown host waits one delay", wantStart: 100, wantDelay: 100 * time.Millisecond},
		// A record may predate the previous owner's last requests: never
		// earlier than one (restored) delay after the assignment.
		{name: "persisted time in the past", restore: &HostState{Next: at(-50), Delay: 100 * time.Millisecond}, wantStart: 100, wantDelay: 100 * time.Millisecond},
		{name: "persisted crawl delay and time ahead", restore: &HostState{Next: at(700), Delay: time.Second, BackoffLevel: 2}, wantStart: 1000, wantDelay: time.Second},
		{name: "persisted back-off beyond one delay", restore: &HostState{Next: at(3000), Delay: 100 * time.Millisecond, BackoffLevel: 1}, wantStart: 3000, wantDelay: 100 * time.Millisecond},
		{name: "persisted delay above the cap", restore: &HostState{Next: at(0), Delay: time.Hour}, wantStart: 5000, wantDelay: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := at(0)
			e := New[string](func() time.Time { return clock }, Options{Delay: 100 * time.Millisecond, MaxCrawlDelay: 5 * time.Second})
			if tt.restore != nil {
				e.Restore("h", *tt.restore)
			}
			e.Push("h", "x", time.Time{})
			if tt.wantStart > 0 {
				if _, _, ok := e.Next(at(tt.wantStart - 1)); ok {
					t.Fatalf("started before %dms", tt.wantStart)
				}
			}
			clock = at(tt.wantStart)
			if _, _, ok := e.Next(clock); !ok {
				t.Fatalf("not started at %dms", tt.wantStart)
			}
			st, ok := e.State("h")
			if !ok || st.Delay != tt.wantDelay || !st.Next.Equal(clock.Add(tt.wantDelay)) {
				t.Fatalf("in-flight state = %+v %v, want delay %v and next %v", st, ok, tt.wantDelay, clock.Add(tt.wantDelay))
			}
			clock = clock.Add(30 * time.Millisecond)
			e.Done("h", clock)
			if st := e.States()["h"]; !st.Next.Equal(clock.Add(tt.wantDelay)) {
				t.Fatalf("state after done: next %v, want %v", st.Next, clock.Add(tt.wantDelay))
			}
			if tt.restore != nil && e.BackoffLevel("h") != tt.restore.BackoffLevel {
				t.Fatalf("backoff level %d, want %d", e.BackoffLevel("h"), tt.restore.BackoffLevel)
			}
		})
	}
}

// TestChangedStates: a host's state is handed over only when the next owner
// could not infer it: not for a host at the defaults, once when a
// Crawl-delay raises its delay, at a back-off and at the recovery, and
// while its next request is more than two delays away.
func TestChangedStates(t *testing.T) {
	clock := at(0)
	e := New[string](func() time.Time { return clock }, Options{Delay: 100 * time.Millisecond, MaxCrawlDelay: 5 * time.Second})
	request := func(host string) {
		t.Helper()
		e.Push(host, "x", time.Time{})
		for {
			if h, _, ok := e.Next(clock); ok {
				if h != host {
					t.Fatalf("started %s, want %s", h, host)
				}
				break
			}
			clock = clock.Add(10 * time.Millisecond)
		}
		clock = clock.Add(20 * time.Millisecond)
		e.Done(host, clock)
	}
	changed := func(host string) bool {
		_, ok := e.Changed(host)
		return ok
	}
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"a host at the defaults", func() { request("a") }, false},
		{"again", func() { request("a") }, false},
		{"a Crawl-delay", func() { e.SetHostDelay("a", time.Second, hostdelay.Crawl{}); request("a") }, true},
		{"the same Crawl-delay", func() { request("a") }, false},
		{"a back-off", func() { e.Backoff("a", clock.Add(10*time.Second)) }, true},
		{"still backed off", func() {}, true}, // next more than two delays away
		{"recovered", func() { clock = clock.Add(11 * time.Second); request("a"); e.Recovered("a") }, true},
		{"steady again", func() { request("a") }, false},
		{"unknown host", func() {}, false},
	}
	for _, st := range steps {
		st.do()
		host := "a"
		if st.name == "unknown host" {
			host = "never-seen"
		}
		if got := changed(host); got != st.want {
			t.Fatalf("%s: Changed = %v, want %v", st.name, got, st.want)
		}
	}
	if n := len(e.ChangedStates()); n != 0 {
		t.Errorf("ChangedStates after every change was handed over: %d hosts", n)
	}
}

// TestSetHostDelay checks a crawl's politeness against the engine's floor
// (Delay 1s) and cap (MaxCrawlDelay 30s).
func TestSetHostDelay(t *testing.T) {
	tests := []struct {
		name                           string
		crawlDelay, minDelay, maxCrawl time.Duration
		want                           time.Duration
		capped                         bool
	}{
		{"defaults", 0, 0, 0, time.Second, false},
		{"crawl delay raises", 0, 3 * time.Second, 0, 3 * time.Second, false},
		{"crawl delay below the floor", 0, time.Millisecond, 0, time.Second, false},
		{"robots crawl-delay above the crawl's delay", 5 * time.Second, 2 * time.Second, 0, 5 * time.Second, false},
		{"crawl's cap lower than the engine's", 20 * time.Second, 0, 10 * time.Second, 10 * time.Second, true},
		{"crawl's cap higher than the engine's", 60 * time.Second, 0, 90 * time.Second, 60 * time.Second, false},
		{"crawl's cap below the floor", 5 * time.Second, 0, time.Millisecond, time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New[int](time.Now, Options{Delay: time.Second, MaxCrawlDelay: 30 * time.Second})
			if got := e.SetHostDelay("h", tt.crawlDelay, hostdelay.Crawl{Delay: tt.minDelay, MaxCrawlDelay: tt.maxCrawl}); got != tt.capped {
				t.Errorf("capped = %v, want %v", got, tt.capped)
			}
			st, _ := e.State("h")
			if st.Delay != tt.want {
				t.Errorf("delay = %v, want %v", st.Delay, tt.want)
			}
		})
	}
}

// TestResponseFactor checks that with Options.ResponseFactor a host's next
// request waits the larger of its delay and factor × the last response
// time, capped by MaxCrawlDelay, and that without it only the delay counts.
func TestResponseFactor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		factor float64
		took   time.Duration
		want   time.Duration // gap after the end of the first request
	}{
		{"off", 0, 2 * time.Second, time.Second},
		{"fast response keeps the delay", 4, 100 * time.Millisecond, time.Second},
		{"slow response stretches the gap", 4, 2 * time.Second, 8 * time.Second},
		{"capped at MaxCrawlDelay", 4, 10 * time.Second, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := t0
			e := New[int](func() time.Time { return clock }, Options{Delay: time.Second, MaxCrawlDelay: 30 * time.Second, ResponseFactor: tt.factor})
			e.Push("h", 1, time.Time{})
			e.Push("h", 2, time.Time{})
			clock = clock.Add(time.Second) // past the assignment wait
			if _, item, ok := e.Next(clock); !ok || item != 1 {
				t.Fatalf("first Next = %v, %v", item, ok)
			}
			clock = clock.Add(tt.took)
			e.ObserveDuration("h", tt.took)
			e.Done("h", clock)
			end := clock
			if _, _, ok := e.Next(end.Add(tt.want - time.Millisecond)); ok {
				t.Fatalf("second request allowed before %v", tt.want)
			}
			if _, item, ok := e.Next(end.Add(tt.want)); !ok || item != 2 {
				t.Fatalf("second request not allowed after %v: %v, %v", tt.want, item, ok)
			}
		})
	}
}

// TestOpenHostsAndBacklog: OpenHosts counts the busy hosts with room below
// FullAt (the consumer holds a full host's surplus when there is none),
// and Backlog says how long an item pushed now waits: the host's
// next-allowed time, then a turn (gap plus the last request's duration)
// for every item ahead of it.
func TestOpenHostsAndBacklog(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	e := New[string](clock, Options{Delay: 100 * time.Millisecond, FullAt: 2})
	open := func(want int, when string) {
		t.Helper()
		if got := e.OpenHosts(); got != want {
			t.Errorf("%s: OpenHosts() = %d, want %d", when, got, want)
		}
	}
	open(0, "empty")
	e.Push("a", "a1", time.Time{})
	e.Push("b", "b1", time.Time{})
	open(2, "a and b hold one item each")
	e.Push("a", "a2", time.Time{})
	open(1, "a full")
	e.Push("a", "a3", time.Time{}) // over the bound: still full, not open
	open(1, "a over the bound")
	if q, wait := e.Backlog("a", now); q != 3 || wait != 100*time.Millisecond+3*100*time.Millisecond {
		t.Errorf("Backlog(a) before any request = %d, %v; want 3 items, the first delay and 3 turns of 100ms", q, wait)
	}

	now = at(100)
	if host, _, ok := e.Next(now); !ok || host != "a" {
		t.Fatalf("Next after the first delay = %q, %v; want a (equal times go by name)", host, ok)
	}
	open(1, "a took one, two left: still full")
	e.ObserveDuration("a", 20*time.Millisecond)
	e.Done("a", at(120))
	if q, wait := e.Backlog("a", at(120)); q != 2 || wait != 100*time.Millisecond+2*120*time.Millisecond {
		t.Errorf("Backlog(a) after a 20ms request = %d, %v; want 2 items, the delay and 2 turns of 120ms", q, wait)
	}
	if q, wait := e.Backlog("unknown", at(120)); q != 0 || wait != 0 {
		t.Errorf("Backlog of an unknown host after the first delay = %d, %v; want nothing to wait for", q, wait)
	}
	for _, h := range []string{"a", "b"} { // drain
		for {
			q, _ := e.Backlog(h, now)
			if q == 0 {
				break
			}
			now = now.Add(time.Second)
			if hh, _, ok := e.Next(now); ok {
				e.Done(hh, now)
			}
		}
	}
	open(0, "drained")
}
