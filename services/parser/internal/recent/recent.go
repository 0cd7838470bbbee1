// Package recent remembers which outlinks the parser has already published,
// so that a link every page of a site repeats (the home page, the section
// lists, the footer) goes to the scheduler once rather than once per page.
//
// On a site that looks like the web, nine in ten published links named a
// URL the crawl had already discovered: each cost a record through the
// broker, a decode, a canonicalization and a seen-set lookup in the
// scheduler, and a url_events row. The scheduler's seen set stays the one
// authority on what is fetched; this is a lossy, bounded cache in front of
// it, and forgetting an entry only costs the duplicate it would have saved.
//
// A link is remembered with the depth it was published at: a later
// discovery at a smaller depth is published again, because the scheduler
// may have refused the deeper one as too deep.
package recent

import "sync/atomic"

// depthBits low bits of an entry hold the depth; the rest hold the high
// bits of the fingerprint.
const (
	depthBits = 8
	depthMask = 1<<depthBits - 1
)

// Links is a fixed-size, direct-mapped set of (fingerprint, depth): each
// fingerprint has one slot, chosen by its high bits, and a newer
// fingerprint of the slot replaces the older. Memory is 8 bytes per slot,
// allocated once. Safe for concurrent use (one atomic word per slot).
type Links struct {
	slots []atomic.Uint64
	shift uint // 64 - log2(len(slots))
}

// New returns a set of at least size slots (rounded up to a power of two);
// a size below 1 returns nil, a set that remembers nothing.
func New(size int) *Links {
	if size < 1 {
		return nil
	}
	bits := uint(0)
	for 1<<bits < size {
		bits++
	}
	return &Links{slots: make([]atomic.Uint64, 1<<bits), shift: 64 - bits}
}

// mix spreads a fingerprint's bits over the whole word (the splitmix64
// finalizer, a bijection). A Rabin fingerprint is linear: two URLs that
// differ in their last byte have fingerprints that differ in their low
// eight bits only, which are the bits an entry gives to the depth.
func mix(fp uint64) uint64 {
	fp ^= fp >> 30
	fp *= 0xbf58476d1ce4e5b9
	fp ^= fp >> 27
	fp *= 0x94d049bb133111eb
	return fp ^ fp>>31
}

// entry packs the mixed fingerprint h with a depth; 0 is the empty slot, so
// an h whose packed form would be 0 gets its lowest tag bit set (it then
// collides with one other value in 2^56, which at worst publishes a link
// once more or once less).
func entry(h uint64, depth uint32) uint64 {
	e := h&^depthMask | uint64(min(depth, depthMask))
	if e == 0 {
		e = 1 << depthBits
	}
	return e
}

func (l *Links) slot(h uint64) *atomic.Uint64 { return &l.slots[h>>l.shift] }

// Published reports whether fp was added with a depth at most depth (and
// not forgotten since).
func (l *Links) Published(fp uint64, depth uint32) bool {
	if l == nil {
		return false
	}
	h := mix(fp)
	e := l.slot(h).Load()
	want := entry(h, depth)
	return e != 0 && e&^depthMask == want&^depthMask && e&depthMask <= want&depthMask
}

// Add remembers that fp was published at depth; call it once the record
// is durable, so that a lost publish is never remembered.
func (l *Links) Add(fp uint64, depth uint32) {
	if l == nil {
		return
	}
	h := mix(fp)
	s := l.slot(h)
	want := entry(h, depth)
	for {
		old := s.Load()
		if old&^depthMask == want&^depthMask && old&depthMask <= want&depthMask {
			return // already there at a depth as small
		}
		if s.CompareAndSwap(old, want) {
			return
		}
	}
}

// Len returns the number of slots (for metrics and tests).
func (l *Links) Len() int {
	if l == nil {
		return 0
	}
	return len(l.slots)
}
