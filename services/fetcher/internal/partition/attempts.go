package partition

import (
	"sync"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
)

// AttemptID identifies one attempt of one URL within a crawl.
type AttemptID struct {
	FP      uint64 // fingerprint.URL of the crawl and URL
	Attempt uint32
}

// IDOf derives the identity from the request's crawl and URL rather than
// trusting its url_fp field.
func IDOf(req *crawlv1.FetchRequest) AttemptID {
	return AttemptID{FP: fingerprint.URL(req.GetCrawlId(), req.GetUrl()), Attempt: req.GetAttempt()}
}

// AttemptKey is what Attempts knows of a request: its attempt, when it was
// scheduled (Unix nanoseconds) and whether it is a revisit.
type AttemptKey struct {
	ID        AttemptID
	Scheduled int64
	Revisit   bool
}

// KeyOf is the AttemptKey of req.
func KeyOf(req *crawlv1.FetchRequest) AttemptKey {
	return AttemptKey{ID: IDOf(req), Scheduled: req.GetScheduledAt().AsTime().UnixNano(), Revisit: req.GetRevisit()}
}

// attemptState is what the fetcher remembers of an attempt it holds or
// finished.
type attemptState struct {
	scheduled int64 // FetchRequest.scheduled_at, Unix nanoseconds
	revisit   bool
	done      bool // its outcome is durable
}

// Attempts is the process-wide memory of the fetch attempts this fetcher
// holds (queued or in flight) or recently finished, so that no request of
// the same attempt is made twice however its record comes back: a record
// redelivered after a rebalance or a broker restart, the second copy of a
// deferred record whose first copy was redelivered, a URL admitted twice by
// a scheduler that crashed between producing it and persisting its
// fingerprint. Memory is bounded: two generations of at most limit entries
// each; the older is dropped when the newer fills (a forgotten attempt can
// cost a repeated request, never a lost one). Safe for concurrent use.
type Attempts struct {
	mu        sync.Mutex
	limit     int
	cur, prev map[AttemptID]attemptState
}

// DefaultAttemptsLimit bounds each generation of Attempts: above the
// records a fetcher may hold unacknowledged (32 partitions × 1000).
const DefaultAttemptsLimit = 1 << 16

// AttemptsFor returns the generation size of Attempts for a fetcher that
// may hold inflight unacknowledged records in each of partitions: twice
// what it can hold, so that an attempt is remembered for at least two
// windows after it was claimed (a redelivered window, the copies of a
// window's deferrals), never less than 4096. An entry costs about 40
// bytes of map: 2 × 2 × 8 partitions × 1000 records = 32 000 entries, 1.3
// MB, where a fixed 65 536 per generation was 10 MB of a bench fetcher's
// live heap.
func AttemptsFor(partitions, inflight int) int {
	return max(2*partitions*inflight, 4096)
}

// NewAttempts returns an empty memory of at most 2 × limit attempts.
func NewAttempts(limit int) *Attempts {
	if limit <= 0 {
		limit = DefaultAttemptsLimit
	}
	return &Attempts{limit: limit, cur: make(map[AttemptID]attemptState), prev: map[AttemptID]attemptState{}}
}

// Claim records that the fetcher takes k's attempt, or reports false when
// it is a duplicate: the same request (same attempt and scheduled_at) is
// held or was finished, or k is the first attempt of a newly admitted URL
// (not a revisit) that was requested already.
func (a *Attempts) Claim(k AttemptKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.lookup(k.ID); ok {
		if st.scheduled == k.Scheduled || (k.ID.Attempt == 0 && !k.Revisit) {
			return false
		}
	}
	a.put(k.ID, attemptState{scheduled: k.Scheduled, revisit: k.Revisit})
	return true
}

// Finish marks k's attempt done: its outcome is durable.
func (a *Attempts) Finish(k AttemptKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.put(k.ID, attemptState{scheduled: k.Scheduled, revisit: k.Revisit, done: true})
}

// Release forgets k's attempt when it is held and not done: its record was
// handed back (abandoned at close, deferred durably) and may come back.
func (a *Attempts) Release(k AttemptKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range []map[AttemptID]attemptState{a.cur, a.prev} {
		if st, ok := m[k.ID]; ok && !st.done && st.scheduled == k.Scheduled {
			delete(m, k.ID)
		}
	}
}

// Len returns the attempts remembered.
func (a *Attempts) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cur) + len(a.prev)
}

func (a *Attempts) lookup(id AttemptID) (attemptState, bool) {
	if st, ok := a.cur[id]; ok {
		return st, true
	}
	st, ok := a.prev[id]
	return st, ok
}

func (a *Attempts) put(id AttemptID, st attemptState) {
	delete(a.prev, id)
	a.cur[id] = st
	if len(a.cur) >= a.limit {
		a.prev, a.cur = a.cur, make(map[AttemptID]attemptState, a.limit)
	}
}
