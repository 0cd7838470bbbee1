package politeness

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// depthOf ranks the test items "d<depth><name>" by their depth digit.
func depthOf(item string) uint32 { return uint32(item[1] - '0') }

// TestBreadthFirst: a ranked engine starts a host's items by depth, then
// in push order, whatever order they arrived in, and every politeness rule
// of TestEngine still holds: one request per host, the delay from end to
// start, Requeue's hold, the back-off, hosts independent.
func TestBreadthFirst(t *testing.T) {
	tests := []struct {
		name  string
		opts  Options
		steps []step
	}{
		{
			name: "deep chain found first waits for shallow pages found later",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d0seed"},
				{clock: 0, push: "a", item: "d3chain"},
				{clock: 0, push: "a", item: "d4chain"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d0seed"},
				{clock: 120, push: "a", item: "d1p1"},
				{clock: 120, push: "a", item: "d1p2"},
				{clock: 130, push: "a", item: "d2q1"},
				{clock: 150, done: "a"},
				{clock: 250, next: true, wantHost: "a", wantItem: "d1p1"},
				{clock: 260, done: "a"},
				{clock: 360, next: true, wantHost: "a", wantItem: "d1p2"},
				{clock: 370, done: "a"},
				{clock: 470, next: true, wantHost: "a", wantItem: "d2q1"},
				{clock: 480, done: "a"},
				{clock: 580, next: true, wantHost: "a", wantItem: "d3chain"},
				{clock: 590, done: "a"},
				{clock: 690, next: true, wantHost: "a", wantItem: "d4chain"},
			},
		},
		{
			name: "equal depths keep push order",
			opts: Options{Delay: 10 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d2x"},
				{clock: 0, push: "a", item: "d1b"},
				{clock: 0, push: "a", item: "d2y"},
				{clock: 0, push: "a", item: "d1c"},
				{clock: 10, next: true, wantHost: "a", wantItem: "d1b"},
				{clock: 10, done: "a"},
				{clock: 20, next: true, wantHost: "a", wantItem: "d1c"},
				{clock: 20, done: "a"},
				{clock: 30, next: true, wantHost: "a", wantItem: "d2x"},
				{clock: 30, done: "a"},
				{clock: 40, next: true, wantHost: "a", wantItem: "d2y"},
			},
		},
		{
			name: "a shallow arrival never starts a second request or shortens the delay",
			opts: Options{Delay: time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "d5deep"},
				{clock: 1000, next: true, wantHost: "a", wantItem: "d5deep"},
				{clock: 1100, push: "a", item: "d0seed"},
				{clock: 1100, next: true},
				{clock: 1100, wakeup: true, wantWake: -1},
				{clock: 1500, done: "a"},
				{clock: 2499, next: true},
				{clock: 2500, next: true, wantHost: "a", wantItem: "d0seed"},
			},
		},
		{
			name: "a retry due later does not hold the host, and takes its depth's place once due",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d1retry", notBefore: 250},
				{clock: 0, push: "a", item: "d2a"},
				{clock: 0, push: "a", item: "d2b"},
				{clock: 0, push: "a", item: "d3a"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d2a"},
				{clock: 110, done: "a"},
				{clock: 210, next: true, wantHost: "a", wantItem: "d2b"},
				{clock: 220, done: "a"},
				{clock: 320, next: true, wantHost: "a", wantItem: "d1retry"},
				{clock: 330, done: "a"},
				{clock: 430, next: true, wantHost: "a", wantItem: "d3a"},
			},
		},
		{
			name: "an item pushed back goes before its depth, not before a shallower one",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d2a"},
				{clock: 0, push: "a", item: "d2b"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d2a"},
				// the turn went to robots.txt; a shallower page arrived meanwhile
				{clock: 120, push: "a", item: "d1p"},
				{clock: 150, done: "a"},
				{clock: 150, push: "a", item: "d2a", front: true},
				{clock: 250, next: true, wantHost: "a", wantItem: "d1p"},
				{clock: 260, done: "a"},
				{clock: 360, next: true, wantHost: "a", wantItem: "d2a"},
				{clock: 370, done: "a"},
				{clock: 470, next: true, wantHost: "a", wantItem: "d2b"},
			},
		},
		{
			name: "requeue holds the host whatever its queue holds",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d3a"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d3a"},
				{clock: 110, push: "a", item: "d0s"},
				{clock: 120, requeue: "a", item: "d3a", notBefore: 400},
				{clock: 399, next: true},
				{clock: 399, wakeup: true, wantWake: 400},
				{clock: 400, next: true, wantHost: "a", wantItem: "d0s"},
				{clock: 410, done: "a"},
				{clock: 510, next: true, wantHost: "a", wantItem: "d3a"},
			},
		},
		{
			name: "back-off holds the host whatever its queue holds",
			opts: Options{Delay: 100 * time.Millisecond, MaxCrawlDelay: 10 * time.Second},
			steps: []step{
				{clock: 0, push: "a", item: "d2a"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d2a"},
				{clock: 150, done: "a"},
				{clock: 150, backoff: "a", backoffD: 2 * time.Second},
				{clock: 160, push: "a", item: "d0s"},
				{clock: 2149, next: true},
				{clock: 2150, next: true, wantHost: "a", wantItem: "d0s"},
			},
		},
		{
			name: "depth orders a host's queue, not the hosts",
			opts: Options{Delay: 100 * time.Millisecond},
			steps: []step{
				{clock: 0, push: "a", item: "d5a"},
				{clock: 0, push: "b", item: "d0b"},
				{clock: 100, next: true, wantHost: "a", wantItem: "d5a"},
				{clock: 100, next: true, wantHost: "b", wantItem: "d0b"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := t0
			e := NewRanked(func() time.Time { return clock }, tt.opts, depthOf)
			play(t, e, &clock, tt.steps)
		})
	}
}

