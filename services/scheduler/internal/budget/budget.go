// Package budget enforces the per-crawl admission ceiling (--max-pages, or
// the spec's limits.max_pages, times --budget-admit-factor; the fetchers
// charge the page budget itself) across the partitions of one scheduler
// instance, with a periodic global count from the URL-seen store for the
// partitions other instances own.
//
// # Approximation
//
// The number of pages a crawl has admitted is estimated (libs/pagebudget) as
//
//	estimate = max(held, remote + since)
//
// where held is the exact count of the crawl's fingerprints in the seen sets
// this instance holds (loaded at assignment, plus every admission, minus
// revoked partitions), remote is the last global count (uniqExact over
// url_seen, every partition) and since is what this instance admitted after
// that count was started. A URL is admitted only while estimate < max.
//
// With one scheduler instance owning every partition, held is exact and the
// budget is never exceeded. With several instances the estimate misses what
// the other instances admitted since the last refresh, plus what any
// instance had decided but not yet inserted when the count ran (at most one
// batch per partition), so a crawl overshoots its budget by at most
//
//	(other instances' admissions during one refresh interval plus the
//	 duration of the count query) + (partitions × max batch)
//
// and never undershoots by more than the in-flight batches counted twice.
//
// # The second allowance
//
// A URL whose priority is above 0 (best-first, libs/priority) is admitted
// past the ceiling while the estimate is below twice the ceiling
// (ReserveBest): the ceiling stops the crawl's ordinary URLs, and the
// valuable ones found late (a deep page many pages link) still get in.
// The allowance is counted by the same estimate, so it is as approximate
// across instances and restarts as the ceiling.
package budget

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/pagebudget"
)

// CountFunc returns, for each of the given crawls, the number of distinct
// fingerprints stored in the URL-seen table over every partition. Crawls
// without rows may be missing from the result.
type CountFunc func(ctx context.Context, crawlIDs []string) (map[string]int64, error)

// crawl is one crawl's estimate (libs/pagebudget): Local is the exact
// count of its fingerprints in the seen sets held here (loaded at
// assignment, plus every admission, minus revoked partitions).
type crawl = pagebudget.Estimate

// Tracker is the page budget shared by every partition handler of an
// instance. Safe for concurrent use. A Tracker without limits never
// refuses and keeps no state.
type Tracker struct {
	limits func(crawlID string) int64 // a crawl's ceiling, 0 = unlimited; nil: every crawl unlimited

	mu     sync.Mutex
	crawls map[string]*crawl
	parts  map[int]map[string]int64 // partition → crawl → fingerprints held
}

// NewTracker returns a tracker allowing each crawl limits(crawlID) pages
// (0 = unlimited): the crawl's resolved ceiling (config.SpecPages: its
// spec's limits.max_pages, else the fleet's --max-pages, times the admit
// factor). nil leaves every crawl unlimited: the tracker keeps no state.
func NewTracker(limits func(crawlID string) int64) *Tracker {
	return &Tracker{
		limits: limits,
		crawls: make(map[string]*crawl),
		parts:  make(map[int]map[string]int64),
	}
}

// Fixed is the limits of a tracker allowing every crawl n pages: nil
// (unlimited) for 0.
func Fixed(n int64) func(crawlID string) int64 {
	if n <= 0 {
		return nil
	}
	return func(string) int64 { return n }
}

// Limited reports whether the tracker enforces (or may enforce) a budget.
func (t *Tracker) Limited() bool { return t.limits != nil }

// limit is the page budget of a crawl, 0 = unlimited.
func (t *Tracker) limit(crawlID string) int64 {
	if t.limits == nil {
		return 0
	}
	return t.limits(crawlID)
}

func (t *Tracker) crawl(id string) *crawl {
	c := t.crawls[id]
	if c == nil {
		c = &crawl{}
		t.crawls[id] = c
	}
	return c
}

