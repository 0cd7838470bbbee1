// Package proxies keeps the live set of forward proxies published by the
// proxy pool on the compacted proxies topic, and picks one per host, sticky
// by rendezvous hashing: a host keeps its proxy while that proxy lives, and
// when a proxy leaves only its hosts move.
//
// Proxy URLs may carry credentials: they are never logged; log the id.
package proxies

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"sync"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

type proxy struct {
	id   string
	url  *url.URL
	addr string // host:port dialed
}

// Pool is the live proxy set. Safe for concurrent use; the zero value is
// not usable, call NewPool.
type Pool struct {
	mu      sync.RWMutex
	byID    map[string]proxy
	byAddr  map[string]int // dial address → number of proxies using it
	version uint64
}

// NewPool returns an empty pool.
func NewPool() *Pool {
	return &Pool{byID: make(map[string]proxy), byAddr: make(map[string]int)}
}

// Put adds or replaces proxy id. rawURL is scheme://[user:pass@]host:port
// with scheme http, https or socks5; errors never include the URL.
func (p *Pool) Put(id, rawURL string) error {
	if id == "" {
		return fmt.Errorf("put proxy: empty id")
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("put proxy %s: unparseable url", id)
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return fmt.Errorf("put proxy %s: unsupported scheme %q", id, u.Scheme)
	}
	addr := u.Host
	if u.Port() == "" {
		port := "80"
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		}
		addr = net.JoinHostPort(u.Hostname(), port)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(id)
	p.byID[id] = proxy{id: id, url: u, addr: addr}
	p.byAddr[addr]++
	p.version++
	return nil
}

// Remove deletes proxy id (a tombstone).
func (p *Pool) Remove(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(id)
}

func (p *Pool) removeLocked(id string) {
	old, ok := p.byID[id]
	if !ok {
		return
	}
	delete(p.byID, id)
	if p.byAddr[old.addr]--; p.byAddr[old.addr] <= 0 {
		delete(p.byAddr, old.addr)
	}
	p.version++
}

// Len returns the number of live proxies.
func (p *Pool) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.byID)
}

// Pick returns the proxy for host by rendezvous (highest random weight)
// hashing over the live ids; ok is false when the pool is empty.
func (p *Pool) Pick(host string) (id string, proxyURL *url.URL, ok bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var (
		best      proxy
		bestScore uint64
	)
	for _, px := range p.byID {
		s := score(px.id, host)
		if !ok || s > bestScore || (s == bestScore && px.id < best.id) {
			best, bestScore, ok = px, s, true
		}
	}
	if !ok {
		return "", nil, false
	}
	u := *best.url // a copy: callers must not mutate the pool's URL
	return best.id, &u, true
}

// IsProxyAddr reports whether addr (host:port) is a live proxy's address.
func (p *Pool) IsProxyAddr(addr string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.byAddr[addr] > 0
}

// score hashes (id, host) to a well-mixed 64-bit weight.
func score(id, host string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(host))
	x := h.Sum64()
	// splitmix64 finalizer: FNV's low-entropy high bits mix poorly alone.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Apply applies one record of the proxies topic: a tombstone (nil value)
// removes the proxy keyed by the record key, otherwise the Proxy is put.
func (p *Pool) Apply(msg kafka.Message) error {
	if msg.Value == nil {
		p.Remove(string(msg.Key))
		return nil
	}
	var px crawlv1.Proxy
	if err := kafkaio.Decode(msg, &px); err != nil {
		return fmt.Errorf("decode proxy: %w", err)
	}
	id := px.GetId()
	if id == "" {
		id = string(msg.Key)
	}
	return p.Put(id, px.GetUrl())
}

// Follow keeps p in sync with the proxies topic until ctx is done.
// Undecodable records are logged (without the URL) and skipped.
func Follow(ctx context.Context, c kafkaio.Config, topic string, p *Pool, log *zap.Logger) error {
	err := kafkaio.Follow(ctx, c, topic, func(msg kafka.Message) {
		if err := p.Apply(msg); err != nil {
			log.Warn("skipped proxy record",
				zap.String("proxy_id", string(msg.Key)),
				zap.Int("partition", msg.Partition), zap.Int64("offset", msg.Offset), zap.Error(err))
		}
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("follow proxies: %w", err)
	}
	return nil
}
