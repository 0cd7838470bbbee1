package pages

import "sync"

// recentContentSize bounds the content fingerprints a processor remembers
// (about 100 bytes each): at least the documents waiting for their content_seen
// rows (two batches per partition), with room to spare.
const recentContentSize = 1 << 14

// contentKey is a content fingerprint within one crawl.
type contentKey struct {
	crawl string
	fp    uint64
}

// recentContent remembers the first URL of the latest content fingerprints
// this process claimed, so that a duplicate of a page whose content_seen
// row is not inserted yet (its batch is still being persisted, on this or
// another partition) is recognised as one. Older fingerprints are forgotten
// first; ClickHouse's content_seen answers for them. Safe for concurrent
// use.
type recentContent struct {
	mu    sync.Mutex
	first map[contentKey]string
	ring  []contentKey // insertion order, for eviction
	next  int
}

func newRecentContent(size int) *recentContent {
	return &recentContent{first: make(map[contentKey]string, size), ring: make([]contentKey, 0, size)}
}

// claim returns the first URL of k: the one remembered, else stored (the
// URL content_seen returned, "" when none), else url, which is then the
// first.
func (c *recentContent) claim(k contentKey, stored, url string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.first[k]; ok {
		return first
	}
	first := stored
	if first == "" {
		first = url
	}
	if len(c.ring) < cap(c.ring) {
		c.ring = append(c.ring, k)
	} else {
		delete(c.first, c.ring[c.next])
		c.ring[c.next] = k
		c.next = (c.next + 1) % len(c.ring)
	}
	c.first[k] = first
	return first
}
