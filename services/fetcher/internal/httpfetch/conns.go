package httpfetch

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// conns keeps the direct connections the fetcher dialed, by the address
// they were dialed to (host:port), so that the connection of a host the
// crawl has no request of left can be closed (Fetcher.Release) instead of
// waiting out IdleConnTimeout. Connections to proxies are not kept: a proxy
// carries many hosts. Safe for concurrent use.
type conns struct {
	mu     sync.Mutex
	byAddr map[string][]*keptConn
}

// keptConn is a dialed connection that leaves conns when it is closed,
// whoever closes it.
//
// A connection closed while a request it sent is unanswered (a fetch
// cancelled or timed out) is reset rather than closed: the kernel drops
// what it had not delivered yet. Closed gracefully, it would keep sending
// it, and a request held up in a cut link would reach the site whenever
// the link came back, maybe after another fetcher's request of the same
// host (see the fetcher's lease). Answered connections close as usual.
type keptConn struct {
	net.Conn
	set      *conns
	addr     string
	once     sync.Once
	awaiting atomic.Bool  // written to since the last read
	written  atomic.Int64 // bytes written (replayGuard)
}

// Write marks c awaiting an answer before it writes: the answer can be
// read before Write returns.
func (c *keptConn) Write(b []byte) (int, error) {
	if len(b) > 0 {
		c.awaiting.Store(true)
	}
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

func (c *keptConn) bytesWritten() int64 { return c.written.Load() }

// countedConn counts the bytes written to a connection that is not kept
// (one to a proxy), for replayGuard.
type countedConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written.Add(int64(n))
	return n, err
}

func (c *countedConn) bytesWritten() int64 { return c.written.Load() }

func (c *keptConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.awaiting.Store(false)
	}
	return n, err
}

func (c *keptConn) Close() error {
	c.once.Do(func() { c.set.remove(c) })
	if tc, ok := c.Conn.(*net.TCPConn); ok && c.awaiting.Load() {
		_ = tc.SetLinger(0) // best effort: the close below still happens
	}
	return c.Conn.Close()
}

// keep wraps c, dialed to addr.
func (s *conns) keep(addr string, c net.Conn) net.Conn {
	k := &keptConn{Conn: c, set: s, addr: addr}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byAddr == nil {
		s.byAddr = make(map[string][]*keptConn)
	}
	s.byAddr[addr] = append(s.byAddr[addr], k)
	return k
}

func (s *conns) remove(c *keptConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.byAddr[c.addr]
	for i, k := range list {
		if k == c {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.byAddr, c.addr)
	} else {
		s.byAddr[c.addr] = list
	}
}

// take removes and returns the connections dialed to any of addrs.
func (s *conns) take(addrs ...string) []*keptConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*keptConn
	for _, a := range addrs {
		out = append(out, s.byAddr[a]...)
		delete(s.byAddr, a)
	}
	return out
}

// len returns the connections kept.
func (s *conns) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.byAddr {
		n += len(l)
	}
	return n
}

// Release closes the connections to host (a politeness key, host[:port])
// that the fetcher keeps for reuse. Call it when the crawl holds no request
// of host: the next request dials again, and until then the connection
// costs neither the fetcher's memory nor the site's. It must not be called
// while a request to host is in flight or can begin: the fetcher calls it
// under politeness.Engine.WhenIdle, which holds the host's turns off.
func (f *Fetcher) Release(host string) {
	addrs := []string{host}
	if _, _, err := net.SplitHostPort(host); err != nil {
		// No port in the key: the default ports of both schemes.
		h := strings.Trim(host, "[]")
		addrs = []string{net.JoinHostPort(h, "80"), net.JoinHostPort(h, "443")}
	}
	for _, c := range f.conns.take(addrs...) {
		_ = c.Close() // an idle connection: nothing to lose
	}
}
