package partition

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// A host's turn, as the partition sees it: the adapter takes a turn from
// the engine (the dispatcher), asks Turn what it is, and between the
// partition's steps makes the requests (robots.txt, the page), charges
// the page budget and records outcomes. Each step below applies the
// turn's effect on the partition's state (the host's clock, its queue,
// the requests a budget will charge) and returns what comes next as a
// value; none makes a request or waits.

// Turn begins host's turn with t, just taken from its queue: decide.Turn
// over in. A step that makes no request frees the host without touching
// its delay clock (Cancelled, Paused, Refused); a cancelled or refused
// request leaves the budget's pending set (the adapter records it), a
// paused one is held by the adapter.
func (p *Partition) Turn(host string, t *Task, in decide.TurnInput) decide.Step {
	step := decide.Turn(in)
	switch step {
	case decide.Cancelled, decide.Refused:
		p.engine.Release(host)
		p.Pending(t, false)
	case decide.Paused:
		p.engine.Release(host)
	}
	return step
}

// PageTurn is what Page reads of a page's turn (decide.TakePage).
type PageTurn struct {
	CrawlDelay time.Duration   // the Crawl-delay of the host's robots.txt (0: none)
	Crawl      hostdelay.Crawl // the politeness of the request's crawl
	Left       int64           // pages its crawl has left (negative: unlimited)
	Allowed    bool            // robots.txt allows the request (its crawl's exemption included)
}

// Page is the step of t's page turn: its host's delay set from its
// robots.txt and its crawl, then Yielded when t gives its turn up to
// better-ranked requests (Yield; t waits at the head of its queue), else
// decide.Page, a step that Charges: the adapter charges t's budget and
// calls Charged.
func (p *Partition) Page(host string, t *Task, in PageTurn) (step decide.Step, yielded bool) {
	p.engine.SetHostDelay(host, in.CrawlDelay, in.Crawl)
	if p.Yield(host, t, in.Left) {
		return 0, true
	}
	return decide.Page(in.Allowed), false
}

// Charged is the step a page's turn takes after its charge (decide.Settle;
// charged: a page was left, or t is not charged to a budget): Fetch, or
// Deny and Refused, which make no request and free the host without
// touching its delay clock. A charged request leaves the budget's pending
// set.
func (p *Partition) Charged(host string, t *Task, step decide.Step, charged bool) decide.Step {
	step = p.settle(t, step, charged)
	if step != decide.Fetch {
		p.engine.Release(host)
	}
	return step
}

// settle is decide.Settle with t's charge taken off the pending set.
func (p *Partition) settle(t *Task, step decide.Step, charged bool) decide.Step {
	if step.Charges() {
		p.Pending(t, false) // charged, or refused: no longer a page to come
	}
	return decide.Settle(step, charged)
}

// RobotsTurn is what RobotsFetched reads of a turn that asked for
// robots.txt (decide.FetchRobots).
type RobotsTurn struct {
	End        time.Time       // when the request ended
	CrawlDelay time.Duration   // the Crawl-delay of the robots.txt read (0: none)
	Crawl      hostdelay.Crawl // the politeness of the request's crawl
	Allowed    bool            // the robots.txt read allows the request
}

// RobotsFetched is the step after t's turn fetched robots.txt: the host's
// delay set from it and its clock run from the request's end, then
// decide.AfterRobots: Requeue (t is back at the head of its queue for the
// host's next turn) or Deny, which Charges (the adapter charges and calls
// RobotsCharged). capped reports whether the crawl's cap cut the
// Crawl-delay.
func (p *Partition) RobotsFetched(host string, t *Task, in RobotsTurn) (step decide.Step, capped bool) {
	capped = p.engine.SetHostDelay(host, in.CrawlDelay, in.Crawl)
	p.engine.Done(host, in.End)
	step = decide.AfterRobots(in.Allowed)
	if step == decide.Requeue {
		Compact(t)
		p.engine.PushFront(host, t)
	}
	return step, capped
}

// RobotsCharged is the step after the charge of a request robots.txt
// denied at the turn that fetched it: Deny, or Refused. The host's turn
// ended with its robots.txt request (RobotsFetched).
func (p *Partition) RobotsCharged(t *Task, step decide.Step, charged bool) decide.Step {
	return p.settle(t, step, charged)
}

// Answer is what Fetched reads of a page's request.
type Answer struct {
	End        time.Time
	Took       time.Duration
	Status     int          // 0: no HTTP answer
	Kind       failure.Kind // the failure, if any
	RetryAfter time.Duration
}

// Fetched feeds the answer to t's request back to its host: a server
// that slows down (politeness.SlowsDown) backs the host off, and t's
// retry waits for its Retry-After; any HTTP answer else ends a back-off;
// the host's delay runs from the request's end.
func (p *Partition) Fetched(host string, t *Task, a Answer) {
	p.engine.ObserveDuration(host, a.Took)
	switch {
	case politeness.SlowsDown(a.Status, a.Kind):
		p.engine.SlowDown(host, a.End, a.RetryAfter)
		t.RetryAfter = a.End.Add(a.RetryAfter).UnixNano()
	case a.Status > 0:
		p.engine.Recovered(host)
	}
	p.engine.Done(host, a.End)
}

// CutShort ends the turn of a request cancelled in flight (a close, or the
// group's lease lapsed): the host's delay runs from end, as after any
// request that may have reached it, and t waits at the head of its queue
// for the host's next turn (at a close it is handed back unacked with
// the rest). A page's charge is given back with Uncharged.
func (p *Partition) CutShort(host string, t *Task, end time.Time) {
	p.engine.Done(host, end)
	Compact(t)
	p.engine.PushFront(host, t)
}

// Wait ends host's turn without a request: t waits in its queue until at
// (the lease lapsed, its server busy).
func (p *Partition) Wait(host string, t *Task, at time.Time) {
	Compact(t)
	p.engine.Requeue(host, t, at)
}

// Uncharged puts t back among the requests its budget will charge: its
// turn made no request after it was charged (the adapter gives the page
// back to the budget).
func (p *Partition) Uncharged(t *Task) { p.Pending(t, true) }

// Changed returns host's state after a request when the partition's next
// owner could not infer it (politeness.Engine.Changed), nil otherwise.
func (p *Partition) Changed(host string) *politeness.HostState {
	st, ok := p.engine.Changed(host)
	if !ok {
		return nil
	}
	return &st
}
