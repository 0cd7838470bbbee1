// Package budget is the fetcher's side of a crawl's page budget
// (CrawlSpec.limits.max_pages, else --max-pages): a page is charged when
// the fetcher takes the turn of a URL's first attempt, so that the pages a
// budget keeps are those the breadth-first host queues start first, not
// those the scheduler happened to discover first.
//
// # What is a page
//
// One URL of the crawl whose first attempt the fetcher settles by its own
// turn: requested (whatever the answer: a 3xx is a page, and its target,
// admitted by the scheduler as a URL of its own, is another), or refused
// by robots.txt. These are exactly the URLs whose fetch_log rows have an
// error kind other than cancelled and budget_exhausted (Count's query), the
// URLs the scheduler's admission-time budget counted before, less those it
// admitted that were never tried. Not pages: robots.txt requests, a retry
// (the URL was charged by its first attempt) and a revisit (the scheduler
// never charged those either).
//
// # Approximation
//
// The pages a crawl has used are estimated (libs/pagebudget) as
//
//	estimate = max(local, remote + since)
//
// where local is what this process charged (exact), remote the last global
// count (Count: distinct fingerprints in fetch_log, every fetcher, of
// attempts started before the count's start time t0) and since what this
// process charged at or after t0. A page is charged only while estimate <
// budget. A crawl's first charge in the process waits for one global
// count, so a restarted fetcher starts from what is recorded.
//
// Counting only rows before t0 keeps a page from being counted twice (in
// remote because its row was inserted before the query read the table, and
// in since because it was charged after t0). With one fetcher instance the
// estimate is then exact but for requests in flight at t0 (charged before,
// recorded after: missing from remote, still in local, which the max
// keeps), so the budget is neither exceeded nor undershot. With N instances
// each one misses what the others charged since its last count and what
// they had in flight at t0 (the fetch itself plus the fetch-log writer's
// flush interval), so a crawl overshoots by at most
//
//	the other instances' page rate × (refresh interval + fetch time +
//	flush interval + count query time)
//
// plus their clocks' skew (rows carry the fetching instance's clock, t0 is
// this one's): a row stamped before t0 but charged after by a fetcher whose
// clock runs behind is counted twice (an undershoot), one stamped at or
// after t0 and charged before is missed (an overshoot). Requests charged
// and then put back or abandoned at a partition's close are given back
// (Unreserve).
package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/pagebudget"
)

// CountFunc returns, for each of the given crawls, the pages recorded in
// fetch_log by every fetcher with an attempt started before the given time
// (chstore.Store.CountFetchedPages). Crawls without rows may be missing
// from the result.
type CountFunc func(ctx context.Context, crawlIDs []string, before time.Time) (map[string]int64, error)

// crawl is the bookkeeping of one crawl with a budget: the estimate
// (libs/pagebudget; local is what this process charged) and whether one
// global count has been applied.
type crawl struct {
	est    pagebudget.Estimate
	loaded bool
}

// Tracker is the page budget shared by every partition handler of a
// fetcher. Safe for concurrent use. A Tracker whose limit is 0 for a crawl
// never refuses that crawl and keeps no state for it.
type Tracker struct {
	limit func(crawlID string) int64 // the crawl's budget, 0 = unlimited
	count CountFunc
	now   func() time.Time

	load sync.Mutex // serializes first counts
	mu   sync.Mutex
	runs map[string]*crawl
}

// NewTracker returns a tracker of the budgets limit returns (0: none),
// counting what the other fetchers charged with count; now is the clock
// that stamps a count's start (the one fetch_log rows are stamped with).
func NewTracker(limit func(crawlID string) int64, count CountFunc, now func() time.Time) *Tracker {
	return &Tracker{limit: limit, count: count, now: now, runs: make(map[string]*crawl)}
}

