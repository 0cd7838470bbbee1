package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestDoublesToTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New(100*time.Millisecond, time.Second)
		var waits []time.Duration
		for range 6 {
			start := time.Now()
			if err := b.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			waits = append(waits, time.Since(start))
		}
		want := []time.Duration{100, 200, 400, 800, 1000, 1000}
		for i, w := range want {
			if waits[i] != w*time.Millisecond {
				t.Fatalf("waits %v, want %v ms", waits, want)
			}
		}
	})
}

func TestJitteredStaysWithinHalfAndAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := Jittered(100*time.Millisecond, 400*time.Millisecond)
		for i, base := range []time.Duration{100, 200, 400, 400, 400} {
			base *= time.Millisecond
			if b.Next() != base {
				t.Fatalf("wait %d: Next %v, want %v", i, b.Next(), base)
			}
			start := time.Now()
			if err := b.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < base/2 || d > base {
				t.Fatalf("wait %d: slept %v, want within [%v, %v]", i, d, base/2, base)
			}
		}
	})
}

func TestWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := New(time.Hour, time.Hour).Wait(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 50*time.Millisecond {
			t.Fatalf("Wait = %v after %v, want the deadline after 50ms", err, time.Since(start))
		}
	})
}

func TestCapBelowFirst(t *testing.T) {
	if b := New(time.Second, time.Millisecond); b.max != time.Second {
		t.Fatalf("cap %v, want the first wait", b.max)
	}
}
