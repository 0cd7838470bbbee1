package pages

import (
	"context"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/simhash"
)

// lookupWindow is how long a round of content lookups gathers the batches
// of other partitions before it asks ClickHouse. A lookup costs the server
// 4-5 ms of CPU whatever its size while the table is small (each part is
// read whole), and a lookup per batch at 25 ms was 275 of a bench crawl's
// 370 queries; at 100 ms they are about 150. A batch's pages wait up to
// that long, beside the other partitions' batches, so throughput holds.
const lookupWindow = 100 * time.Millisecond

// nearLookupWindow is lookupWindow for the near-duplicate index: its
// lookups touch ten keys per document spread over the whole table, so
// that on a crawl's first few hundred thousand documents every lookup
// reads about all of it, and fewer, larger rounds cost ClickHouse less.
// The batches wait for it beside the exact lookup.
const nearLookupWindow = 200 * time.Millisecond

// coalescer asks a lookup about the keys of many batches at once: the
// partitions' batches were one query each, a hundred a second on the bench
// web, each a full query for the server. The first batch of a round waits
// window for others to join, then makes one lookup per crawl for all of
// them and hands each batch its answer. No goroutine of its own: the first
// caller does the work. Safe for concurrent use.
type coalescer[K comparable, V any] struct {
	lookup func(ctx context.Context, crawlID string, keys []K) (map[K]V, error)
	window time.Duration

	mu   sync.Mutex
	next *lookupRound[K, V] // gathering, nil when none is
}

type lookupRound[K comparable, V any] struct {
	keys  map[string][]K // by crawl
	ready chan struct{}  // closed when found and err are set
	found map[string]map[K]V
	err   error

	// The round's queries run until every batch that joined it has gone
	// (its context done): not cancelled with the batch that started it,
	// which others share, and not bounded by a timeout either, for a
	// ClickHouse that is down is waited for (chstore.Store.Read) as long as
	// a batch still wants the answer.
	qctx   context.Context //nolint:containedctx // the round's query context, shared by its batches, not any one batch's
	cancel context.CancelFunc
	live   int // batches in the round whose context is not done; under coalescer.mu
}

// get returns lookup's answer for keys, from a shared round.
func (c *coalescer[K, V]) get(ctx context.Context, crawlID string, keys []K) (map[K]V, error) {
	c.mu.Lock()
	r := c.next
	leader := r == nil
	if leader {
		r = &lookupRound[K, V]{keys: make(map[string][]K), ready: make(chan struct{})}
		r.qctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
		c.next = r
	}
	r.keys[crawlID] = append(r.keys[crawlID], keys...)
	r.live++
	c.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { c.leave(r) })
	defer stop()
	if leader {
		c.run(r) // the round is answered when it returns
	} else {
		select {
		case <-r.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make(map[K]V)
	for _, k := range keys {
		if v, ok := r.found[crawlID][k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// leave counts a batch of the round gone; the last one cancels its
// queries once the round is closed to newcomers.
func (c *coalescer[K, V]) leave(r *lookupRound[K, V]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.live--; r.live == 0 && c.next != r {
		r.cancel()
	}
}

// run gathers for the window, closes the round to newcomers and queries.
func (c *coalescer[K, V]) run(r *lookupRound[K, V]) {
	defer r.cancel()
	t := time.NewTimer(c.window)
	<-t.C // short: not cut by ctx, the round is the others' too
	c.mu.Lock()
	c.next = nil
	if r.live == 0 { // every batch gone while the round gathered
		r.cancel()
	}
	c.mu.Unlock()
	r.found = make(map[string]map[K]V, len(r.keys))
	for crawlID, keys := range r.keys {
		found, err := c.lookup(r.qctx, crawlID, keys)
		if err != nil {
			r.err = err
			break
		}
		r.found[crawlID] = found
	}
	close(r.ready)
}

// coalescedIndex is a ContentIndex answered by shared rounds.
type coalescedIndex struct {
	c coalescer[uint64, string]
}

func newCoalescedIndex(index ContentIndex, window time.Duration) *coalescedIndex {
	return &coalescedIndex{c: coalescer[uint64, string]{lookup: index.SeenContent, window: window}}
}

// SeenContent is ContentIndex.SeenContent, answered by a shared round.
func (ci *coalescedIndex) SeenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	return ci.c.get(ctx, crawlID, fps)
}

// coalescedNear is a NearIndex answered by shared rounds.
type coalescedNear struct {
	c coalescer[simhash.Band, []chstore.NearCandidate]
}

func newCoalescedNear(index NearIndex, window time.Duration) *coalescedNear {
	return &coalescedNear{c: coalescer[simhash.Band, []chstore.NearCandidate]{lookup: index.NearCandidates, window: window}}
}

// NearCandidates is NearIndex.NearCandidates, answered by a shared round.
func (cn *coalescedNear) NearCandidates(ctx context.Context, crawlID string, bands []simhash.Band) (map[simhash.Band][]chstore.NearCandidate, error) {
	return cn.c.get(ctx, crawlID, bands)
}
