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
//
// Hiding the repeats would hide a URL's in-links from the scheduler, which
// ranks a URL by them (best-first, libs/priority). So each entry also
// counts the pages seen linking its URL, approximately, in 4 bits: a
// Morris counter whose exponent e is 0 when the link is published, and
// steps to e+1 with probability 2^-e at each later sighting (Sighted).
// 2^e estimates the sightings so far, without bias; the link is published
// again at each step, with in_links 2^e: 2 at the first repeat, then 4, 8,
// … up to 2^15, each ever more rarely (about log2 n records for n
// sightings).
package recent

import (
	"sync"
	"sync/atomic"
)

// An entry is, from its low bits: the depth (8 bits), the in-link
// counter's exponent (4 bits), and the high 52 bits of the mixed
// fingerprint.
const (
	depthBits = 8
	depthMask = 1<<depthBits - 1
	countBits = 4
	countMask = (1<<countBits - 1) << depthBits
	tagBits   = depthBits + countBits
	tagMask   = 1<<tagBits - 1 // the bits that are not the fingerprint's
	maxCount  = 1<<countBits - 1
)

// MaxInLinks is the largest in-link count Sighted reports.
const MaxInLinks = 1 << maxCount

// firstSlots is the size a set starts at: 256 KiB.
const firstSlots = 1 << 15

// Links is a set of (fingerprint, depth, in-link counter) in buckets of
// two slots: a fingerprint's bucket is chosen by its high bits, it takes a
// free slot of the bucket, and a third fingerprint of a full bucket
// replaces one of the two. Memory is 8 bytes per slot. The table starts small and doubles
// whenever a quarter of its slots are taken, up to the size given to New,
// so that a small crawl does not hold (and touch) a table sized for a
// large one. Safe for concurrent use (one atomic word per slot, changed by
// compare-and-swap; an Add or a counter's step racing with a doubling may
// be lost, which only forgets, or reports one in-link count twice).
type Links struct {
	max   int // slots the table may grow to
	table atomic.Pointer[table]
	grow  sync.Mutex // one doubling at a time
}

type table struct {
	slots []atomic.Uint64
	shift uint         // 64 - log2(len(slots))
	used  atomic.Int64 // slots not empty
}

func newTable(bits uint) *table {
	return &table{slots: make([]atomic.Uint64, 1<<bits), shift: 64 - bits}
}

// bucket returns the two slots of hash h (or of an entry, which keeps its
// hash's high bits).
func (t *table) bucket(h uint64) []atomic.Uint64 {
	i := h >> t.shift &^ 1
	return t.slots[i : i+2 : i+2]
}

// New returns a set of at most size slots (rounded up to a power of two);
// a size below 1 returns nil, a set that remembers nothing.
func New(size int) *Links {
	if size < 1 {
		return nil
	}
	bits := uint(1) // a bucket at least
	for 1<<bits < size {
		bits++
	}
	l := &Links{max: 1 << bits}
	first := uint(0)
	for 1<<first < min(l.max, firstSlots) {
		first++
	}
	l.table.Store(newTable(first))
	return l
}

// mix spreads a fingerprint's bits over the whole word (the splitmix64
// finalizer, a bijection). A Rabin fingerprint is linear: two URLs that
// differ in their last byte have fingerprints that differ in their low
// eight bits only, which are among the bits an entry gives to the depth
// and the counter.
func mix(fp uint64) uint64 {
	fp ^= fp >> 30
	fp *= 0xbf58476d1ce4e5b9
	fp ^= fp >> 27
	fp *= 0x94d049bb133111eb
	return fp ^ fp>>31
}

// entry packs the mixed fingerprint h with a depth and a counter of 0. 0
// is the empty slot, so an h whose high 52 bits are 0 gets the lowest of
// them set, whatever the depth (it then collides with one other value in
// 2^52, which at worst publishes a link once more or once less).
func entry(h uint64, depth uint32) uint64 {
	h &^= tagMask
	if h == 0 {
		h = 1 << tagBits
	}
	return h | uint64(min(depth, depthMask))
}

// same reports whether entries e and want are of one fingerprint.
func same(e, want uint64) bool { return e != 0 && e&^tagMask == want&^tagMask }

// count is the exponent of entry e's in-link counter.
func count(e uint64) uint32 { return uint32(e&countMask) >> depthBits }

// Published reports whether fp was added with a depth at most depth (and
// not forgotten since).
func (l *Links) Published(fp uint64, depth uint32) bool {
	if l == nil {
		return false
	}
	h := mix(fp)
	want := entry(h, depth)
	b := l.table.Load().bucket(h)
	for i := range b {
		if e := b[i].Load(); same(e, want) && e&depthMask <= want&depthMask {
			return true
		}
	}
	return false
}