// Reserve charges one page to crawlID and reports whether one was left;
// it charges nothing when none was. The crawl's first Reserve in the
// process runs one global count first (blocking); when it fails the
// estimate is the local one until a refresh succeeds, and the error is
// returned with ok true.
func (t *Tracker) Reserve(ctx context.Context, crawlID string) (ok bool, err error) {
	lim := t.limit(crawlID)
	if lim <= 0 {
		return true, nil
	}
	t.mu.Lock()
	c := t.crawl(crawlID)
	loaded := c.loaded
	t.mu.Unlock()
	if !loaded {
		err = t.first(ctx, crawlID)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.est.Exhausted(lim) {
		return false, err
	}
	c.est.Charge(1)
	return true, err
}

// Exhausted reports whether crawlID has no page left, without charging
// one. Like Reserve, the crawl's first call in the process runs one global
// count first; when it fails the answer is the local one, with the error.
func (t *Tracker) Exhausted(ctx context.Context, crawlID string) (bool, error) {
	lim := t.limit(crawlID)
	if lim <= 0 {
		return false, nil
	}
	t.mu.Lock()
	c := t.crawl(crawlID)
	loaded := c.loaded
	t.mu.Unlock()
	var err error
	if !loaded {
		err = t.first(ctx, crawlID)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.est.Exhausted(lim), err
}

// Unreserve gives back a page charged for a request that was not made
// after all (abandoned at a partition's close, or put back in its queue).
func (t *Tracker) Unreserve(crawlID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.runs[crawlID]; c != nil && c.est.Local > 0 {
		c.est.Charge(-1)
	}
}

// Remaining returns the pages crawlID has left as the tracker knows it
// (before its first count: what this process has not charged), negative
// for a crawl without a budget.
func (t *Tracker) Remaining(crawlID string) int64 {
	lim := t.limit(crawlID)
	if lim <= 0 {
		return -1
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.runs[crawlID]
	if c == nil {
		return lim
	}
	return max(lim-c.est.Used(), 0)
}

// Estimate returns the pages crawlID has used, as the tracker knows it.
func (t *Tracker) Estimate(crawlID string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.runs[crawlID]
	if c == nil {
		return 0
	}
	return c.est.Used()
}

func (t *Tracker) crawl(id string) *crawl {
	c := t.runs[id]
	if c == nil {
		c = &crawl{}
		t.runs[id] = c
	}
	return c
}

// first runs the first global count of crawlID, once.
func (t *Tracker) first(ctx context.Context, crawlID string) error {
	t.load.Lock()
	defer t.load.Unlock()
	t.mu.Lock()
	c := t.runs[crawlID]
	if c.loaded {
		t.mu.Unlock()
		return nil
	}
	started, t0 := c.est.CountStarts(), t.now()
	t.mu.Unlock()
	counts, err := t.count(ctx, []string{crawlID}, t0)
	t.mu.Lock()
	defer t.mu.Unlock()
	// Marked loaded even when the count failed: the periodic refresh
	// retries it, and a crawl must not block every turn on a dead store.
	c.loaded = true
	if err != nil {
		return fmt.Errorf("count fetched pages: %w", err)
	}
	c.est.Counted(counts[crawlID], started)
	return nil
}

// Refresh runs one global count of the crawls the tracker charged for
// whose budget is not known to be spent (a spent budget stays spent unless
// raised, and then the old count is still a lower bound).
func (t *Tracker) Refresh(ctx context.Context) error {
	t.load.Lock() // never concurrently with a first count
	defer t.load.Unlock()
	t.mu.Lock()
	ids := make([]string, 0, len(t.runs))
	started := make(map[string]int64, len(t.runs))
	for id, c := range t.runs {
		lim := t.limit(id)
		if lim <= 0 || c.est.Remote >= lim {
			continue
		}
		ids = append(ids, id)
		started[id] = c.est.CountStarts()
	}
	t0 := t.now()
	t.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	counts, err := t.count(ctx, ids, t0)
	if err != nil {
		return fmt.Errorf("count fetched pages: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		c := t.runs[id]
		c.est.Counted(counts[id], started[id])
		c.loaded = true
	}
	return nil
}

// Run refreshes the global counts every interval until ctx is done. A
// failed count keeps the previous one (the estimate degrades to the local
// view) and is reported through onError.
func (t *Tracker) Run(ctx context.Context, interval time.Duration, onError func(error)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := t.Refresh(ctx); err != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
