// Package dedup holds the scheduler's in-memory URL-seen sets: one compact
// set of 64-bit URL fingerprints per owned partition.
//
// A Set is an open-addressing hash table with linear probing over a flat
// []uint64. The value 0 marks an empty slot, so the zero fingerprint is kept
// in a separate flag. Slots are chosen by "fastrange" (the high 64 bits of
// mix(fp) × len(slots)), which works for any table size, so the table can
// grow by a factor of 1.5 instead of 2: with a maximum load of 3/4 the load
// after growing is 1/2, and the table never costs more than 8 / (1/2) = 16
// bytes per fingerprint (10.7 at the maximum load), outside the moment of
// growth itself, when the old and the new table briefly coexist.
//
// Fingerprints are passed through a bijective mixer before slot selection:
// Rabin fingerprints are linear over GF(2), so URLs that differ only in a few
// bits could otherwise share their high bits and build long probe runs.
//
// There is no removal: a partition's set only grows while the partition is
// owned, and is dropped whole when the partition is revoked.
package dedup

import "math/bits"

const (
	// minSlots is the size of the first table.
	minSlots = 16
	// maxLoadNum/maxLoadDen is the maximum load factor (3/4).
	maxLoadNum = 3
	maxLoadDen = 4
)

// Set is a set of uint64 fingerprints. The zero value is an empty set ready
// to use. Not safe for concurrent use: a set is owned by its partition's
// handler.
type Set struct {
	slots   []uint64 // 0 = empty
	used    int      // non-zero fingerprints stored in slots
	limit   int      // grow when used reaches limit
	hasZero bool     // the zero fingerprint is in the set
	// marks holds a bit per slot (Mark), allocated on the first Mark: a
	// sixty-fourth of the table.
	marks      []uint64
	zeroMarked bool
}

// New returns a set sized to hold hint fingerprints without growing.
func New(hint int) *Set {
	s := &Set{}
	if hint > 0 {
		s.resize(slotsFor(hint))
	}
	return s
}

// slotsFor returns a table size whose maximum load holds n entries.
func slotsFor(n int) int {
	m := (n*maxLoadDen + maxLoadNum - 1) / maxLoadNum
	if m < minSlots {
		m = minSlots
	}
	return m + 1 // so that n < limit and adding n entries never grows
}

// mix is the 64-bit finalizer of MurmurHash3 (a bijection): every input bit
// affects every output bit, so fastrange sees well-spread high bits.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// home returns the first slot probed for fp in a table of n slots.
func home(fp uint64, n int) int {
	hi, _ := bits.Mul64(mix(fp), uint64(n))
	return int(hi)
}

// Len returns the number of fingerprints in the set.
func (s *Set) Len() int {
	if s.hasZero {
		return s.used + 1
	}
	return s.used
}

// Bytes returns the memory held by the table, in bytes.
func (s *Set) Bytes() int { return 8 * (cap(s.slots) + cap(s.marks)) }

// Mark marks fp and reports whether fp is in the set and whether this was
// its first mark (false for a fingerprint marked before, or not in the
// set). A mark lasts as long as its fingerprint's entry, and costs one bit
// per slot of the table.
func (s *Set) Mark(fp uint64) (in, first bool) {
	if fp == 0 {
		if !s.hasZero {
			return false, false
		}
		first = !s.zeroMarked
		s.zeroMarked = true
		return true, first
	}
	i, ok := s.slot(fp)
	if !ok {
		return false, false
	}
	if s.marks == nil {
		s.marks = make([]uint64, (len(s.slots)+63)/64)
	}
	bit := uint64(1) << (i % 64)
	if s.marks[i/64]&bit != 0 {
		return true, false
	}
	s.marks[i/64] |= bit
	return true, true
}

// slot returns the slot holding fp (not 0).
func (s *Set) slot(fp uint64) (int, bool) {
	n := len(s.slots)
	if n == 0 {
		return 0, false
	}
	i := home(fp, n)
	for {
		v := s.slots[i]
		if v == fp {
			return i, true
		}
		if v == 0 {
			return 0, false
		}
		i++
		if i == n {
			i = 0
		}
	}
}

// Contains reports whether fp is in the set.
func (s *Set) Contains(fp uint64) bool {
	if fp == 0 {
		return s.hasZero
	}
	_, ok := s.slot(fp)
	return ok
}

// Add inserts fp and reports whether it was absent.
func (s *Set) Add(fp uint64) bool {
	if fp == 0 {
		if s.hasZero {
			return false
		}
		s.hasZero = true
		return true
	}
	if s.used >= s.limit {
		s.grow()
	}
	n := len(s.slots)
	i := home(fp, n)
	for {
		v := s.slots[i]
		if v == fp {
			return false
		}
		if v == 0 {
			s.slots[i] = fp
			s.used++
			return true
		}
		i++
		if i == n {
			i = 0
		}
	}
}

// grow moves the entries to a table 1.5 times larger.
func (s *Set) grow() {
	n := len(s.slots) + len(s.slots)/2
	if n < minSlots {
		n = minSlots
	}
	s.resize(n)
}

// resize rehashes every entry (and its mark) into a table of n slots (n >
// used).
func (s *Set) resize(n int) {
	old, oldMarks := s.slots, s.marks
	s.slots = make([]uint64, n)
	if oldMarks != nil {
		s.marks = make([]uint64, (n+63)/64)
	}
	s.limit = n * maxLoadNum / maxLoadDen
	for j, fp := range old {
		if fp == 0 {
			continue
		}
		i := home(fp, n)
		for s.slots[i] != 0 {
			i++
			if i == n {
				i = 0
			}
		}
		s.slots[i] = fp
		if oldMarks != nil && oldMarks[j/64]&(1<<(j%64)) != 0 {
			s.marks[i/64] |= 1 << (i % 64)
		}
	}
}

// Reset empties the set and keeps its table for reuse.
func (s *Set) Reset() {
	clear(s.slots)
	clear(s.marks)
	s.used = 0
	s.hasZero, s.zeroMarked = false, false
}
