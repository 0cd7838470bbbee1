package pages

import (
	"context"
	"sync"
	"time"
)

// lookupWindow is how long a round of content lookups gathers the batches
// of other partitions before it asks ClickHouse.
const lookupWindow = 25 * time.Millisecond

// lookupTimeout bounds one round's queries: they are not cancelled with
// the batch that started the round, which others share.
const lookupTimeout = 30 * time.Second

// coalescedIndex asks a ContentIndex about the content fingerprints of many
// batches at once: the partitions' batches were one content_seen query
// each, a hundred a second on the bench web, each a full query for the
// server. The first batch of a round waits lookupWindow for others to join,
// then makes one query per crawl for all of them and hands each batch its
// answer. No goroutine of its own: the first caller does the work. Safe for
// concurrent use.
type coalescedIndex struct {
	index  ContentIndex
	window time.Duration

	mu   sync.Mutex
	next *lookupRound // gathering, nil when none is
}

type lookupRound struct {
	fps   map[string][]uint64 // by crawl
	ready chan struct{}       // closed when found and err are set
	found map[string]map[uint64]string
	err   error
}

func newCoalescedIndex(index ContentIndex, window time.Duration) *coalescedIndex {
	return &coalescedIndex{index: index, window: window}
}

// SeenContent is ContentIndex.SeenContent, answered by a shared round.
func (c *coalescedIndex) SeenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	c.mu.Lock()
	r := c.next
	leader := r == nil
	if leader {
		r = &lookupRound{fps: make(map[string][]uint64), ready: make(chan struct{})}
		c.next = r
	}
	r.fps[crawlID] = append(r.fps[crawlID], fps...)
	c.mu.Unlock()
	if leader {
		c.run(ctx, r) // the round is answered when it returns
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
	out := make(map[uint64]string)
	for _, fp := range fps {
		if u, ok := r.found[crawlID][fp]; ok {
			out[fp] = u
		}
	}
	return out, nil
}

// run gathers for the window, closes the round to newcomers and queries.
func (c *coalescedIndex) run(ctx context.Context, r *lookupRound) {
	t := time.NewTimer(c.window)
	<-t.C // short: not cut by ctx, the round is the others' too
	c.mu.Lock()
	c.next = nil
	c.mu.Unlock()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
	defer cancel()
	r.found = make(map[string]map[uint64]string, len(r.fps))
	for crawlID, fps := range r.fps {
		found, err := c.index.SeenContent(qctx, crawlID, fps)
		if err != nil {
			r.err = err
			break
		}
		r.found[crawlID] = found
	}
	close(r.ready)
}
