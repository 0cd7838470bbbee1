// Package proxytest starts real HTTP forward proxies on loopback addresses
// for tests of the fetcher and the proxy pool: absolute-form GET requests
// and CONNECT tunnels, optional basic proxy credentials, and fault modes
// (dead, slow, wrong content).
package proxytest

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Mode selects how a proxy behaves.
type Mode int

// The modes.
const (
	Healthy      Mode = iota // forwards requests faithfully
	Slow                     // forwards after Options.Delay
	WrongContent             // answers 200 with a body of its own instead of forwarding
)

// WrongBody is the body a WrongContent proxy answers with. Through a tunnel
// (CONNECT or SOCKS5) the proxy answers the tunnel's first bytes with an
// HTTP response carrying it, so a TLS handshake through it fails.
const WrongBody = "proxytest: wrong content"

// Options configures a proxy.
type Options struct {
	Mode     Mode
	Delay    time.Duration // for Slow
	Username string        // when set, requires Proxy-Authorization basic credentials
	Password string
	// Leak adds headers to forwarded plain-HTTP requests (not tunnels):
	// LeakVia adds "Via: 1.1 proxytest" (an anonymous proxy), LeakClient
	// also adds X-Forwarded-For with the client's address (a transparent
	// proxy). The zero value forwards without them (an elite proxy).
	Leak Leak
}

// Leak is what a proxy reveals in forwarded requests.
type Leak int

// The leaks, from none to all.
const (
	LeakNone   Leak = iota // elite: nothing added
	LeakVia                // anonymous: Via
	LeakClient             // transparent: Via and X-Forwarded-For
)

// wrongResponse is what a WrongContent tunnel answers with: a well-formed
// HTTP response for a plain-HTTP client, garbage for a TLS handshake.
var wrongResponse = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: " +
	strconv.Itoa(len(WrongBody)) + "\r\n\r\n" + WrongBody

// dialTimeout bounds how long the proxy waits to reach an upstream.
const dialTimeout = 5 * time.Second

// Proxy is a running forward proxy.
type Proxy struct {
	scheme    string // http or socks5
	opts      Options
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	requests  atomic.Int64

	done      chan struct{} // closed by Close: wakes Slow handlers
	closeOnce sync.Once
	handlers  sync.WaitGroup // handler and tunnel goroutines

	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{} // hijacked client conns and their upstream conns
}

// Start starts a proxy listening on ip (e.g. "127.0.0.5") at a free port;
// it is closed at test cleanup.
func Start(t testing.TB, ip string, o Options) *Proxy {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("proxytest: listen on %s: %v", ip, err)
	}
	p := &Proxy{
		scheme: "http",
		opts:   o,
		ln:     ln,
		transport: &http.Transport{
			Proxy:              nil, // never the environment's proxy
			DialContext:        (&net.Dialer{Timeout: dialTimeout}).DialContext,
			DisableCompression: true, // pass Accept-Encoding and bodies through untouched
			ForceAttemptHTTP2:  false,
			MaxIdleConns:       16,
			IdleConnTimeout:    10 * time.Second,
		},
		done:    make(chan struct{}),
		tunnels: make(map[net.Conn]struct{}),
	}
	p.srv = &http.Server{
		Handler:           http.HandlerFunc(p.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	p.handlers.Add(1)
	go func() {
		defer p.handlers.Done()
		_ = p.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	t.Cleanup(p.Close)
	return p
}

// URL returns the proxy URL, with credentials when configured
// (http://user:pass@127.0.0.5:port).
func (p *Proxy) URL() string {
	u := url.URL{Scheme: p.scheme, Host: p.Addr()}
	if p.opts.Username != "" {
		u.User = url.UserPassword(p.opts.Username, p.opts.Password)
	}
	return u.String()
}

// Addr returns host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Requests returns how many requests (GET or CONNECT) it has served: every
// request it answered, including 407 answers to missing credentials.
func (p *Proxy) Requests() int { return int(p.requests.Load()) }

// Close stops the proxy (a "dead" proxy: connections are refused after). It
// closes open tunnels and waits for every handler to return. Safe to call
// more than once.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		close(p.done)
		p.mu.Lock()
		p.closed = true
		for c := range p.tunnels {
			_ = c.Close()
		}
		p.mu.Unlock()
		if p.srv != nil {
			_ = p.srv.Close() // closes the listener and every non-hijacked conn
		} else {
			_ = p.ln.Close()
		}
		p.handlers.Wait()
		if p.transport != nil {
			p.transport.CloseIdleConnections()
		}
	})
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	if !p.enter() {
		http.Error(w, "proxytest: closed", http.StatusServiceUnavailable)
		return
	}
	defer p.handlers.Done()
	p.requests.Add(1)

	if !p.authorized(r) {
		w.Header().Set("Proxy-Authenticate", `Basic realm="proxytest"`)
		http.Error(w, "proxytest: proxy authentication required", http.StatusProxyAuthRequired)
		return
	}
	if p.opts.Mode == Slow && !p.sleep(r.Context(), p.opts.Delay) {
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "proxytest: request target must be absolute-form", http.StatusBadRequest)
		return
	}
	if p.opts.Mode == WrongContent {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, WrongBody)
		return
	}
	p.forward(w, r)
}