// TestBreadthFirstRandom checks the ranked engine against a model on
// random pushes (due and not yet due), turns and back-offs of three
// hosts: every item Next returns is the host's lowest (depth, push order)
// among its items due at that moment, no host has two requests at once,
// two requests of a host are at least the delay apart, and nothing is
// lost or repeated.
func TestBreadthFirstRandom(t *testing.T) {
	const delay = 10 * time.Millisecond
	type queued struct {
		item      string
		notBefore time.Time
		seq       int
	}
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		clock := t0
		e := NewRanked(func() time.Time { return clock }, Options{Delay: delay, MaxCrawlDelay: time.Second}, depthOf)
		model := map[string][]queued{}
		active := map[string]bool{}
		lastEnd := map[string]time.Time{}
		pushed, started := 0, 0
		for step := range 3000 {
			clock = clock.Add(time.Duration(rng.IntN(4)) * time.Millisecond)
			host := fmt.Sprintf("h%d", rng.IntN(3))
			switch op := rng.IntN(10); {
			case op < 4:
				item := fmt.Sprintf("d%d-%d", rng.IntN(6), pushed)
				var nb time.Time
				if rng.IntN(4) == 0 {
					nb = clock.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
				}
				e.Push(host, item, nb)
				model[host] = append(model[host], queued{item, nb, pushed})
				pushed++
			case op < 8:
				got, item, ok := e.Next(clock)
				if !ok {
					continue
				}
				if active[got] {
					t.Fatalf("seed %d step %d: %s started twice", seed, step, got)
				}
				if end, ok := lastEnd[got]; ok && clock.Sub(end) < delay {
					t.Fatalf("seed %d step %d: %s started %s after its last request", seed, step, got, clock.Sub(end))
				}
				best := -1
				for i, q := range model[got] {
					if q.notBefore.After(clock) {
						continue
					}
					if best < 0 || depthOf(q.item) < depthOf(model[got][best].item) ||
						(depthOf(q.item) == depthOf(model[got][best].item) && q.seq < model[got][best].seq) {
						best = i
					}
				}
				if best < 0 || model[got][best].item != item {
					t.Fatalf("seed %d step %d: %s started %s, want the first due by depth of %v", seed, step, got, item, model[got])
				}
				model[got] = append(model[got][:best], model[got][best+1:]...)
				active[got] = true
				started++
			default:
				for h := range active {
					if rng.IntN(3) == 0 {
						e.SlowDown(h, clock, 0)
					}
					e.Done(h, clock)
					lastEnd[h] = clock
					delete(active, h)
					break
				}
			}
		}
		left := 0
		for _, q := range model {
			left += len(q)
		}
		if e.Len() != left || started+left != pushed {
			t.Fatalf("seed %d: engine holds %d, model %d; %d started of %d pushed", seed, e.Len(), left, started, pushed)
		}
	}
}

