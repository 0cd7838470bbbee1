package dispatch

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// The tests run in a synctest bubble: time.Now is the bubble's fake clock
// (the engine's and the dispatcher's), timers fire as soon as every
// goroutine of the bubble is blocked, and synctest.Wait returns once they
// are. Nothing sleeps in real time.

// recorder is a Work that logs each turn (start and end on the fake
// clock) and ends it after took, or when release is closed.
type recorder struct {
	e       *politeness.Engine[string]
	took    time.Duration
	release chan struct{} // nil: end after took

	mu      sync.Mutex
	turns   []turn
	running map[string]int
	maxRun  int // turns running at once, all hosts
	hostMax int // turns of one host running at once
	now     int
}

type turn struct {
	host, item string
	start, end time.Time
}

func (r *recorder) work(ctx context.Context, host, item string, _ time.Time) {
	r.mu.Lock()
	r.running[host]++
	r.now++
	r.maxRun = max(r.maxRun, r.now)
	r.hostMax = max(r.hostMax, r.running[host])
	r.mu.Unlock()
	start := time.Now()
	if r.release != nil {
		select {
		case <-r.release:
		case <-ctx.Done():
		}
	} else {
		t := time.NewTimer(r.took)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	end := time.Now()
	r.mu.Lock()
	r.running[host]--
	r.now--
	r.turns = append(r.turns, turn{host: host, item: item, start: start, end: end})
	r.mu.Unlock()
	r.e.Done(host, end)
}

func newRecorder(delay, took time.Duration) *recorder {
	return &recorder{
		e:       politeness.New[string](time.Now, politeness.Options{Delay: delay, MaxCrawlDelay: time.Minute}),
		took:    took,
		running: map[string]int{},
	}
}

// TestDelayAndOneAtATime: every item is dispatched once, in FIFO order per
// host, one turn per host at a time, the host's delay from the end of one
// turn to the start of the next, and no more turns at once than workers.
func TestDelayAndOneAtATime(t *testing.T) {
	tests := []struct {
		name    string
		workers int
		hosts   int
		items   int // per host
		delay   time.Duration
		took    time.Duration
	}{
		{name: "one host", workers: 4, hosts: 1, items: 5, delay: time.Second, took: 100 * time.Millisecond},
		{name: "hosts share a small pool", workers: 2, hosts: 6, items: 4, delay: 500 * time.Millisecond, took: 300 * time.Millisecond},
		{name: "more workers than hosts", workers: 32, hosts: 3, items: 3, delay: 200 * time.Millisecond, took: time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRecorder(tt.delay, tt.took)
				d := Start(t.Context(), r.e, NewPool(tt.workers), time.Now, r.work)
				begin := time.Now()
				for h := range tt.hosts {
					for i := range tt.items {
						r.e.Push(fmt.Sprintf("h%d", h), fmt.Sprintf("h%d/%d", h, i), time.Time{})
					}
				}
				d.Notify()
				// every item: at most items × (took + delay) per host, plus
				// the pool's queueing; wait out a generous bound on the
				// fake clock, then stop.
				deadline := time.NewTimer(time.Duration(tt.hosts*tt.items) * (tt.took + tt.delay))
				<-deadline.C
				synctest.Wait()
				d.Stop()
				d.Wait()

				if len(r.turns) != tt.hosts*tt.items {
					t.Fatalf("%d turns, want %d", len(r.turns), tt.hosts*tt.items)
				}
				if r.hostMax != 1 {
					t.Errorf("%d turns of one host at once, want 1", r.hostMax)
				}
				if r.maxRun > tt.workers {
					t.Errorf("%d turns at once, pool of %d", r.maxRun, tt.workers)
				}
				last := map[string]turn{}
				next := map[string]int{}
				for _, tu := range r.turns {
					if want := fmt.Sprintf("%s/%d", tu.host, next[tu.host]); tu.item != want {
						t.Errorf("turn %s, want %s (FIFO per host)", tu.item, want)
					}
					next[tu.host]++
					if p, ok := last[tu.host]; ok {
						if gap := tu.start.Sub(p.end); gap < tt.delay {
							t.Errorf("%s started %v after the end of %s, want at least %v", tu.item, gap, p.item, tt.delay)
						}
					} else if gap := tu.start.Sub(begin); gap < tt.delay {
						// a host new to the engine waits one delay
						t.Errorf("first turn of %s after %v, want at least %v", tu.host, gap, tt.delay)
					}
					last[tu.host] = tu
				}
			})
		})
	}
}

