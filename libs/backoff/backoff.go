// Package backoff is the wait between the attempts of an operation that
// fails while something it needs is away (ClickHouse, the broker, a
// server being restarted): it starts at a first wait and doubles up to a
// cap, and a jittered one waits between half and all of it, so that the
// services of a fleet do not knock in step when their dependency returns.
//
// Every retry loop of the tree waits through it:
//
//	b := backoff.Jittered(100*time.Millisecond, 5*time.Second)
//	for {
//		if err := op(); err == nil {
//			return nil
//		}
//		if err := b.Wait(ctx); err != nil {
//			return err // ctx is done
//		}
//	}
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is a doubling wait with a cap. Not safe for concurrent use.
type Backoff struct {
	next, max time.Duration
	jitter    bool
}

// New returns a Backoff that waits first, then twice as long after each
// wait, never longer than limit.
func New(first, limit time.Duration) *Backoff {
	return &Backoff{next: first, max: max(first, limit)}
}

// Jittered is New whose every wait is uniform between half and all of the
// doubling one.
func Jittered(first, limit time.Duration) *Backoff {
	b := New(first, limit)
	b.jitter = true
	return b
}

// Next returns the wait the next Wait is based on (before jitter), for a
// log line that says when the next attempt comes.
func (b *Backoff) Next() time.Duration { return b.next }

// Wait sleeps for the next wait, then doubles it up to the cap; it
// returns ctx's error at once when ctx is done first.
func (b *Backoff) Wait(ctx context.Context) error {
	d := b.next
	if b.jitter && d > 1 {
		d = d/2 + rand.N(d/2+1)
	}
	b.next = min(2*b.next, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
