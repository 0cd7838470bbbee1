package decide

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// Step is what a host's turn does with the request at the head of its
// queue.
type Step uint8

// Steps of Turn and of what follows it.
const (
	// Cancelled: the crawl is cancelled; no request, record
	// failure.Cancelled.
	Cancelled Step = iota + 1
	// Paused: the crawl is paused; no request, hold the request (Intake's
	// Hold).
	Paused
	// Refused: the page budget refuses the request; no request, record
	// failure.BudgetExhausted (the charge before Settle recorded it).
	Refused
	// FetchRobots: robots.txt is due; this turn asks for it, then
	// AfterRobots.
	FetchRobots
	// TakePage: the page's turn: Page decides.
	TakePage
	// Requeue: robots.txt allows the request; it goes back to the head of
	// its queue and waits the host's delay after the robots.txt request.
	Requeue
	// Deny: robots.txt denies the request, or was unavailable; no request,
	// record the refusal.
	Deny
	// Fetch: request the page.
	Fetch
)

var stepNames = [...]string{Cancelled: "cancelled", Paused: "paused", Refused: "refused", FetchRobots: "fetch_robots",
	TakePage: "take_page", Requeue: "requeue", Deny: "deny", Fetch: "fetch"}

func (s Step) String() string {
	if int(s) < len(stepNames) && stepNames[s] != "" {
		return stepNames[s]
	}
	return "step(?)"
}

// Robots is what the robots.txt cache holds of a request's origin.
type Robots struct {
	Fresh       bool      // it holds unexpired rules
	Unavailable bool      // the rules say robots.txt was unavailable
	FetchedAt   time.Time // when they were fetched
}

// TurnInput is what a turn reads of its request. The functions are asked
// only when the decision needs them, in the order of the package comment.
type TurnInput struct {
	State     crawlv1.CrawlState
	Attempt   uint32    // the request's attempt (0: the first)
	NotBefore time.Time // its not_before (zero: none)
	// Robots looks the request's origin up in the robots.txt cache; asked
	// unless the crawl is cancelled or paused.
	Robots func() Robots
	// Spent reports whether the page budget refuses the request; asked
	// only when robots.txt is due (a refused page asks nothing of the
	// host).
	Spent func() bool
}

// Turn decides a turn's first step.
func Turn(in TurnInput) Step {
	switch in.State {
	case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		return Cancelled
	case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
		return Paused
	}
	if !RobotsDue(in.Robots(), in.Attempt, in.NotBefore) {
		return TakePage
	}
	if in.Spent() {
		return Refused
	}
	return FetchRobots
}

// RobotsDue reports whether robots.txt is asked before a request: the
// cache holds no unexpired rules of its origin, or the request is a retry
// of a URL refused because robots.txt was unavailable (it is the "later"
// of "retry later"), and nobody asked for robots.txt since the retry
// became due.
func RobotsDue(r Robots, attempt uint32, notBefore time.Time) bool {
	if !r.Fresh {
		return true
	}
	return r.Unavailable && attempt > 0 && !notBefore.IsZero() && r.FetchedAt.Before(notBefore)
}

// AfterRobots is the step after a turn fetched robots.txt: an allowed
// request waits for the host's next turn (Requeue); a refused one is
// denied (Deny, which Charges).
func AfterRobots(allowed bool) Step {
	if allowed {
		return Requeue
	}
	return Deny
}

// Page is the step of a page's turn once it did not yield: fetch it, or
// deny it when robots.txt refuses it (allowed); either Charges.
func Page(allowed bool) Step {
	if !allowed {
		return Deny
	}
	return Fetch
}

// Charges reports whether s settles its request, by a fetch or a refusal
// (Fetch, Deny): its page budget is charged first (Settle).
func (s Step) Charges() bool { return s == Fetch || s == Deny }

// Settle is the step s that Charges once its request was charged to its
// crawl's page budget (charged: a page was left, or the request is not
// charged to one); with no page left the request is Refused (the charge
// recorded it as budget_exhausted). Any other step is returned as it is.
func Settle(s Step, charged bool) Step {
	if s.Charges() && !charged {
		return Refused
	}
	return s
}

// Charged reports whether a request is charged to its crawl's page
// budget, with budgets on: its URL's first attempt (a retry's URL was
// charged by its first attempt) and not a revisit (not a new page).
func Charged(budgets bool, attempt uint32, revisit bool) bool {
	return budgets && attempt == 0 && !revisit
}

// Yielding to better-ranked requests (Yield): the shortest wait, and the
// most turns one request gives up, so that a better-ranked request that is
// slow to come (a backed-off host) never holds a crawl back for long.
const (
	MinYield  = 100 * time.Millisecond
	MaxYields = 20
)

// YieldInput is what MayYield reads.
type YieldInput struct {
	Charged bool  // the request is charged to a budget (Charged)
	Yields  uint8 // turns it gave up already
	Left    int64 // pages its crawl has left (negative: unlimited)
	Held    int   // requests the partition holds that its turn will charge, of any crawl
}

// MayYield reports whether a request may yield its turn at all: charged,
// with yields left, and its crawl's budget no larger than what the
// partition holds (more pages left than requests held: no count). Only
// then are the better-ranked requests counted for Yield, at most Left of
// them.
func MayYield(in YieldInput) bool {
	if !in.Charged || in.Yields >= MaxYields {
		return false
	}
	if in.Left <= 0 {
		return false // unlimited, or spent (the charge refuses it)
	}
	return in.Left <= int64(in.Held)
}

// Yield keeps the last pages of a crawl's budget for the best-ranked
// requests the partition holds: when the pages left are no more than the
// crawl's uncharged requests ranked better (better: a higher priority, or
// as high and at a lower depth, the host queues' rank; on other hosts,
// which the host queues do not order against this one, or on its own host
// but not due yet), this request does not take one: its turn ends without
// a request and it waits at the head of its queue for YieldFor, then asks
// again, at most MaxYields times. Once those have taken the pages it is
// refused as budget_exhausted; if they leave the partition (deferred, a
// close) it goes.
func Yield(in YieldInput, better int64) bool {
	return MayYield(in) && better >= in.Left
}

// YieldFor is how long a yielding request waits: its host's delay, at
// least MinYield.
func YieldFor(delay time.Duration) time.Duration { return max(delay, MinYield) }

// SERPExempt reports whether a request is exempt from robots.txt: a
// result page of its crawl's keywords (serp_engine set, depth 0, not
// reached through a redirect: a redirect target is the engine's answer,
// not the user's query) of a crawl whose spec asks to fetch those despite
// robots.txt (politeness.serp_ignore_robots).
func SERPExempt(serpEngine string, depth, redirectHops uint32, ignoreRobots bool) bool {
	return serpEngine != "" && depth == 0 && redirectHops == 0 && ignoreRobots
}

// Refusal is the failure a request robots.txt refused is recorded with:
// robots_denied when robots.txt denies it; when robots.txt could not be
// read, the failure of that read (robots_unavailable when it has none of
// its own, or was a redirect).
func Refusal(unavailable bool, readKind failure.Kind) failure.Kind {
	switch {
	case !unavailable:
		return failure.RobotsDenied
	case readKind == failure.None || readKind == failure.Redirect:
		return failure.RobotsUnavailable
	}
	return readKind
}