// TestEvictAbove: a full host queue gives up its deepest, latest item for
// a shallower one, from the ready or the later queue, and nothing when
// every item is at or above the newcomer's rank.
func TestEvictAbove(t *testing.T) {
	clock := t0
	e := NewRanked(func() time.Time { return clock }, Options{Delay: 10 * time.Millisecond}, depthOf)
	e.Push("a", "d1a", time.Time{})
	e.Push("a", "d3a", time.Time{})
	e.Push("a", "d3b", time.Time{})
	e.Push("a", "d4late", at(500))
	e.Push("a", "d2a", time.Time{})
	e.Push("b", "d9b", time.Time{})
	for _, tt := range []struct {
		rank uint32
		want string // "" for none
	}{
		{4, ""},
		{3, "d4late"},
		{1, "d3b"},
		{1, "d3a"},
		{2, ""},
		{1, "d2a"},
		{1, ""},
		{0, "d1a"},
		{0, ""},
	} {
		got, ok := e.EvictAbove("a", tt.rank)
		if (tt.want == "") == ok || got != tt.want {
			t.Fatalf("EvictAbove(a, %d) = %q %v, want %q", tt.rank, got, ok, tt.want)
		}
	}
	if e.Len() != 1 || e.Hosts() != 1 {
		t.Fatalf("after evicting host a: %d queued over %d hosts, want b's 1", e.Len(), e.Hosts())
	}
	if _, ok := e.EvictAbove("unknown", 0); ok {
		t.Fatal("EvictAbove of an unknown host returned an item")
	}
	clock = at(10)
	if h, item, ok := e.Next(clock); !ok || h != "b" || item != "d9b" {
		t.Fatalf("Next = %q %q %v, want b's item", h, item, ok)
	}
}

// BenchmarkHostQueue measures a push and a dispatch of one item through a
// host queue that holds 100 items (the fetcher's --max-host-queue), over
// 100 hosts, first-in first-out (New) and breadth-first (NewRanked, random
// depths 0-15).
func BenchmarkHostQueue(b *testing.B) {
	const hosts, perHost = 100, 100
	for _, ranked := range []bool{false, true} {
		name := "fifo"
		var rank func(int) uint32
		if ranked {
			name, rank = "depth", func(i int) uint32 { return uint32(i*2654435761) % 16 }
		}
		b.Run(name, func(b *testing.B) {
			clock := t0
			e := NewRanked(func() time.Time { return clock }, Options{Delay: time.Nanosecond}, rank)
			names := make([]string, hosts)
			for i := range names {
				names[i] = fmt.Sprintf("host%d", i)
				for j := range perHost {
					e.Push(names[i], i*perHost+j, time.Time{})
				}
			}
			clock = clock.Add(time.Second)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				e.Push(names[i%hosts], i, time.Time{})
				clock = clock.Add(time.Microsecond)
				if h, _, ok := e.Next(clock); ok {
					e.Done(h, clock)
				}
			}
		})
	}
}
