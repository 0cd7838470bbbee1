package kafkaio

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// TestLeaseGuardLapsesAndHolds: the requests' context is cancelled and no
// request may start once the lease's expiry is past; a renewed lease gives
// a new live context; a lapse is counted once however long it lasts.
// Without a lease, requests run under the run context alone.
func TestLeaseGuardLapsesAndHolds(t *testing.T) {
	lapses := prometheus.NewCounter(prometheus.CounterOpts{Name: "lapses_total", Help: "lapses"})
	g := NewLeaseGuard(zaptest.NewLogger(t), lapses)
	g.Watch(t.Context(), nil)
	defer g.Wait()

	first, ok := g.RequestContext()
	if !ok || first.Err() != nil {
		t.Fatalf("before any check: ok %v, context error %v; want a live context", ok, first.Err())
	}
	g.check(t.Context(), time.Time{})
	if ctx, ok := g.RequestContext(); !ok || ctx != first {
		t.Fatalf("a lease never renewed (zero expiry): ok %v, same context %v; want the same live context", ok, ctx == first)
	}

	for range 2 {
		g.check(t.Context(), time.Now().Add(-time.Second))
	}
	if _, ok := g.RequestContext(); ok {
		t.Error("lease expired: a request may start")
	}
	if first.Err() == nil {
		t.Error("lease expired: the requests' context is not cancelled")
	}
	if n := testutil.ToFloat64(lapses); n != 1 {
		t.Errorf("lapses counted: %v, want 1", n)
	}

	g.check(t.Context(), time.Now().Add(time.Hour))
	renewed, ok := g.RequestContext()
	if !ok || renewed.Err() != nil || renewed == first {
		t.Errorf("lease renewed: ok %v, context error %v, new context %v; want a new live context", ok, renewed.Err(), renewed != first)
	}
}

// TestLeaseGuardWatches: the guard follows its lease every LeaseCheck,
// lapsing at the first check past the expiry and holding again at the
// first check after the renewal, and its goroutine ends with the run
// context.
func TestLeaseGuardWatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lease := &fixedLease{}
		lease.expiry.Store(time.Now().Add(time.Second).UnixNano())
		g := NewLeaseGuard(zaptest.NewLogger(t), prometheus.NewCounter(prometheus.CounterOpts{Name: "lapses_total", Help: "lapses"}))
		runCtx, stop := context.WithCancel(t.Context())
		g.Watch(runCtx, lease)

		<-time.After(time.Second - LeaseCheck/2)
		if _, ok := g.RequestContext(); !ok {
			t.Fatal("lease before its expiry: no request may start")
		}
		<-time.After(2 * LeaseCheck) // a check strictly after the expiry
		ctx, ok := g.RequestContext()
		if ok || ctx.Err() == nil {
			t.Fatalf("a check after the expiry: ok %v, context error %v; want lapsed and cancelled", ok, ctx.Err())
		}
		lease.expiry.Store(time.Now().Add(time.Minute).UnixNano())
		<-time.After(LeaseCheck)
		if ctx, ok := g.RequestContext(); !ok || ctx.Err() != nil {
			t.Fatalf("a check after the renewal: ok %v, context error %v; want a live context", ok, ctx.Err())
		}

		stop()
		g.Wait()
	})
}

// fixedLease is a Lease whose expiry the test sets.
type fixedLease struct{ expiry atomic.Int64 }

func (l *fixedLease) Expiry() time.Time { return time.Unix(0, l.expiry.Load()) }
