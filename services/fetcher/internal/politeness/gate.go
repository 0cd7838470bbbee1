package politeness

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// Gate spaces the requests to a shared server: the hosts whose names
// resolve to one address are many queues of the engines but one machine, so
// a shared-hosting server with a thousand virtual hosts must not get a
// thousand requests per delay. A Gate lets one request at a time reach a
// server, and the next one start no earlier than gap after the previous
// one ended, whatever host and whatever partition of this fetcher it comes
// from.
//
// Unlike an Engine, a Gate is shared by every partition of a process, and
// it is never waited on: Acquire answers at once, and a request whose
// server is busy goes back to its host's queue until RetryAt (Engine.
// Requeue), holding no worker. It is safe for concurrent use.
type Gate struct {
	mu      sync.Mutex
	now     func() time.Time
	gap     time.Duration
	servers map[string]*server
	sweepAt int
}

type server struct {
	active bool
	next   time.Time // earliest start of the next request
}

// NewGate returns a gate with gap between the end of one request to a
// server and the start of the next.
func NewGate(now func() time.Time, gap time.Duration) *Gate {
	return &Gate{now: now, gap: gap, servers: make(map[string]*server), sweepAt: minSweep}
}

// ServerKey returns the server an address stands for: an IPv4 address
// itself, an IPv6 address's /64 (hosting providers give each virtual host
// its own address within one /64).
func ServerKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil { // an invalid Addr: its own server
		return a.String()
	}
	return p.String()
}

// Claim claims, for a request to host starting now, the server host
// resolves to (through resolve, httpfetch.Fetcher.Resolve: its first
// address, ServerKey) and returns the server's key for Done. A nil Gate
// (hosts independent), or a host that does not resolve (its request fails
// on the same error), claims nothing: key "" and ok. When the server is
// busy, ok is false and retryAt is the earliest time a claim may succeed.
func (g *Gate) Claim(ctx context.Context, resolve func(context.Context, string) (netip.Addr, error), host string) (key string, retryAt time.Time, ok bool) {
	if g == nil {
		return "", time.Time{}, true
	}
	addr, err := resolve(ctx, host)
	if err != nil {
		return "", time.Time{}, true
	}
	key = ServerKey(addr)
	if ok, retryAt = g.Acquire(key); !ok {
		return "", retryAt, false
	}
	return key, retryAt, true
}

// Acquire claims key's server for a request starting now. When the server
// has a request in flight or its gap has not passed, ok is false and
// retryAt is the earliest time a claim may succeed.
func (g *Gate) Acquire(key string) (ok bool, retryAt time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	s, known := g.servers[key]
	if !known {
		if len(g.servers) >= g.sweepAt {
			g.sweep(now)
		}
		s = &server{}
		g.servers[key] = s
	}
	switch {
	case s.active:
		// the request in flight ends no earlier than now
		return false, maxTime(s.next, now.Add(g.gap))
	case s.next.After(now):
		return false, s.next
	}
	s.active = true
	return true, now
}

// Done ends the request to key's server at end: the next may start at end
// plus the gap. A nil Gate and key "" (Claim claimed nothing) do nothing.
func (g *Gate) Done(key string, end time.Time) {
	if g == nil || key == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.servers[key]; ok {
		s.active = false
		s.next = maxTime(s.next, end.Add(g.gap))
	}
}

// Release ends a claim on key's server that made no request: its
// next-allowed time is unchanged.
func (g *Gate) Release(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.servers[key]; ok {
		s.active = false
	}
}

// Len returns the number of servers the gate remembers.
func (g *Gate) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.servers)
}

// sweep forgets idle servers past their gap, which carry nothing; run when
// the map doubled, it keeps memory within twice the servers that matter
// at amortized O(1) per call.
func (g *Gate) sweep(now time.Time) {
	for key, s := range g.servers {
		if !s.active && !s.next.After(now) {
			delete(g.servers, key)
		}
	}
	g.sweepAt = max(minSweep, 2*len(g.servers))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