// TestSlowHostHoldsOneWorker: a host whose turn does not end holds its one
// worker; the other hosts of the partition go on with the rest, and a
// dispatcher of another partition on the same pool too.
func TestSlowHostHoldsOneWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := NewPool(2)
		slow := newRecorder(10*time.Millisecond, 0)
		slow.release = make(chan struct{})
		fast := newRecorder(10*time.Millisecond, time.Millisecond)
		ds := Start(t.Context(), slow.e, pool, time.Now, slow.work)
		df := Start(t.Context(), fast.e, pool, time.Now, fast.work)
		slow.e.Push("stuck", "stuck/0", time.Time{})
		slow.e.Push("stuck", "stuck/1", time.Time{})
		for i := range 10 {
			fast.e.Push("ok", fmt.Sprintf("ok/%d", i), time.Time{})
		}
		ds.Notify()
		df.Notify()
		done := time.NewTimer(time.Second)
		<-done.C
		synctest.Wait()
		fast.mu.Lock()
		if n := len(fast.turns); n != 10 {
			t.Errorf("other partition: %d of 10 turns while one host is stuck", n)
		}
		fast.mu.Unlock()
		slow.mu.Lock()
		if n, running := len(slow.turns), slow.running["stuck"]; n != 0 || running != 1 {
			t.Errorf("stuck host: %d turns ended, %d running; want 0 and 1", n, running)
		}
		slow.mu.Unlock()
		close(slow.release)
		ds.Stop()
		df.Stop()
		ds.Wait()
		df.Wait()
	})
}

// TestWakeupAndStop: a dispatcher waits for a pushed item's not-before
// (no turn early), wakes on Notify, and after Stop starts no turn while
// the ones in flight finish (Wait).
func TestWakeupAndStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(10*time.Millisecond, 0)
		r.release = make(chan struct{})
		d := Start(t.Context(), r.e, NewPool(4), time.Now, r.work)
		synctest.Wait() // the loop waits: nothing queued

		at := time.Now().Add(5 * time.Second)
		r.e.Push("a", "a/0", at)
		d.Notify()
		synctest.Wait()
		r.mu.Lock()
		if r.now != 0 {
			t.Fatalf("a turn started before its not-before")
		}
		r.mu.Unlock()
		wait := time.NewTimer(time.Until(at))
		<-wait.C
		synctest.Wait()
		r.mu.Lock()
		if r.now != 1 {
			t.Fatalf("%d turns running at the not-before, want 1", r.now)
		}
		r.mu.Unlock()

		r.e.Push("b", "b/0", time.Time{})
		d.Stop()
		select {
		case <-d.Stopping():
		default:
			t.Fatal("Stopping not closed after Stop")
		}
		later := time.NewTimer(time.Minute)
		<-later.C
		synctest.Wait()
		r.mu.Lock()
		if r.now != 1 {
			t.Errorf("%d turns running after Stop, want the one in flight", r.now)
		}
		r.mu.Unlock()
		close(r.release)
		d.Wait()
		d.Stop() // twice is fine
		if len(r.turns) != 1 || r.turns[0].item != "a/0" || r.turns[0].start.Before(at) {
			t.Fatalf("turns %+v, want a/0 from %v", r.turns, at)
		}
	})
}

