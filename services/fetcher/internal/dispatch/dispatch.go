// Package dispatch runs a partition's politeness engine: a loop that waits
// for the next eligible host (politeness.Engine.NextWakeup) and a free
// worker of a pool shared by every partition, then runs that host's turn on
// a goroutine of its own. Hosts waiting for their delay hold no worker, so
// one slow or backed-off host never stalls the others of its partition.
//
// A goroutine that ran a turn waits up to idleFor for the next turn of its
// partition instead of exiting (at most idlePerWorker per worker of the
// pool wait at once, across every partition): a turn's stack grows through
// net/http's round trip to several times the 8 KiB a new goroutine starts
// with, and growing it afresh for every turn was 5% of the fetcher's CPU
// on the bench web.
//
// It knows nothing of Kafka or of what a turn does: the fetcher's consumer
// (internal/consume) queues decoded requests in the engine, starts a
// Dispatcher per assigned partition and does the fetch in its Work.
package dispatch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// Pool is the worker pool shared by the dispatchers of every partition: it
// bounds the turns running at once, and starts none while paused. Safe for
// concurrent use.
type Pool struct {
	slots chan struct{}
	idle  atomic.Int64 // goroutines waiting for a turn, every dispatcher's

	mu   sync.Mutex
	held chan struct{} // while paused: closed by Resume
}

// Pause stops the pool from starting turns; those running go on. The
// fetcher pauses while the stages after it fall behind (backpressure).
func (p *Pool) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// Resume lets the pool start turns again.
func (p *Pool) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// paused returns a channel closed when the pool resumes, nil when it is
// not paused.
func (p *Pool) paused() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// NewPool returns a pool of workers (at least one).
func NewPool(workers int) *Pool {
	return &Pool{slots: make(chan struct{}, max(workers, 1))}
}

// idleFor is how long a goroutine that ran a turn waits for the next one
// of its partition; idlePerWorker bounds how many wait at once, per worker
// of the pool.
const (
	idleFor       = time.Second
	idlePerWorker = 4
)

// keepIdle reports whether a goroutine that finished a turn may wait for
// the next one (see idlePerWorker). A true answer counts it; release
// uncounts it.
func (p *Pool) keepIdle() bool {
	if p.idle.Add(1) > int64(idlePerWorker*cap(p.slots)) {
		p.idle.Add(-1)
		return false
	}
	return true
}

func (p *Pool) release() { p.idle.Add(-1) }

// Work runs host's turn with item, taken from the engine at dispatched
// (the dispatcher's clock), on its own goroutine while holding a worker.
// It must end the turn in the engine (Done, Release, Requeue, PushFront
// after Done) before it returns; the dispatcher looks for the next
// eligible host when it has returned.
type Work[T any] func(ctx context.Context, host string, item T, dispatched time.Time)

// Dispatcher hands the eligible items of one engine to a Pool until Stop.
type Dispatcher[T any] struct {
	engine   *politeness.Engine[T]
	pool     *Pool
	now      func() time.Time
	work     Work[T]
	wake     chan struct{} // capacity 1: something changed in the engine
	stop     chan struct{} // closed by Stop
	stopped  chan struct{} // closed when the loop returned
	stopOnce sync.Once
	inflight sync.WaitGroup // turns running
	idle     chan job[T]    // unbuffered: a goroutine waiting for a turn
	workers  sync.WaitGroup // the goroutines that run turns
	started  atomic.Int64   // goroutines started to run turns
}

// job is a host's turn, handed to a goroutine.
type job[T any] struct {
	host string
	item T
	at   time.Time
}

// Start starts the dispatch loop of engine over pool; now is the engine's
// clock. ctx is passed to every Work (cancel it to stop turns in flight);
// the loop itself runs until Stop.
func Start[T any](ctx context.Context, engine *politeness.Engine[T], pool *Pool, now func() time.Time, work Work[T]) *Dispatcher[T] {
	d := &Dispatcher[T]{
		engine: engine, pool: pool, now: now, work: work,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
		idle:    make(chan job[T]),
	}
	go d.loop(ctx)
	return d
}

// Notify tells the loop that the engine changed (an item was pushed, a
// host's turn ended). Never blocks; safe for concurrent use.
func (d *Dispatcher[T]) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Stopping is closed once Stop was called.
func (d *Dispatcher[T]) Stopping() <-chan struct{} { return d.stop }

// Stop ends dispatching and returns once the loop has returned; turns in
// flight go on (Wait). Safe to call more than once.
func (d *Dispatcher[T]) Stop() {
	d.stopOnce.Do(func() { close(d.stop) })
	<-d.stopped
}

// Wait returns when no turn is running and the goroutines that ran them
// have exited. Call it after Stop: until then turns may start, and the
// goroutines wait for them.
func (d *Dispatcher[T]) Wait() {
	d.inflight.Wait()
	d.workers.Wait()
}

// loop hands eligible items to the pool until Stop.
func (d *Dispatcher[T]) loop(ctx context.Context) {
	defer close(d.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// wait for an eligible host
		for {
			at, ok := d.engine.NextWakeup()
			now := d.now()
			if ok && !at.After(now) {
				break
			}
			var fire <-chan time.Time
			if ok {
				timer.Reset(at.Sub(now))
				fire = timer.C
			}
			select {
			case <-d.stop:
				return
			case <-d.wake:
			case <-fire:
			}
			timer.Stop()
		}
		// then for the pool to run turns
		if held := d.pool.paused(); held != nil {
			select {
			case <-held:
			case <-d.stop:
				return
			}
			continue
		}
		// and for a worker
		select {
		case d.pool.slots <- struct{}{}:
		case <-d.stop:
			return
		}
		now := d.now()
		host, item, ok := d.engine.Next(now)
		if !ok {
			<-d.pool.slots
			continue
		}
		d.inflight.Add(1)
		t := job[T]{host: host, item: item, at: now}
		select {
		case d.idle <- t: // a goroutine that ran a turn takes it
		default:
			d.workers.Add(1)
			d.started.Add(1)
			go d.worker(ctx, t)
		}
	}
}

// worker runs t, then the turns handed to it while it waits, until Stop,
// until none came for idleFor, or until the pool has enough goroutines
// waiting. It ends each turn by
// giving back the worker slot and telling the loop, as late as it can, so
// that the loop finds it waiting when it hands out the next turn.
func (d *Dispatcher[T]) worker(ctx context.Context, t job[T]) {
	defer d.workers.Done()
	var idle *time.Timer
	for {
		d.work(ctx, t.host, t.item, t.at)
		keep := d.pool.keepIdle()
		<-d.pool.slots
		d.inflight.Done()
		d.Notify()
		if !keep {
			return
		}
		if idle == nil {
			idle = time.NewTimer(idleFor)
		} else {
			idle.Reset(idleFor)
		}
		select {
		case t = <-d.idle:
			idle.Stop()
			d.pool.release()
		case <-idle.C:
			d.pool.release()
			return
		case <-d.stop:
			idle.Stop()
			d.pool.release()
			return
		}
	}
}
