// Package frontier is the scheduler's frontier beyond the Fetch topic: the
// per-host admission quota (at most a fixed number of fetch requests per
// host per time window leave a partition, so that one host with a huge
// backlog cannot fill the Fetch partition, and the fetcher's bounded
// window, ahead of the other hosts of that partition) and the partition's
// Pump, which releases the URLs waiting in ClickHouse (table frontier_v2:
// over quota, or of a paused crawl) breadth-first by depth per host, and
// drops those of a cancelled crawl. The table itself is reached through
// Store (sinks.Frontier).
package frontier

import (
	"sync"
	"time"
)

// Quota counts the fetch requests released per host in fixed windows. The
// zero limit means unlimited. Safe for concurrent use (a partition's
// handler and its pump share one).
type Quota struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu     sync.Mutex
	start  time.Time
	counts map[string]int
}

// NewQuota returns a quota of limit releases per host per window.
func NewQuota(limit int, window time.Duration, now func() time.Time) *Quota {
	return &Quota{limit: limit, window: window, now: now, counts: make(map[string]int)}
}

// roll starts a new window when the current one is over. mu is held.
func (q *Quota) roll() {
	if now := q.now(); now.Sub(q.start) >= q.window {
		q.start = now
		clear(q.counts)
	}
}

// Take counts one release for host and reports true, or reports false
// when the host's quota of the current window is used up.
func (q *Quota) Take(host string) bool {
	if q.limit <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.roll()
	if q.counts[host] >= q.limit {
		return false
	}
	q.counts[host]++
	return true
}

// Limited reports whether the quota limits anything.
func (q *Quota) Limited() bool { return q.limit > 0 }
