package kafkaio

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
)

// ProduceGrace is how long a produce that a handler started may go on
// after its partition's context ended (a revoke, the group stopping):
// long enough for a healthy broker to answer, short against the
// rebalance timeout the group waits on Handle for.
const ProduceGrace = 2 * time.Second

// Grace returns a context with ctx's values that ends d after ctx ends,
// or when the returned cancel is called (call it once the work is done).
//
// For a produce that must not be cut short: kafka-go sends a batch whose
// WriteMessages returned ctx's error anyway, so a handler that takes that
// error as "nothing produced" (and keeps no trace of it: no seen row, no
// ack) has produced records it does not know of, and the next owner of
// the partition produces them again. Under Grace the produce gets d to
// finish after a revoke, and its outcome is known.
func Grace(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-gctx.Done():
		}
	})
	return gctx, func() {
		stop()
		cancel()
	}
}

// RecordWriter writes records, blocking until they are acknowledged
// (*Writer).
type RecordWriter interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// WriteGraced writes msgs with w under Grace(ctx, ProduceGrace): a revoke
// that ends ctx while the write is on its way does not cut it short. For a
// handler that keeps a trace of what it produced (a seen row, a released
// frontier row, a revisit lease, an ack) only when the write succeeds.
func WriteGraced(ctx context.Context, w RecordWriter, msgs ...kafka.Message) error {
	gctx, cancel := Grace(ctx, ProduceGrace)
	defer cancel()
	return w.Write(gctx, msgs...)
}
