// Package bufpool recycles the byte buffers of pages on their way through a
// service: a fetched body, the record that carries it. A crawl moves tens
// of kilobytes per page through a few such buffers, and allocating each
// afresh made them half of the fetcher's allocated bytes and most of its
// collector's work.
//
// Buffers are kept in power-of-two size classes from MinSize to MaxSize;
// a larger buffer is allocated and left to the collector, so that one
// 5 MB page does not pin 5 MB per class. Like sync.Pool, which it is
// built on, the pool keeps nothing across two collections.
package bufpool

import (
	"math/bits"
	"sync"
)

// The smallest and the largest buffer kept (a request for less than
// MinSize gets MinSize).
const (
	MinSize = 4 << 10
	MaxSize = 1 << 20
)

const (
	minShift = 12 // log2(MinSize)
	classes  = 20 - minShift + 1
)

var pools [classes]sync.Pool

// class is the class of the smallest buffer of at least n bytes, or -1
// when n is over MaxSize.
func class(n int) int {
	if n <= MinSize {
		return 0
	}
	if n > MaxSize {
		return -1
	}
	return bits.Len(uint(n-1)) - minShift
}

// Get returns an empty buffer with room for at least n bytes: recycled
// when one of its class is free, else new.
func Get(n int) []byte {
	c := class(n)
	if c < 0 {
		return make([]byte, 0, n)
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		return (*p)[:0]
	}
	return make([]byte, 0, MinSize<<c)
}

// Put gives b back for reuse. The caller must hold no other reference to
// b's bytes, nor have given any out: the next Get may return them. A
// buffer over MaxSize, or smaller than MinSize, is dropped.
func Put(b []byte) {
	n := cap(b)
	if n < MinSize || n > MaxSize {
		return
	}
	// The class whose every buffer b can stand for: the largest class
	// not over cap(b) (a buffer grown by append has any capacity).
	c := bits.Len(uint(n)) - 1 - minShift
	b = b[:0]
	pools[c].Put(&b)
}
