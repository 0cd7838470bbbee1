package politeness

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	clock := at(0)
	g := NewGate(func() time.Time { return clock }, 100*time.Millisecond)

	if ok, _ := g.Acquire("10.0.0.1"); !ok {
		t.Fatal("first claim of a server refused")
	}
	// busy: the retry is one gap away at least (the request ends no
	// earlier than now)
	clock = at(30)
	if ok, retry := g.Acquire("10.0.0.1"); ok || !retry.Equal(at(130)) {
		t.Errorf("claim of a busy server: ok=%v retry=%v, want false at 130ms", ok, retry.Sub(t0))
	}
	// another server is independent
	if ok, _ := g.Acquire("10.0.0.2"); !ok {
		t.Error("claim of an idle second server refused")
	}
	g.Done("10.0.0.1", at(50))
	clock = at(149)
	if ok, retry := g.Acquire("10.0.0.1"); ok || !retry.Equal(at(150)) {
		t.Errorf("claim within the gap: ok=%v retry=%v, want false at 150ms", ok, retry.Sub(t0))
	}
	clock = at(150)
	if ok, _ := g.Acquire("10.0.0.1"); !ok {
		t.Error("claim after the gap refused")
	}
	// a claim released without a request leaves the next-allowed time
	g.Release("10.0.0.1")
	if ok, _ := g.Acquire("10.0.0.1"); !ok {
		t.Error("claim after a release refused")
	}
	g.Done("10.0.0.1", at(200))
	// an earlier Done (an out-of-order report) never moves the time back
	g.Done("10.0.0.1", at(100))
	clock = at(299)
	if ok, _ := g.Acquire("10.0.0.1"); ok {
		t.Error("claim at 299ms after a request ended at 200ms")
	}
}

func TestGateForgetsIdleServers(t *testing.T) {
	clock := at(0)
	g := NewGate(func() time.Time { return clock }, 10*time.Millisecond)
	for i := range 10000 {
		key := fmt.Sprintf("server-%d", i)
		if ok, _ := g.Acquire(key); !ok {
			t.Fatalf("claim of new server %s refused", key)
		}
		g.Done(key, clock)
		clock = clock.Add(time.Millisecond)
	}
	// only servers within their 10ms gap matter; sweeping keeps the map
	// within twice those plus the minimum
	if n := g.Len(); n > 2*minSweep {
		t.Errorf("gate remembers %d servers after 10000 short-lived ones", n)
	}
	// a server within its gap is not forgotten
	if ok, _ := g.Acquire("server-9999"); ok {
		t.Error("server within its gap was forgotten")
	}
}

func TestServerKey(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:bbbb::99", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
	}
	for _, tt := range tests {
		if got := ServerKey(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("ServerKey(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}

func TestRequeue(t *testing.T) {
	clock := at(0)
	e := New[string](func() time.Time { return clock }, Options{Delay: 100 * time.Millisecond})
	e.Push("a", "a1", time.Time{})
	e.Push("a", "a2", time.Time{})
	clock = at(100)
	host, item, ok := e.Next(clock)
	if !ok || host != "a" || item != "a1" {
		t.Fatalf("Next = %s %s %v, want a a1", host, item, ok)
	}
	// a1 waits for its server until 250ms; it stays first, and the
	// host's own clock is untouched (no request was made)
	e.Requeue("a", item, at(250))
	if wake, ok := e.NextWakeup(); !ok || !wake.Equal(at(250)) {
		t.Errorf("wakeup %v %v, want 250ms", wake.Sub(t0), ok)
	}
	if _, _, ok := e.Next(at(249)); ok {
		t.Error("requeued item started before its not-before")
	}
	if _, item, ok := e.Next(at(250)); !ok || item != "a1" {
		t.Errorf("Next at 250ms = %s %v, want a1", item, ok)
	}
	if e.Len() != 1 {
		t.Errorf("Len = %d, want 1 (a2)", e.Len())
	}
}

// TestGateClaim: hosts that resolve to one address share its server; an
// IPv6 /64 is one server; a host that does not resolve, and a nil gate,
// claim nothing and go ahead.
func TestGateClaim(t *testing.T) {
	clock := at(0)
	g := NewGate(func() time.Time { return clock }, 100*time.Millisecond)
	addrs := map[string]string{"a.test": "10.0.0.1", "b.test": "10.0.0.1", "c.test": "10.0.0.2",
		"v6a.test": "2001:db8::1", "v6b.test": "2001:db8::2"}
	resolve := func(_ context.Context, host string) (netip.Addr, error) {
		a, ok := addrs[host]
		if !ok {
			return netip.Addr{}, errors.New("no such host")
		}
		return netip.ParseAddr(a)
	}
	ctx := t.Context()
	key, _, ok := g.Claim(ctx, resolve, "a.test")
	if !ok || key != "10.0.0.1" {
		t.Fatalf("first claim: key %q ok %v", key, ok)
	}
	if k, retry, ok := g.Claim(ctx, resolve, "b.test"); ok || k != "" || !retry.Equal(at(100)) {
		t.Errorf("claim of a.test's server through b.test: key %q ok %v retry %v, want refused until 100ms", k, ok, retry.Sub(t0))
	}
	if _, _, ok := g.Claim(ctx, resolve, "c.test"); !ok {
		t.Error("claim of another server refused")
	}
	if k, _, ok := g.Claim(ctx, resolve, "v6a.test"); !ok || k != "2001:db8::/64" {
		t.Errorf("v6a.test: key %q ok %v, want its /64", k, ok)
	}
	if _, _, ok := g.Claim(ctx, resolve, "v6b.test"); ok {
		t.Error("a second address of the same /64 claimed while the first is busy")
	}
	if k, _, ok := g.Claim(ctx, resolve, "unresolvable.test"); !ok || k != "" {
		t.Errorf("unresolvable host: key %q ok %v, want nothing claimed and ok", k, ok)
	}
	g.Done(key, at(10))
	g.Done("", at(10)) // nothing claimed: nothing to end
	clock = at(110)
	if _, _, ok := g.Claim(ctx, resolve, "b.test"); !ok {
		t.Error("claim after the gap refused")
	}
	var none *Gate
	if k, _, ok := none.Claim(ctx, resolve, "a.test"); !ok || k != "" {
		t.Errorf("nil gate: key %q ok %v", k, ok)
	}
	none.Done("10.0.0.1", clock) // hosts independent: nothing to end
}
