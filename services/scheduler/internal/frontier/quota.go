// Package frontier is the scheduler's frontier beyond the Fetch topic: the
// per-host admission quota (at most a fixed number of fetch requests per
// host per time window leave a partition, so that one host with a huge
// backlog cannot fill the Fetch partition, and the fetcher's bounded
// window, ahead of the other hosts of that partition) and the partition's
// Pump, which releases the URLs waiting in ClickHouse (table frontier_v2:
// over quota, or of a paused crawl) best first per host (highest priority,
// then shallowest: priority.Rank; breadth-first when every priority is
// 0), and
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
//
// It also keeps the partition's per-host frontier in order: a host whose
// URLs were deferred has a backlog (the best rank waiting, priority.Rank:
// lower goes first; with every priority 0 the rank orders by depth, and
// the frontier is breadth-first), and a fresh URL of that host ranked as
// low or lower waits behind it (Admit) even when the window's quota has
// room, so the pump, which releases a host's backlog best first, decides
// its order; only a better-ranked fresh URL may go ahead. The pump
// settles the backlog after each read (Settle).
type Quota struct {
	limit  int
	window time.Duration
	now    func() time.Time

	mu      sync.Mutex
	start   time.Time
	counts  map[string]int
	backlog map[string]backlog // hosts with URLs waiting in the frontier
	gen     uint64             // deferrals so far (Admit refusals)
}

// backlog is what a host has waiting in the frontier: its best rank, and
// the generation of its latest deferral.
type backlog struct {
	rank uint32
	gen  uint64
}

// NewQuota returns a quota of limit releases per host per window.
func NewQuota(limit int, window time.Duration, now func() time.Time) *Quota {
	return &Quota{limit: limit, window: window, now: now, counts: make(map[string]int), backlog: make(map[string]backlog)}
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
	return q.take(host)
}

func (q *Quota) take(host string) bool {
	q.roll()
	if q.counts[host] >= q.limit {
		return false
	}
	q.counts[host]++
	return true
}

// Admit is Take for a freshly admitted URL of host at rank
// (priority.Rank of its priority and depth): it also reports false,
// taking nothing, when the host has a backlog at rank or better. A URL
// refused is deferred by the caller and joins the host's backlog.
func (q *Quota) Admit(host string, rank uint32) bool {
	if q.limit <= 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if b, ok := q.backlog[host]; (!ok || rank < b.rank) && q.take(host) {
		return true
	}
	q.gen++
	b, ok := q.backlog[host]
	if !ok || rank < b.rank {
		b.rank = rank
	}
	b.gen = q.gen
	q.backlog[host] = b
	return false
}

// Generation returns the number of deferrals so far; the pump reads it
// before its query, for Settle.
func (q *Quota) Generation() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.gen
}

// Settle records what the pump's read left of the hosts' backlogs: left
// holds every host with URLs still pending after the read's releases, at
// its best pending rank; every other host's backlog is drained.
// A host whose latest deferral came after generation since keeps its
// backlog (at least as shallow as it was): its row may have been written
// after the read. The pump passes the Generation of its previous read, a
// window earlier, so that the rows of older deferrals are in the table.
func (q *Quota) Settle(left map[string]uint32, since uint64) {
	if q.limit <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for host, b := range q.backlog {
		rank, pending := left[host]
		switch {
		case b.gen > since && pending:
			b.rank = min(b.rank, rank)
			q.backlog[host] = b
		case b.gen > since:
		case pending:
			q.backlog[host] = backlog{rank: rank, gen: b.gen}
		default:
			delete(q.backlog, host)
		}
	}
	for host, rank := range left {
		if _, ok := q.backlog[host]; !ok {
			q.backlog[host] = backlog{rank: rank} // found by the read (a previous owner's rows)
		}
	}
}

// Backlogged returns the number of hosts with a backlog.
func (q *Quota) Backlogged() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.backlog)
}

// Limited reports whether the quota limits anything.
func (q *Quota) Limited() bool { return q.limit > 0 }
