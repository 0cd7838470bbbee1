package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

var (
	running   = crawlv1.CrawlState_CRAWL_STATE_RUNNING
	paused    = crawlv1.CrawlState_CRAWL_STATE_PAUSED
	cancelled = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	t0        = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
)

func TestIntake(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	cases := []struct {
		name string
		r    Record
		want Verdict
	}{
		{"recorded before anything", Record{Recorded: true, Published: true, State: cancelled, Spent: yes}, Skip},
		{"published, no row", Record{Published: true, State: cancelled, Spent: yes}, Rebuild},
		{"cancelled", Record{State: cancelled, Spent: yes}, Cancel},
		{"running, spent", Record{State: running, Spent: yes}, Spent},
		{"running, pages left", Record{State: running, Spent: no}, Place},
		{"running, no budget", Record{State: running}, Place},
		{"paused and due", Record{State: paused, NotBefore: t0}, Hold},
		{"paused, no not_before", Record{State: paused}, Hold},
		{"paused, held by a pause already", Record{State: paused, NotBefore: t0.Add(time.Second)}, Place},
		{"paused, spent: the pause wins", Record{State: paused, Spent: yes}, Hold},
		{"unknown state runs as running, without the budget", Record{State: crawlv1.CrawlState_CRAWL_STATE_UNSPECIFIED, Spent: yes}, Place},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Intake(c.r, t0); got != c.want {
				t.Fatalf("Intake = %v, want %v", got, c.want)
			}
		})
	}
}

func TestIntakeAsksTheBudgetOnlyOfARunningCrawl(t *testing.T) {
	for _, st := range []crawlv1.CrawlState{running, paused, cancelled} {
		for _, r := range []Record{{State: st}, {State: st, Recorded: true}, {State: st, Published: true}} {
			asked := false
			r.Spent = func() bool { asked = true; return false }
			Intake(r, t0)
			if want := st == running && !r.Recorded && !r.Published; asked != want {
				t.Errorf("state %v recorded %v published %v: budget asked %v, want %v", st, r.Recorded, r.Published, asked, want)
			}
		}
	}
}

var limits = Limits{MaxHostQueue: 3, MaxHostWait: time.Minute, HoldHorizon: 2 * time.Minute, PauseRecheck: 5 * time.Second}

func TestFull(t *testing.T) {
	cases := []struct {
		name string
		h    Host
		want bool
	}{
		{"empty", Host{OpenHosts: 1, Delay: time.Second, Next: t0}, false},
		{"below the bound", Host{Queued: 2, OpenHosts: 1, Delay: time.Second, Next: t0}, false},
		{"at the bound", Host{Queued: 3, OpenHosts: 1, Delay: time.Second, Next: t0}, true},
		{"at the bound, no other host has room", Host{Queued: 3, Delay: time.Second, Next: t0}, false},
		{"backed off, long wait", Host{Queued: 1, Wait: 2 * time.Minute, Delay: time.Second, Next: t0.Add(90 * time.Second)}, true},
		{"backed off, short wait", Host{Queued: 1, Wait: 30 * time.Second, Delay: time.Second, Next: t0.Add(20 * time.Second)}, false},
		{"backed off, empty queue", Host{Wait: 2 * time.Minute, Delay: time.Second, Next: t0.Add(2 * time.Minute), OpenHosts: 1}, false},
		{"long queue, not backed off", Host{Queued: 2, Wait: 2 * time.Minute, Delay: time.Minute, Next: t0.Add(time.Minute), OpenHosts: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := limits.Full(c.h, t0); got != c.want {
				t.Fatalf("Full = %v, want %v", got, c.want)
			}
		})
	}
}

