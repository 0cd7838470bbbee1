package backpressure

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestValve: open, Wait returns at once; paused, it blocks until Resume
// (every waiter) or its context ends; Pause and Resume twice are the same
// as once.
func TestValve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var v Valve
		if err := v.Wait(t.Context()); err != nil {
			t.Fatalf("open valve: %v", err)
		}
		v.Pause()
		v.Pause()
		done := make(chan error, 2)
		for range 2 {
			go func() { done <- v.Wait(t.Context()) }()
		}
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a paused valve let a waiter through (%v)", err)
		default:
		}
		v.Resume()
		v.Resume()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("resumed: %v", err)
			}
		}
		v.Pause()
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if err := v.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("paused valve, context ended: %v, want the context's error", err)
		}
	})
}
