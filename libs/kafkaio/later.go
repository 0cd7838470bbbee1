package kafkaio

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
)

// Later is the work that finishes a partition's batches after Handle
// returned (inserting their rows, then acking their records), so that the
// next batch is handled meanwhile, as the Handler contract allows. The
// work runs under a context that outlives the partition's revoke until
// Close gives up on it. The first failure is logged and kept: Err returns
// it (the handler's next Handle returns it, which stops the partition)
// and so does Close; its batch stays unacked and goes to the next owner.
// Safe for concurrent use.
type Later struct {
	log    *zap.Logger
	ctx    context.Context //nolint:containedctx // the work outlives Handle and the revoke; only Close ends it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
}

// NewLater returns the background work of the partition assigned under
// ctx (an AssignFunc's context; its values are kept, not its end).
func NewLater(ctx context.Context, log *zap.Logger) *Later {
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &Later{log: log, ctx: lctx, cancel: cancel}
}

// Go runs work in the background; work acks its batch when it succeeds.
func (l *Later) Go(work func(ctx context.Context) error) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if err := work(l.ctx); err != nil {
			l.fail(err)
		}
	}()
}

func (l *Later) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	if l.ctx.Err() == nil {
		l.log.Error("left batch unacked, partition stops", zap.Error(err))
	}
}

// Err returns the first failed work's error, nil while none failed.
func (l *Later) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Close waits for the work in flight until ctx is done, then cancels what
// is left (its batches stay unacked, for the next owner), and returns the
// first failure other than that cancellation.
func (l *Later) Close(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		l.log.Warn("close deadline passed, left unfinished batches unacked")
	}
	l.cancel()
	<-done
	if err := l.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
