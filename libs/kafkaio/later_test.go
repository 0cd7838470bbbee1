package kafkaio

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

func TestLater(t *testing.T) {
	t.Run("work outlives the assignment until Close", func(t *testing.T) {
		assigned, revoke := context.WithCancel(t.Context())
		l := NewLater(assigned, zap.NewNop())
		release := make(chan struct{})
		finished := make(chan error, 1)
		l.Go(func(ctx context.Context) error {
			<-release
			finished <- ctx.Err()
			return nil
		})
		revoke()
		close(release)
		if err := <-finished; err != nil {
			t.Errorf("work's context ended with the assignment: %v", err)
		}
		if err := l.Close(t.Context()); err != nil {
			t.Errorf("Close = %v", err)
		}
	})
	t.Run("first failure kept for Err and Close", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := NewLater(t.Context(), zap.NewNop())
			boom := errors.New("insert failed")
			l.Go(func(context.Context) error { return boom })
			synctest.Wait() // the failing work returned and was recorded
			l.Go(func(context.Context) error { return errors.New("later failure") })
			if err := l.Close(t.Context()); !errors.Is(err, boom) {
				t.Errorf("Close = %v, want the first failure", err)
			}
			if !errors.Is(l.Err(), boom) {
				t.Errorf("Err = %v, want the first failure", l.Err())
			}
		})
	})
	t.Run("Close gives up at its deadline and cancels", func(t *testing.T) {
		l := NewLater(t.Context(), zap.NewNop())
		l.Go(func(ctx context.Context) error {
			<-ctx.Done() // blocked until cancelled
			return ctx.Err()
		})
		closing, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := l.Close(closing); err != nil {
			t.Errorf("Close = %v; the cancellation it caused is no failure", err)
		}
	})
}
