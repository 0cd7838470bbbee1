// Package decide holds the fetcher's decisions about a fetch request, as
// plain functions of what the partition knows, without I/O: what becomes
// of a request read from the fetch topic (Intake, then Place), and what a
// host's turn does with the request at the head of its queue (Turn, then
// Page). package consume gathers their inputs from the politeness engine,
// the robots.txt cache, the crawl specs and the page budget, calls them
// and carries out the answer; the scheduler's admit.Policy is the same
// split on the other side of the fetch topic.
//
// At intake, in this order:
//
//  1. Skip: a previous owner of the partition fetched the attempt and
//     recorded it (its fetch-log row exists): ack, no request.
//  2. Rebuild: a previous owner fetched and published it but its row is
//     missing: write the row from the page, no request.
//  3. Cancel: the crawl is cancelled: record failure.Cancelled, no request.
//  4. Spent: the crawl runs and its page budget refuses the request.
//  5. Hold: the crawl is paused and the request is due: defer it by
//     Limits.PauseRecheck (a request already deferred by a pause waits in
//     its queue and is checked again at its turn, so a paused partition
//     does not spin).
//  6. Place: anything else goes to its host's queue, or, when the queue is
//     full or the request is due beyond the hold horizon, back to the
//     fetch topic (Place).
//
// At a host's turn (Turn), in this order: the crawl cancelled or paused;
// robots.txt due (RobotsDue) and the page budget spent: refused without
// even asking robots.txt; robots.txt due: the turn asks for it and the
// request waits a delay (AfterRobots); otherwise the page: yield to
// better-ranked requests of a crawl whose budget is nearly spent (Yield),
// then refuse what robots.txt denies or fetch (Page), the budget charged
// first (Settle).
//
// And the rules those steps read: FetchedBefore (what a previous owner's
// fetch-log row or page says of an attempt redelivered), SERPExempt
// (robots.txt's one exception, a crawl's own result pages, which
// robots.Verdict.Allow asks when robots.txt denies a page), Refusal (the
// failure a refusal is recorded with).
//
// decide is one of the pure packages (README.md, "The pure packages"): it
// imports no broker, ClickHouse or HTTP client, not even through robots,
// whose cache fetches robots.txt through httpfetch (deployments/checks,
// TestPureImports).
package decide

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// Defaults of Limits (WithDefaults), which the configuration's flags
// start from (no flag sets MaxHostWait).
const (
	DefaultMaxHostQueue = 100
	DefaultMaxHostWait  = time.Minute
	DefaultHoldHorizon  = 2 * time.Minute
	DefaultPauseRecheck = 5 * time.Second
)

// Limits are the partition's bounds (consume.Options.Limits); a field
// left zero takes its default (WithDefaults).
type Limits struct {
	// MaxHostQueue bounds the requests buffered per host; the surplus is
	// deferred durably to the fetch topic (see Place; default 100).
	MaxHostQueue int
	// MaxHostWait: a request of a backed-off host (next-allowed time more
	// than a delay away) that would wait longer than this behind the
	// host's queue and back-off is deferred, so slowed-down hosts do not
	// fill the partition's in-flight window (default 1m).
	MaxHostWait time.Duration
	// HoldHorizon: a request whose not_before is further away is deferred
	// durably rather than held in memory (default 2m).
	HoldHorizon time.Duration
	// PauseRecheck is how far the requests of a paused crawl are deferred
	// (default 5s): a paused crawl holds no memory and no worker.
	PauseRecheck time.Duration
}

// WithDefaults returns l with its zero fields at their defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxHostQueue <= 0 {
		l.MaxHostQueue = DefaultMaxHostQueue
	}
	if l.MaxHostWait <= 0 {
		l.MaxHostWait = DefaultMaxHostWait
	}
	if l.HoldHorizon <= 0 {
		l.HoldHorizon = DefaultHoldHorizon
	}
	if l.PauseRecheck <= 0 {
		l.PauseRecheck = DefaultPauseRecheck
	}
	return l
}

// Verdict is what becomes of a request read from the fetch topic.
type Verdict uint8

// Verdicts of Intake.
const (
	Skip Verdict = iota + 1
	Rebuild
	Cancel
	Spent
	Hold
	Place
)

var verdictNames = [...]string{Skip: "skip", Rebuild: "rebuild", Cancel: "cancel", Spent: "spent", Hold: "hold", Place: "place"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) && verdictNames[v] != "" {
		return verdictNames[v]
	}
	return "verdict(?)"
}

// Record is what Intake reads of a request.
type Record struct {
	// Recorded: a previous owner recorded the attempt (a fetch-log row at
	// or after its scheduled_at).
	Recorded bool
	// Published: a previous owner published the attempt's page, and its
	// row is missing.
	Published bool
	// State is the request's crawl state.
	State crawlv1.CrawlState
	// Spent reports whether the crawl's page budget refuses the request;
	// asked only of a running crawl's request (it may block on a count).
	Spent func() bool
	// NotBefore is the request's not_before (zero: none).
	NotBefore time.Time
}