// Sighted is Published for a page (whose fingerprint is from) that links
// fp, counting the link as an in-link of fp when fp was published: with
// probability 2^-e the counter steps from e to e+1, and Sighted returns
// inLinks = 2^(e+1), for fp to be published again with that count. Else
// inLinks is 0. The draw is a hash of fp and from, so a page redelivered
// draws the same (a counter it stepped is a step further, though). The
// cost over Published is a hash when the counter is above 0 and, when it
// steps, a compare-and-swap; a sighting racing with another change of its
// slot is not counted.
func (l *Links) Sighted(fp, from uint64, depth uint32) (published bool, inLinks uint32) {
	if l == nil {
		return false, 0
	}
	h := mix(fp)
	want := entry(h, depth)
	b := l.table.Load().bucket(h)
	for i := range b {
		e := b[i].Load()
		if !same(e, want) || e&depthMask > want&depthMask {
			continue
		}
		c := count(e)
		if c == maxCount || c > 0 && mix(h^from)>>(64-c) != 0 {
			return true, 0
		}
		if !b[i].CompareAndSwap(e, e+1<<depthBits) {
			return true, 0
		}
		return true, 1 << (c + 1)
	}
	return false, 0
}

// Fetched stops counting the in-links of fp, at every depth it is
// remembered at: its page was fetched, so a higher priority would order
// nothing, and publishing it again would only cost records. Its count is
// set to the largest, which Sighted never steps. Nothing when fp is not
// remembered (its links were published by another parser, or forgotten).
func (l *Links) Fetched(fp uint64) {
	if l == nil {
		return
	}
	h := mix(fp)
	want := entry(h, 0)
	b := l.table.Load().bucket(h)
	for i := range b {
		for {
			e := b[i].Load()
			if !same(e, want) || count(e) == maxCount {
				break
			}
			if b[i].CompareAndSwap(e, e|countMask) {
				break
			}
		}
	}
}

// InLinks returns the in-link count of fp, 2^e, or 0 when fp is not
// remembered (for tests and diagnostics).
func (l *Links) InLinks(fp uint64) uint32 {
	if l == nil {
		return 0
	}
	h := mix(fp)
	want := entry(h, 0)
	b := l.table.Load().bucket(h)
	for i := range b {
		if e := b[i].Load(); same(e, want) {
			return 1 << count(e)
		}
	}
	return 0
}

// Add remembers that fp was published at depth; call it once the record
// is durable, so that a lost publish is never remembered.
func (l *Links) Add(fp uint64, depth uint32) {
	if l == nil {
		return
	}
	h := mix(fp)
	t := l.table.Load()
	b := t.bucket(h)
	want := entry(h, depth)
	for {
		a, c := b[0].Load(), b[1].Load()
		// The fingerprint's own slot, else a free one, else the one
		// the next bit of its hash picks.
		i, old := 0, a
		switch {
		case same(a, want):
		case same(c, want), a != 0 && c == 0, a != 0 && h>>t.shift&1 == 1:
			i, old = 1, c
		}
		if same(old, want) && old&depthMask <= want&depthMask {
			return // already there at a depth as small
		}
		next := want
		if same(old, want) {
			next |= old & countMask // a smaller depth keeps the in-links counted
		}
		if b[i].CompareAndSwap(old, next) {
			if old == 0 && 4*t.used.Add(1) > int64(len(t.slots)) && len(t.slots) < l.max {
				l.double(t)
			}
			return
		}
	}
}

// double replaces t, if it is still the table, by one twice its size
// holding its entries: an entry keeps the high bits of its hash, which
// choose its bucket in either table, and the two entries of a bucket go
// to one or two buckets of the larger table, never more than two to one.
func (l *Links) double(t *table) {
	l.grow.Lock()
	defer l.grow.Unlock()
	if l.table.Load() != t {
		return // another Add doubled it
	}
	n := newTable(64 - t.shift + 1)
	for i := range t.slots {
		e := t.slots[i].Load()
		if e == 0 {
			continue
		}
		b := n.bucket(e)
		if !b[0].CompareAndSwap(0, e) {
			b[1].Store(e)
		}
		n.used.Add(1)
	}
	l.table.Store(n)
}

// Len returns the number of slots now (for metrics and tests).
func (l *Links) Len() int {
	if l == nil {
		return 0
	}
	return len(l.table.Load().slots)
}

// Cap returns the number of slots the set may grow to.
func (l *Links) Cap() int {
	if l == nil {
		return 0
	}
	return l.max
}
