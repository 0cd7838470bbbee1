package kafkaio

import (
	"context"
	"time"
)

// backoff is a doubling delay with a cap. Not safe for concurrent use.
type backoff struct {
	next, max time.Duration
}

func newBackoff(start, limit time.Duration) *backoff { return &backoff{next: start, max: limit} }

// wait sleeps for the current delay, doubling it, or returns ctx's error.
func (b *backoff) wait(ctx context.Context) error {
	t := time.NewTimer(b.next)
	defer t.Stop()
	b.next = min(2*b.next, b.max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