// authorized reports whether r carries the configured basic credentials.
func (p *Proxy) authorized(r *http.Request) bool {
	if p.opts.Username == "" {
		return true
	}
	h := r.Header.Get("Proxy-Authorization")
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h[len(prefix):]))
	if err != nil {
		return false
	}
	want := p.opts.Username + ":" + p.opts.Password
	return subtle.ConstantTimeCompare(raw, []byte(want)) == 1
}

// sleep waits d and reports false when the request or the proxy ended first.
func (p *Proxy) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-p.done:
		return false
	}
}

// hopHeaders are the hop-by-hop headers a proxy must not forward (RFC 9110
// section 7.6.1), plus the proxy-specific ones.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

func stripHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// forward sends the absolute-form request r upstream and copies the answer.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = false
	stripHopHeaders(out.Header)
	if p.opts.Leak >= LeakVia {
		out.Header.Add("Via", "1.1 proxytest")
	}
	if p.opts.Leak >= LeakClient {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			out.Header.Add("X-Forwarded-For", host)
		}
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "proxytest: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	stripHopHeaders(resp.Header)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body) // a broken client or upstream just ends the response
}

// tunnel answers CONNECT host:port by dialing it and splicing bytes both ways.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	var upstream net.Conn
	if p.opts.Mode != WrongContent {
		var err error
		d := net.Dialer{Timeout: dialTimeout}
		upstream, err = d.DialContext(r.Context(), "tcp", r.Host)
		if err != nil {
			http.Error(w, "proxytest: dial upstream: "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		closeConn(upstream)
		http.Error(w, "proxytest: hijacking not supported", http.StatusInternalServerError)
		return
	}
	client, brw, err := hj.Hijack()
	if err != nil {
		closeConn(upstream)
		return
	}
	if !p.track(client, upstream) {
		return // Close ran meanwhile; track closed both
	}
	defer p.untrack(client, upstream)

	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if upstream == nil { // WrongContent: an answer of its own instead of the upstream's bytes
		answerWrong(client, brw.Reader)
		return
	}
	splice(client, brw.Reader, upstream)
}

// answerWrong waits for the client's first request through a tunnel (an
// HTTP request head, or the first bytes of a TLS handshake) and answers
// with wrongResponse; answering earlier would be an unsolicited response.
func answerWrong(c net.Conn, br *bufio.Reader) {
	_ = c.SetReadDeadline(time.Now().Add(dialTimeout))
	first, err := br.Peek(1)
	if err != nil {
		return
	}
	if first[0] != 0x16 { // not a TLS handshake record: read the request head
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" || line == "\n" {
				break
			}
		}
	}
	_, _ = io.WriteString(c, wrongResponse)
}

// splice copies bytes both ways until either side ends, then returns; the
// caller closes both conns.
func splice(client net.Conn, clientReader *bufio.Reader, upstream net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(upstream, clientReader) // includes bytes already buffered
		closeWrite(upstream)
	}()
	_, _ = io.Copy(client, upstream)
	closeWrite(client)
	// The upstream finished sending; unblock the client->upstream copy if
	// the client keeps the connection open.
	_ = upstream.SetReadDeadline(time.Now())
	_ = client.SetReadDeadline(time.Now())
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

func closeConn(c net.Conn) {
	if c != nil {
		_ = c.Close()
	}
}

// enter registers a running handler; it reports false once Close began, so
// Close's Wait never races with a new Add.
func (p *Proxy) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.handlers.Add(1)
	return true
}

// track registers the tunnel conns so Close can end them; it reports false
// (after closing them) when the proxy is already closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			closeConn(c)
		}
		return false
	}
	for _, c := range conns {
		if c != nil {
			p.tunnels[c] = struct{}{}
		}
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			delete(p.tunnels, c)
			_ = c.Close()
		}
	}
}
