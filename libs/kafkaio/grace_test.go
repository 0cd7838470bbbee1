package kafkaio

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

type graceKey struct{}

// TestGrace: the context lives on for its grace after its parent ended,
// with the parent's values, then ends; cancel ends it at once, and a
// parent that never ends leaves it alive.
func TestGrace(t *testing.T) {
	t.Run("ends its grace after the parent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, revoke := context.WithCancel(context.WithValue(t.Context(), graceKey{}, "v"))
			ctx, cancel := Grace(parent, 2*time.Second)
			defer cancel()
			if ctx.Value(graceKey{}) != "v" {
				t.Errorf("value not kept: %v", ctx.Value(graceKey{}))
			}
			revoke()
			<-time.After(time.Second + 999*time.Millisecond) // the bubble's clock
			synctest.Wait()
			if err := ctx.Err(); err != nil {
				t.Fatalf("ended %v into a 2s grace: %v", time.Second+999*time.Millisecond, err)
			}
			<-time.After(time.Millisecond) // the bubble's clock
			synctest.Wait()
			if ctx.Err() == nil {
				t.Fatal("still alive after its grace")
			}
		})
	})
	t.Run("cancel ends it at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			parent, revoke := context.WithCancel(t.Context())
			defer revoke()
			ctx, cancel := Grace(parent, time.Hour)
			cancel()
			if ctx.Err() == nil {
				t.Fatal("alive after cancel")
			}
			revoke()
			synctest.Wait() // no timer left behind: synctest fails on a leaked goroutine
		})
	})
	t.Run("a live parent keeps it alive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := Grace(t.Context(), time.Second)
			defer cancel()
			<-time.After(time.Hour) // the bubble's clock
			if ctx.Err() != nil {
				t.Fatal("ended while its parent lives")
			}
		})
	})
}