// Intake decides what becomes of a request read at now.
func Intake(r Record, now time.Time) Verdict {
	switch {
	case r.Recorded:
		return Skip
	case r.Published:
		return Rebuild
	}
	switch r.State {
	case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		return Cancel
	case crawlv1.CrawlState_CRAWL_STATE_RUNNING:
		if r.Spent != nil && r.Spent() {
			return Spent
		}
	case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
		if !r.NotBefore.After(now) {
			return Hold
		}
	}
	return Place
}

// HoldUntil is when a held request of a paused crawl is due again.
func (l Limits) HoldUntil(now time.Time) time.Time { return now.Add(l.PauseRecheck) }

// Host is the state of a request's host queue (politeness.Engine's
// Backlog, HostQueue and OpenHosts).
type Host struct {
	Queued int           // requests in its queue
	Wait   time.Duration // how long a request queued now would wait: the host's back-off and the queue ahead
	Delay  time.Duration // the host's delay
	Next   time.Time     // the host's next-allowed time
	// OpenHosts is the number of the partition's hosts with room for
	// more requests.
	OpenHosts int
}

// Full reports whether h's queue takes no more requests at now: it is
// backed off (its next-allowed time more than a delay away) and a new
// request would wait longer than MaxHostWait, or it holds MaxHostQueue
// requests and some other host of the partition still has room.
//
// A queue full only by its length is not full when no other host has room:
// records read further could only feed hosts that cannot take them, so
// the request is held over the bound (the partition's in-flight window
// bounds the memory) and a partition of one huge site reads each of its
// URLs once instead of cycling its surplus through the fetch topic.
func (l Limits) Full(h Host, now time.Time) bool {
	if h.Queued > 0 && h.Next.Sub(now) > h.Delay && h.Wait > l.MaxHostWait {
		return true
	}
	return h.Queued >= l.MaxHostQueue && h.OpenHosts > 0
}

// Placement says where a request goes.
type Placement struct {
	Action Action
	// At is when the request is due: for Queue its not_before, for Defer
	// the not_before of its deferred copy, for Evict the earliest
	// not_before of the evicted request's copy (Later of At and its own).
	At time.Time
	// Estimated: the host's queue was full, and At (for Defer, or the
	// evicted request's for Evict) is only an estimate of when the queue
	// ahead drains, not a time the request must wait for: read again, the
	// request is due by Redue.
	Estimated bool
}

// Action is a Placement's.
type Action uint8

// Actions of Place.
const (
	// Queue: into the host's queue, due at At.
	Queue Action = iota + 1
	// Defer: produced again to the fetch topic, due at At, and acked.
	Defer
	// Evict: the host's queue is full; its worst-ranked request ranked
	// below this one (the lowest priority, then the deepest) leaves it
	// (deferred, due at Later(At, its own not_before)) and this one is
	// queued in its place. When the queue holds nothing ranked below,
	// this one is deferred, due at Later(At, its not_before).
	Evict
)

var actionNames = [...]string{Queue: "queue", Defer: "defer", Evict: "evict"}

func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return "action(?)"
}

// Place decides where a request due at notBefore (zero: now) goes, given
// its host h at now. Every request of a host deferred at once is due at
// once (now plus the host's wait), so that when they come back the host's
// queue takes them by rank (a deferral spread by arrival would let a
// worse-ranked request deferred first go before a better one deferred after
// it).
func (l Limits) Place(h Host, notBefore, now time.Time) Placement {
	beyond := notBefore.After(now.Add(l.HoldHorizon))
	if l.Full(h, now) {
		at := now.Add(h.Wait)
		if beyond {
			return Placement{Action: Defer, At: Later(at, notBefore), Estimated: true}
		}
		return Placement{Action: Evict, At: at, Estimated: true}
	}
	if beyond {
		return Placement{Action: Defer, At: notBefore}
	}
	return Placement{Action: Queue, At: notBefore}
}

// Redue is when a request read again from a deferral that estimated its
// due time (estimate: its copy's not_before, Placement.Estimated) is due,
// given its own not_before (own: a retry's back-off, zero for none) and
// its host h at now: at the estimate, or sooner when the host's queue
// would drain sooner (now plus h.Wait: its back-off and the queue ahead,
// as it is now), never before own. The estimate was made when the queue
// was full; made too long (a response time measured once, on a loaded
// machine), it left a host idle with its requests waiting for it, which
// at the end of a crawl is the crawl waiting.
func Redue(estimate, own time.Time, h Host, now time.Time) time.Time {
	if drained := now.Add(h.Wait); drained.Before(estimate) {
		estimate = drained
	}
	return Later(estimate, own)
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// FetchedBefore reports whether a trace of an attempt a previous owner
// left at at (its fetch-log row's fetched_at, or its published page's)
// means that owner fetched the attempt scheduled at scheduled: at or after
// scheduled_at. fetched_at has second precision, so a trace in the second
// of scheduled_at counts (a re-fetch within that second would have to be
// a revisit scheduled within a second of the first: none is).
func FetchedBefore(at, scheduled time.Time) bool {
	return !at.Before(scheduled.Truncate(time.Second))
}
