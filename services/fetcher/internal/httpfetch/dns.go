package httpfetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Defaults of the DNS cache.
const (
	DefaultDNSCacheTTL  = 5 * time.Minute
	DefaultDNSCacheSize = 10000
)

// LookupFunc resolves a host name (net.Resolver.LookupNetIP).
type LookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// dnsCache resolves each host name once per TTL. It is bounded: when full,
// expired entries are dropped, then arbitrary ones. Failures are not
// cached. Safe for concurrent use.
type dnsCache struct {
	lookup LookupFunc
	ttl    time.Duration
	size   int
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]dnsEntry
}

type dnsEntry struct {
	addrs   []netip.Addr
	expires time.Time
}

func newDNSCache(lookup LookupFunc, ttl time.Duration, size int) *dnsCache {
	return &dnsCache{lookup: lookup, ttl: ttl, size: size, now: time.Now, entries: make(map[string]dnsEntry)}
}

// resolve returns the addresses of host, from the cache while fresh.
func (c *dnsCache) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[host]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.addrs, nil
	}
	addrs, err := c.lookup(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", host, errNoAddresses)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.size {
		c.evict(now)
	}
	c.entries[host] = dnsEntry{addrs: addrs, expires: now.Add(c.ttl)}
	return addrs, nil
}

// evict makes room: expired entries first, else about a tenth of the
// cache (arbitrary entries, map order). Called with mu held.
func (c *dnsCache) evict(now time.Time) {
	for h, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, h)
		}
	}
	for h := range c.entries {
		if len(c.entries) < c.size-c.size/10 {
			break
		}
		delete(c.entries, h)
	}
}

var errNoAddresses = errors.New("no addresses")

// dialCached dials addr through the cache: a host name is resolved by the
// cache and its addresses are tried in turn with d, whose Control (the
// private-address check) runs on each of them.
func (c *dnsCache) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("split %q: %w", addr, err)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return d.DialContext(ctx, network, addr)
	}
	addrs, err := c.resolve(ctx, host)
	if err != nil {
		if de := (*net.DNSError)(nil); !errors.As(err, &de) {
			err = &net.DNSError{Err: err.Error(), Name: host}
		}
		return nil, err
	}
	var errs []error
	for _, ip := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