// Hold records the fingerprints per crawl of a newly assigned partition,
// loaded from the store (so already part of any global count). It replaces
// what was held for the partition before.
func (t *Tracker) Hold(partition int, counts map[string]int64) {
	if !t.Limited() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.release(partition)
	held := make(map[string]int64, len(counts))
	for id, n := range counts {
		held[id] = n
		t.crawl(id).Local += n
	}
	t.parts[partition] = held
}

// Release forgets a revoked partition's fingerprints.
func (t *Tracker) Release(partition int) {
	if !t.Limited() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.release(partition)
}

func (t *Tracker) release(partition int) {
	for id, n := range t.parts[partition] {
		t.crawls[id].Local -= n
	}
	delete(t.parts, partition)
}

// Reserve takes one page of crawlID's budget for an admission in partition
// and reports whether one was left.
func (t *Tracker) Reserve(partition int, crawlID string) bool {
	if !t.Limited() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reserve(partition, crawlID, t.limit(crawlID))
}

// ReserveBest is Reserve for a URL whose priority is above 0
// (admit.BestBudget): past the crawl's ceiling it still takes a page
// while the estimate is below twice the ceiling, a second allowance of
// the same size that only such URLs use. It is measured by the same
// estimate as the ceiling, so it is as approximate across instances and
// restarts.
func (t *Tracker) ReserveBest(partition int, crawlID string) bool {
	if !t.Limited() {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	limit := t.limit(crawlID)
	if limit > 0 {
		limit += min(limit, math.MaxInt64-limit)
	}
	return t.reserve(partition, crawlID, limit)
}

// reserve takes one page of crawlID's budget while its estimate is below
// limit (0: unlimited). mu is held.
func (t *Tracker) reserve(partition int, crawlID string, limit int64) bool {
	c := t.crawl(crawlID)
	if c.Exhausted(limit) {
		return false
	}
	c.Charge(1)
	held := t.parts[partition]
	if held == nil {
		held = make(map[string]int64)
		t.parts[partition] = held
	}
	held[crawlID]++
	return true
}

// Unreserve gives back pages reserved for admissions that were not
// delivered (the batch failed before anything was produced).
func (t *Tracker) Unreserve(partition int, crawlID string, n int64) {
	if !t.Limited() || n == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.crawl(crawlID)
	c.Charge(-n)
	if held := t.parts[partition]; held != nil {
		held[crawlID] -= n
	}
}

// Estimate returns the admitted-page estimate of a crawl.
func (t *Tracker) Estimate(crawlID string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.crawls[crawlID]
	if c == nil {
		return 0
	}
	return c.Used()
}

// Refresh runs one global count for every crawl the tracker knows that
// has a page budget. A crawl without one is not counted: nothing is
// measured against its estimate, and the count reads every admitted
// fingerprint of the crawl (a count a refresh of a million-URL crawl
// would repeat every few seconds). Its local charges go on, so a budget
// set later starts from them and the next count.
func (t *Tracker) Refresh(ctx context.Context, count CountFunc) error {
	if !t.Limited() {
		return nil
	}
	t.mu.Lock()
	ids := make([]string, 0, len(t.crawls))
	started := make(map[string]int64, len(t.crawls))
	for id, c := range t.crawls {
		if t.limit(id) <= 0 {
			continue
		}
		ids = append(ids, id)
		started[id] = c.CountStarts()
	}
	t.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	counts, err := count(ctx, ids)
	if err != nil {
		return fmt.Errorf("count admitted urls: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		c := t.crawls[id]
		c.Counted(counts[id], started[id])
	}
	return nil
}

// Run refreshes the global counts every interval until ctx is done. A
// failed count keeps the previous one (the estimate only degrades to the
// local view) and is reported through onError.
func (t *Tracker) Run(ctx context.Context, interval time.Duration, count CountFunc, onError func(error)) error {
	if !t.Limited() {
		return nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := t.Refresh(ctx, count); err != nil && ctx.Err() == nil {
				onError(err)
			}
		}
	}
}