func TestPlace(t *testing.T) {
	open := Host{Queued: 1, Wait: 2 * time.Second, Delay: time.Second, Next: t0, OpenHosts: 2}
	full := Host{Queued: 3, Wait: 4 * time.Second, Delay: time.Second, Next: t0, OpenHosts: 2}
	far := t0.Add(3 * time.Minute)
	soon := t0.Add(10 * time.Second)
	cases := []struct {
		name      string
		h         Host
		notBefore time.Time
		want      Placement
	}{
		{"room, due now", open, time.Time{}, Placement{Action: Queue, At: time.Time{}}},
		{"room, due soon", open, soon, Placement{Action: Queue, At: soon}},
		{"room, due beyond the horizon", open, far, Placement{Action: Defer, At: far}},
		{"full: the deeper request leaves, due after the queue", full, time.Time{}, Placement{Action: Evict, At: t0.Add(4 * time.Second), Estimated: true}},
		{"full, due soon: At is the queue's, t's own not_before applies when nothing is deeper", full, soon, Placement{Action: Evict, At: t0.Add(4 * time.Second), Estimated: true}},
		{"full, due beyond the horizon", full, far, Placement{Action: Defer, At: far, Estimated: true}},
		{"full beyond the horizon, the queue even later", Host{Queued: 3, Wait: 5 * time.Minute, Delay: time.Second, Next: t0, OpenHosts: 1}, far,
			Placement{Action: Defer, At: t0.Add(5 * time.Minute), Estimated: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := limits.Place(c.h, c.notBefore, t0); got != c.want {
				t.Fatalf("Place = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestRedue: a deferred copy whose due time estimated its full queue's
// drain is due sooner when the queue drains sooner (an idle host: now),
// at the estimate when the queue is still as long, and never before the
// request's own not_before (a retry's back-off).
func TestRedue(t *testing.T) {
	estimate := t0.Add(95 * time.Second)
	cases := []struct {
		name string
		own  time.Time
		h    Host
		want time.Time
	}{
		{"idle host: now", time.Time{}, Host{}, t0},
		{"a short queue ahead: when it drains", time.Time{}, Host{Queued: 10, Wait: 40 * time.Millisecond}, t0.Add(40 * time.Millisecond)},
		{"backed off: after the back-off", time.Time{}, Host{Queued: 1, Wait: 20 * time.Second, Next: t0.Add(20 * time.Second)}, t0.Add(20 * time.Second)},
		{"the queue longer than estimated: the estimate", time.Time{}, Host{Queued: 100, Wait: 3 * time.Minute}, estimate},
		{"its own not_before later: that", t0.Add(30 * time.Second), Host{}, t0.Add(30 * time.Second)},
		{"its own not_before earlier than the queue's drain: the drain", t0.Add(time.Second), Host{Queued: 5, Wait: 10 * time.Second}, t0.Add(10 * time.Second)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Redue(estimate, c.own, c.h, t0); !got.Equal(c.want) {
				t.Fatalf("Redue = %v, want %v", got.Sub(t0), c.want.Sub(t0))
			}
		})
	}
}

func TestHoldUntil(t *testing.T) {
	if got := limits.HoldUntil(t0); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("HoldUntil = %v", got)
	}
}

// FuzzPlace runs a host's queue on Place against a model of what the
// queue must hold: with every request due now and other hosts open, the
// queue holds the MaxHostQueue shallowest requests that arrived (by
// depth; breadth-first whatever the order of arrival), every other one is
// deferred once and due no earlier than now, and nothing is lost or
// doubled.
func FuzzPlace(f *testing.F) {
	f.Add([]byte{3, 2, 1, 0, 5, 5, 0, 9, 1})
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add([]byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0})
	f.Fuzz(func(t *testing.T, depths []byte) {
		if len(depths) > 64 {
			depths = depths[:64]
		}
		type req struct {
			id    int
			depth uint32
		}
		var queue, deferred []req
		for i, d := range depths {
			r := req{id: i, depth: uint32(d % 8)}
			now := t0.Add(time.Duration(i) * time.Millisecond)
			h := Host{Queued: len(queue), Wait: time.Duration(len(queue)) * time.Second, Delay: time.Second, Next: now, OpenHosts: 1}
			p := limits.Place(h, time.Time{}, now)
			if p.At.Before(now) && p.Action != Queue {
				t.Fatalf("request %d: %v due at %v, before now %v", i, p.Action, p.At, now)
			}
			switch p.Action {
			case Queue:
				queue = append(queue, r)
			case Evict: // EvictAbove: the deepest deeper one, the latest pushed
				at := -1
				for j, q := range queue {
					if q.depth > r.depth && (at < 0 || q.depth >= queue[at].depth) {
						at = j
					}
				}
				if at < 0 {
					deferred = append(deferred, r)
					continue
				}
				deferred = append(deferred, queue[at])
				queue = append(slices.Delete(queue, at, at+1), r)
			case Defer:
				deferred = append(deferred, r)
			default:
				t.Fatalf("request %d: action %v", i, p.Action)
			}
			if len(queue) > limits.MaxHostQueue {
				t.Fatalf("request %d: queue of %d over the bound %d", i, len(queue), limits.MaxHostQueue)
			}
		}
		all := make([]uint32, 0, len(depths))
		for _, d := range depths {
			all = append(all, uint32(d%8))
		}
		slices.Sort(all)
		var held []uint32
		for _, q := range queue {
			held = append(held, q.depth)
		}
		slices.Sort(held)
		if want := all[:min(len(all), limits.MaxHostQueue)]; !slices.Equal(held, want) {
			t.Fatalf("queue holds depths %v, want the shallowest %v of %v", held, want, all)
		}
		seen := map[int]bool{}
		for _, r := range append(queue, deferred...) {
			if seen[r.id] {
				t.Fatalf("request %d both queued and deferred, or deferred twice", r.id)
			}
			seen[r.id] = true
		}
		if len(seen) != len(depths) {
			t.Fatalf("%d requests placed, %d arrived", len(seen), len(depths))
		}
	})
}

func TestFetchedBefore(t *testing.T) {
	sched := t0.Add(1500 * time.Millisecond)
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{sched, true},
		{sched.Add(time.Hour), true},
		{t0.Add(time.Second), true}, // the second of scheduled_at: fetched_at has second precision
		{t0.Add(999 * time.Millisecond), false},
		{t0.Add(-time.Hour), false},
	} {
		if got := FetchedBefore(c.at, sched); got != c.want {
			t.Errorf("FetchedBefore(%v, %v) = %v, want %v", c.at, sched, got, c.want)
		}
	}
}

// TestLimitsWithDefaults: a zero or negative bound takes its default, a
// set one is kept.
func TestLimitsWithDefaults(t *testing.T) {
	tests := []struct {
		name     string
		in, want Limits
	}{
		{"zero", Limits{}, Limits{MaxHostQueue: DefaultMaxHostQueue, MaxHostWait: DefaultMaxHostWait, HoldHorizon: DefaultHoldHorizon, PauseRecheck: DefaultPauseRecheck}},
		{"negative", Limits{MaxHostQueue: -1, MaxHostWait: -time.Second}, Limits{MaxHostQueue: DefaultMaxHostQueue, MaxHostWait: DefaultMaxHostWait, HoldHorizon: DefaultHoldHorizon, PauseRecheck: DefaultPauseRecheck}},
		{"set", Limits{MaxHostQueue: 3, MaxHostWait: time.Second, HoldHorizon: 2 * time.Second, PauseRecheck: 3 * time.Second}, Limits{MaxHostQueue: 3, MaxHostWait: time.Second, HoldHorizon: 2 * time.Second, PauseRecheck: 3 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