// TestTurnsReuseGoroutines: the goroutines that ran turns wait for more
// only as many as idlePerWorker per worker of the pool, and only for
// idleFor; consecutive turns of a partition run on the goroutine that ran
// the first; after Stop and Wait none is left (synctest.Test fails on a
// goroutine left blocked).
func TestTurnsReuseGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pool := NewPool(2)
		const others = 3 * idlePerWorker * 2
		var all []*Dispatcher[string]
		for range others {
			ro := newRecorder(10*time.Millisecond, time.Millisecond)
			ro.e.Push("b", "b/0", time.Time{})
			all = append(all, Start(t.Context(), ro.e, pool, time.Now, ro.work))
		}
		settle := time.NewTimer(100 * time.Millisecond)
		<-settle.C
		synctest.Wait()
		if got, want := pool.idle.Load(), int64(idlePerWorker*2); got != want {
			t.Errorf("%d goroutines wait after %d single turns, want the cap %d", got, others, want)
		}
		expire := time.NewTimer(idleFor)
		<-expire.C
		synctest.Wait()
		if got := pool.idle.Load(); got != 0 {
			t.Errorf("%d goroutines still wait %v after their turn", got, idleFor)
		}

		r := newRecorder(10*time.Millisecond, time.Millisecond)
		const n = 50
		for i := range n {
			r.e.Push("a", fmt.Sprintf("a/%d", i), time.Time{})
		}
		d := Start(t.Context(), r.e, pool, time.Now, r.work)
		all = append(all, d)
		wait := time.NewTimer(time.Duration(n) * 20 * time.Millisecond)
		<-wait.C
		synctest.Wait()
		if len(r.turns) != n {
			t.Fatalf("%d turns, want %d", len(r.turns), n)
		}
		if got := d.started.Load(); got != 1 {
			t.Errorf("%d goroutines ran %d consecutive turns, want 1", got, n)
		}
		for _, o := range all {
			o.Stop()
			o.Wait()
		}
		if got := pool.idle.Load(); got != 0 {
			t.Errorf("%d goroutines still counted as waiting after Wait", got)
		}
	})
}

// TestPauseHoldsNewTurns: a paused pool starts no turn, of any
// dispatcher, however long it stays paused, while the turn already
// running finishes; once resumed the waiting turns start, each host's
// delay kept.
func TestPauseHoldsNewTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r1 := newRecorder(10*time.Millisecond, 0)
		r1.release = make(chan struct{})
		r2 := newRecorder(10*time.Millisecond, 50*time.Millisecond)
		pool := NewPool(4)
		d1 := Start(t.Context(), r1.e, pool, time.Now, r1.work)
		d2 := Start(t.Context(), r2.e, pool, time.Now, r2.work)
		r1.e.Push("a", "a/0", time.Time{})
		d1.Notify()
		started := time.NewTimer(time.Second)
		<-started.C
		synctest.Wait()
		r1.mu.Lock()
		if r1.now != 1 {
			t.Errorf("%d turns running before the pause, want 1", r1.now)
		}
		r1.mu.Unlock()
		pool.Pause()
		pool.Pause() // twice is one pause
		for i := range 3 {
			r2.e.Push("b", fmt.Sprintf("b/%d", i), time.Time{})
			r2.e.Push("c", fmt.Sprintf("c/%d", i), time.Time{})
		}
		d2.Notify()
		close(r1.release) // the turn that ran before the pause ends
		paused := time.NewTimer(time.Hour)
		<-paused.C
		synctest.Wait()
		r1.mu.Lock()
		r2.mu.Lock()
		if len(r1.turns) != 1 || len(r2.turns) != 0 {
			t.Errorf("turns while paused: %d and %d, want the one started before the pause", len(r1.turns), len(r2.turns))
		}
		r2.mu.Unlock()
		r1.mu.Unlock()
		resumed := time.Now()
		pool.Resume()
		pool.Resume()
		done := time.NewTimer(time.Second)
		<-done.C
		synctest.Wait()
		d1.Stop()
		d2.Stop()
		d1.Wait()
		d2.Wait()
		if len(r2.turns) != 6 {
			t.Fatalf("%d turns after the resume, want 6", len(r2.turns))
		}
		last := map[string]time.Time{}
		for _, tu := range r2.turns {
			if tu.start.Before(resumed) {
				t.Errorf("%s started at %v, before the resume at %v", tu.item, tu.start, resumed)
			}
			if prev, ok := last[tu.host]; ok && tu.start.Sub(prev) < 10*time.Millisecond {
				t.Errorf("%s started %v after the host's previous turn ended, want the delay", tu.item, tu.start.Sub(prev))
			}
			last[tu.host] = tu.end
		}
	})
}
