// Package partition is the state of one partition of the fetch topic as
// the fetcher holds it, without Kafka, ClickHouse or HTTP: its host queues
// (a politeness.Engine of Tasks), the claims on attempts (Attempts), and
// the requests a page budget will charge at their turn (the yield of a
// crawl's last pages to its best-ranked requests). Its inputs are values
// (a task, the budget's pages left, a placement's clock) and its outputs
// are values (queued, to defer at a time, evicted, a repeat to ack);
// package consume, the Kafka adapter, decodes records into Tasks, carries
// out what the partition returns (produce a deferral, ack a repeat) and
// runs the turns.
//
// The decisions themselves are package decide's; a Partition gathers
// their inputs from its own state (a host's queue for decide.Place, the
// better-ranked uncharged requests for decide.Yield) and applies the
// answer to that state.
//
// partition is one of the pure packages (README.md, "The pure packages";
// deployments/checks, TestPureImports).
package partition

import (
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// Options configures a Partition.
type Options struct {
	Politeness politeness.Options
	Limits     decide.Limits
	// Attempts is the process-wide memory of held and finished attempts,
	// shared by every partition of the process (required).
	Attempts *Attempts
	Now      func() time.Time // default time.Now
}

// Partition is the state of one assigned partition. Safe for concurrent
// use: intake and the turns of its hosts run at once.
type Partition struct {
	engine   *politeness.Engine[*Task]
	limits   decide.Limits
	attempts *Attempts
	now      func() time.Time

	claimMu sync.Mutex
	claimed map[*Task]struct{} // claimed in attempts and not settled nor handed to the recorder

	// uncharged are the partition's requests that will be charged to a
	// page budget at their turn (held in the engine or in a turn, not
	// charged yet): Yield counts the better-ranked ones. A request joins
	// when pushed and leaves when charged (or refused) or when it leaves
	// the partition (evicted, held for a pause, cancelled).
	unchargedMu sync.Mutex
	uncharged   map[*Task]struct{}
}

// New returns an empty Partition.
func New(o Options) *Partition {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Partition{
		engine:   politeness.NewRanked(o.Now, o.Politeness, Rank),
		limits:   o.Limits,
		attempts: o.Attempts,
		now:      o.Now,
		claimed:  make(map[*Task]struct{}),
	}
}

// Engine returns the partition's host queues: the dispatcher takes turns
// from it, and a turn feeds its request's answer back to it.
func (p *Partition) Engine() *politeness.Engine[*Task] { return p.engine }

// Claim takes t's attempt until Settle or Handed, or reports false when it
// is held or was finished already: then its record is a repeat, acked
// without a request.
func (p *Partition) Claim(t *Task) bool {
	if !p.attempts.Claim(t.Key()) {
		return false
	}
	p.claimMu.Lock()
	p.claimed[t] = struct{}{}
	p.claimMu.Unlock()
	return true
}

// Handed hands t's claim over to its outcome: the request was made, so
// Abandon does not return it, and the outcome's end settles it (finished
// once durable, released if it could not be made so). A partition closed
// while the store is away (a broker or ClickHouse outage ends the
// generation) thus keeps the attempts whose outcomes wait in the
// recorder, and when the partition comes back to this fetcher their
// redelivered records are repeats, not requests.
func (p *Partition) Handed(t *Task) {
	p.claimMu.Lock()
	delete(p.claimed, t)
	p.claimMu.Unlock()
}

// Settle ends t's claim: done when its outcome is durable, otherwise
// released (its record was handed back and may come again).
func (p *Partition) Settle(t *Task, done bool) {
	p.Handed(t)
	p.Finished(t, done)
}

// Finished ends the attempt of t's record without a claim of this
// partition (a repeat a previous owner recorded): done, or released.
func (p *Partition) Finished(t *Task, done bool) {
	if done {
		p.attempts.Finish(t.Key())
	} else {
		p.attempts.Release(t.Key())
	}
}

// Abandon returns the claimed requests not handed to the recorder (queued,
// or in a turn cut short) and releases their attempts: at a close their
// records go back unacked to the next owner.
func (p *Partition) Abandon() []*Task {
	p.claimMu.Lock()
	abandoned := make([]*Task, 0, len(p.claimed))
	for t := range p.claimed {
		abandoned = append(abandoned, t)
	}
	p.claimMu.Unlock()
	for _, t := range abandoned {
		p.Settle(t, false)
	}
	return abandoned
}

// Push queues t in its host's queue, due at notBefore, unless its attempt
// is held or was finished already: then Push reports false, and t's
// record is a repeat.
func (p *Partition) Push(t *Task, notBefore time.Time) bool {
	if !p.Claim(t) {
		return false
	}
	p.Pending(t, true)
	p.engine.Push(t.Host, t, notBefore)
	return true
}

// Placement is where Place put a request.
type Placement struct {
	// Action: decide.Queue, the request is in its host's queue (or a
	// repeat, Repeat set); decide.Defer, the caller produces it again,
	// due at At, and acks it; decide.Evict, it is queued and Evicted, no
	// longer claimed nor queued, is the caller's to produce again, due at
	// At.
	Action decide.Action
	At     time.Time
	// Estimated: At estimates when the host's queue drains
	// (decide.Placement.Estimated); the copy carries the request's own
	// not_before beside it.
	Estimated bool
	Evicted   *Task
	// Repeat: t's attempt is held or was finished already: its record is
	// acked without a request.
	Repeat bool
}

// Place puts t, read at now, where decide.Place says, given its host's
// queue: queued (due at its not_before), to be deferred, or queued in the
// place of a worse-ranked request of its host's full queue, which leaves
// it to be deferred (the queue stays best-first).
//
// A request whose due time a deferral estimated (Task.Estimated) is due
// by decide.Redue: no later than its host's queue drains now.
func (p *Partition) Place(t *Task, now time.Time) Placement {
	h := p.hostOf(t.Host, now)
	if t.Estimated {
		t.NotBefore = unixNano(decide.Redue(t.NotBeforeTime(), unixTime(t.OwnNotBefore()), h, now))
	}
	notBefore := t.NotBeforeTime()
	pl := p.limits.Place(h, notBefore, now)
	switch pl.Action {
	case decide.Evict:
		if ev, ok := p.engine.EvictAbove(t.Host, Rank(t)); ok {
			p.Pending(ev, false)
			p.Settle(ev, false)
			return Placement{Action: decide.Evict, At: decide.Later(pl.At, ev.NotBeforeTime()), Estimated: pl.Estimated, Evicted: ev, Repeat: !p.Push(t, notBefore)}
		}
		// Nothing ranked below t: t goes.
		return Placement{Action: decide.Defer, At: decide.Later(pl.At, notBefore), Estimated: pl.Estimated}
	case decide.Defer:
		return Placement{Action: decide.Defer, At: pl.At, Estimated: pl.Estimated || t.Estimated}
	}
	return Placement{Action: decide.Queue, At: notBefore, Repeat: !p.Push(t, notBefore)}
}

// hostOf is the state of host's queue that decide.Place reads.
func (p *Partition) hostOf(host string, now time.Time) decide.Host {
	queued, wait := p.engine.Backlog(host, now)
	_, delay, next := p.engine.HostQueue(host)
	return decide.Host{Queued: queued, Wait: wait, Delay: delay, Next: next, OpenHosts: p.engine.OpenHosts()}
}

// Pending adds t to the requests a page budget will charge at their turn,
// or removes it (charged, refused, or gone from the partition); only
// requests charged to a budget (Task.Charged).
func (p *Partition) Pending(t *Task, add bool) {
	if !t.Charged {
		return
	}
	p.unchargedMu.Lock()
	defer p.unchargedMu.Unlock()
	if !add {
		delete(p.uncharged, t)
		return
	}
	if p.uncharged == nil {
		p.uncharged = make(map[*Task]struct{})
	}
	p.uncharged[t] = struct{}{}
}

// Yield decides whether t, at the head of host's queue with its crawl's
// budget at left pages (negative: unlimited), gives its turn up to
// better-ranked requests of its crawl the partition holds (decide.Yield);
// when it does, t waits at the head of its queue for decide.YieldFor and
// Yield reports true.
func (p *Partition) Yield(host string, t *Task, left int64) bool {
	p.unchargedMu.Lock()
	in := decide.YieldInput{Charged: t.Charged, Yields: t.Yields, Left: left, Held: len(p.uncharged)}
	yield := decide.MayYield(in) && decide.Yield(in, p.better(t, left))
	p.unchargedMu.Unlock()
	if !yield {
		return false
	}
	t.Yields++
	_, delay, _ := p.engine.HostQueue(host)
	Compact(t)
	p.engine.Requeue(host, t, p.now().Add(decide.YieldFor(delay)))
	return true
}

// better counts the uncharged requests of t's crawl ranked better than t,
// stopping at limit. Under unchargedMu: a raise changes queued
// priorities.
func (p *Partition) better(t *Task, limit int64) int64 {
	rank := Rank(t)
	var n int64
	for o := range p.uncharged {
		if o.Crawl == t.Crawl && Rank(o) < rank {
			if n++; n >= limit {
				break
			}
		}
	}
	return n
}

// Raise applies a reprioritize record: the queued request of crawl with
// url_fp fp in host's queue takes priority pr and signals when that ranks
// it better, and its place by it. A request in a turn, or not held here,
// is left alone.
func (p *Partition) Raise(host, crawl string, fp uint64, pr int32, signals priority.Signals) politeness.RaiseResult {
	return p.engine.Raise(host, func(t *Task) (uint32, bool) {
		if t.URLFP != fp || t.Crawl != crawl {
			return 0, false
		}
		return priority.Rank(pr, t.Depth), true
	}, func(t *Task) {
		p.unchargedMu.Lock() // Yield reads queued priorities under it
		t.priority, t.signals = pr, signals
		p.unchargedMu.Unlock()
	})
}
