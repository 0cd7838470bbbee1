package kafkaio

import "sort"

// offsetTracker tracks the records of one partition between read and ack, to
// find the offset that is safe to commit: the lowest unacked offset, or the
// offset after the last record when every record was acked.
//
// Offsets are added in strictly increasing order (gaps are allowed: compacted
// topics and transaction markers skip offsets) and acked in any order. Memory
// is proportional to the records between the lowest unacked one and the
// newest one. Not safe for concurrent use; the Group guards it with a mutex.
type offsetTracker struct {
	// window holds the records from the lowest unacked one (window[head])
	// to the newest, in offset order.
	window   []trackedOffset
	head     int
	unacked  int
	released int // unacked records the handler released (Release)
	// next is the offset after the newest record released from the
	// window's front (all acked), or -1 before any record was released.
	next int64
	// last is the newest offset added, or -1.
	last int64
}

type trackedOffset struct {
	offset   int64
	acked    bool
	released bool
}

func newOffsetTracker() *offsetTracker {
	return &offsetTracker{next: -1, last: -1}
}

// Add records a newly read offset. It reports false, and records nothing,
// when offset is not greater than every offset added before.
func (t *offsetTracker) Add(offset int64) bool {
	if offset < 0 || offset <= t.last {
		return false
	}
	t.last = offset
	t.window = append(t.window, trackedOffset{offset: offset})
	t.unacked++
	return true
}

// Ack marks offset done. It reports false for an offset that was never
// added or was already acked.
func (t *offsetTracker) Ack(offset int64) bool {
	r := t.unackedRecord(offset)
	if r == nil {
		return false
	}
	r.acked = true
	t.unacked--
	if r.released {
		t.released--
	}
	// Release the acked prefix.
	for t.head < len(t.window) && t.window[t.head].acked {
		t.next = t.window[t.head].offset + 1
		t.head++
	}
	t.compact()
	return true
}

// Release marks offset as released: its handler's work on it is done and
// only waits to be made durable, so it no longer counts as held (Held),
// but it still holds the commit until it is acked. It reports false for
// an offset that was never added, or is acked or released already.
func (t *offsetTracker) Release(offset int64) bool {
	r := t.unackedRecord(offset)
	if r == nil || r.released {
		return false
	}
	r.released = true
	t.released++
	return true
}

// unackedRecord returns offset's record in the window, or nil when it was
// never added or is acked.
func (t *offsetTracker) unackedRecord(offset int64) *trackedOffset {
	live := t.window[t.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i].offset >= offset })
	if i == len(live) || live[i].offset != offset || live[i].acked {
		return nil
	}
	return &live[i]
}

// compact drops the acked prefix once it dominates the slice, so the
// backing array does not grow without bound.
func (t *offsetTracker) compact() {
	if t.head == len(t.window) {
		t.window = t.window[:0]
		t.head = 0
		return
	}
	if t.head > 64 && t.head*2 > len(t.window) {
		n := copy(t.window, t.window[t.head:])
		clear(t.window[n:])
		t.window = t.window[:n]
		t.head = 0
	}
}

// Committable returns the offset to commit: the lowest unacked offset, or
// the newest offset + 1 when everything is acked. ok is false before any
// record was added.
func (t *offsetTracker) Committable() (offset int64, ok bool) {
	if t.head < len(t.window) {
		return t.window[t.head].offset, true
	}
	if t.next >= 0 {
		return t.next, true
	}
	return 0, false
}

// Unacked returns the number of records added and not yet acked.
func (t *offsetTracker) Unacked() int { return t.unacked }

// Held returns the unacked records not released: those the handler is
// still working on.
func (t *offsetTracker) Held() int { return t.unacked - t.released }

// Released returns the records released and not yet acked.
func (t *offsetTracker) Released() int { return t.released }
