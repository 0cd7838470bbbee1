// Package dispatch runs a partition's politeness engine: a loop that waits
// for the next eligible host (politeness.Engine.NextWakeup) and a free
// worker of a pool shared by every partition, then runs that host's turn on
// its own goroutine. Hosts waiting for their delay hold no worker, so one
// slow or backed-off host never stalls the others of its partition.
//
// It knows nothing of Kafka or of what a turn does: the fetcher's consumer
// (internal/consume) queues decoded requests in the engine, starts a
// Dispatcher per assigned partition and does the fetch in its Work.
package dispatch

import (
	"context"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// Pool is the worker pool shared by the dispatchers of every partition: it
// bounds the turns running at once. Safe for concurrent use.
type Pool struct {
	slots chan struct{}
}

// NewPool returns a pool of workers (at least one).
func NewPool(workers int) *Pool {
	return &Pool{slots: make(chan struct{}, max(workers, 1))}
}

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

// Wait returns when no turn is running. Call it after Stop, or turns may
// start meanwhile.
func (d *Dispatcher[T]) Wait() { d.inflight.Wait() }

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
		// then for a worker
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
		go func() {
			defer d.inflight.Done()
			defer func() { <-d.pool.slots }()
			d.work(ctx, host, item, now)
			d.Notify()
		}()
	}
}
