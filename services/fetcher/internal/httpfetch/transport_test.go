package httpfetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// TestFetchConnectionReuse fetches twice from one host over HTTP/1.1 and
// over TLS with HTTP/2 offered: the answers must use the expected protocol
// (HTTP/2 where the server offers it) and both requests one connection.
func TestFetchConnectionReuse(t *testing.T) {
	tests := []struct {
		name      string
		ip        string
		tls       bool
		wantProto int
	}{
		{"http/1.1 keep-alive", "127.0.0.71", false, 1},
		{"https offering http/2", "127.0.0.72", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var protos []int
			srv := unstartedOn(t, tt.ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				protos = append(protos, r.ProtoMajor)
				mu.Unlock()
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprint(w, "<p>hello</p>")
			}))
			conns := countConns(srv)
			o := Options{AllowPrivate: true}
			base := ""
			if tt.tls {
				srv.EnableHTTP2 = true
				srv.StartTLS()
				o.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
				// the test certificate names example.com and 127.0.0.1:
				// the name resolves to this host's address
				o.Lookup = func(context.Context, string, string) ([]netip.Addr, error) {
					return []netip.Addr{netip.MustParseAddr(tt.ip)}, nil
				}
				base = fmt.Sprintf("https://example.com:%d", srv.Listener.Addr().(*net.TCPAddr).Port)
			} else {
				srv.Start()
				base = srv.URL
			}
			defer srv.Close()
			f := New(o)
			defer f.Close()
			for i := range 2 {
				res := f.Fetch(t.Context(), Request{URL: base + fmt.Sprintf("/p%d", i)})
				if res.Err != nil || res.Status != 200 {
					t.Fatalf("fetch %d: status %d err %v", i, res.Status, res.Err)
				}
				if res.ProtoMajor != tt.wantProto {
					t.Errorf("fetch %d: answer over HTTP/%d, want HTTP/%d", i, res.ProtoMajor, tt.wantProto)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for i, p := range protos {
				if p != tt.wantProto {
					t.Errorf("request %d reached the server over HTTP/%d, want HTTP/%d", i, p, tt.wantProto)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("%d connections for two requests, want 1", n)
			}
		})
	}
}

// TestFetchDNSCache resolves a name through a counting resolver: one
// lookup per TTL, and the private-address check applied to the cached
// addresses on every dial.
func TestFetchDNSCache(t *testing.T) {
	base := serve(t, "127.0.0.73", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close") // every fetch dials again
		fmt.Fprint(w, "ok")
	}))
	bu, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	named := "http://site.test:" + bu.Port() + "/"
	var lookups atomic.Int32
	lookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		if host != "site.test" {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.73")}, nil
	}
	tests := []struct {
		name        string
		allow       bool
		ttl         time.Duration
		advance     time.Duration // of the DNS cache's clock between the two fetches
		wantKind    failure.Kind
		wantLookups int32
	}{
		{"cached", true, time.Minute, 0, failure.None, 1},
		{"expired", true, 20 * time.Millisecond, 50 * time.Millisecond, failure.None, 2},
		{"cached private address refused", false, time.Minute, 0, failure.RefusedAddress, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookups.Store(0)
			f := New(Options{AllowPrivate: tt.allow, DNSCacheTTL: tt.ttl, Lookup: lookup})
			defer f.Close()
			start := time.Now()
			var elapsed atomic.Int64 // of the cache's clock
			f.dns.now = func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
			for i := range 2 {
				if i == 1 {
					elapsed.Add(int64(tt.advance))
				}
				res := f.Fetch(t.Context(), Request{URL: named})
				if res.Kind != tt.wantKind {
					t.Errorf("fetch %d: kind %q (status %d, err %v), want %q", i, res.Kind, res.Status, res.Err, tt.wantKind)
				}
			}
			if n := lookups.Load(); n != tt.wantLookups {
				t.Errorf("%d lookups, want %d", n, tt.wantLookups)
			}
		})
	}
	f := New(Options{AllowPrivate: true, Lookup: lookup})
	defer f.Close()
	if res := f.Fetch(t.Context(), Request{URL: "http://missing.test/"}); res.Kind != failure.DNS {
		t.Errorf("unknown name: kind %q (err %v), want dns", res.Kind, res.Err)
	}
}

// TestDNSCacheBounded checks the cache never holds more names than its size.
func TestDNSCacheBounded(t *testing.T) {
	const size = 10
	c := newDNSCache(func(context.Context, string, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
	}, time.Minute, size)
	for i := range 100 {
		if _, err := c.resolve(t.Context(), fmt.Sprintf("h%d.test", i)); err != nil {
			t.Fatal(err)
		}
		c.mu.Lock()
		n := len(c.entries)
		c.mu.Unlock()
		if n > size {
			t.Fatalf("%d entries after %d names, bound %d", n, i+1, size)
		}
	}
}

// TestCookieJarBounds checks the per-host cookie bound and the host bound
// of the jar.
func TestCookieJarBounds(t *testing.T) {
	const perHost, hosts = 3, 2
	jar := newBoundedJar(hosts, perHost)
	u := func(h string) *url.URL { return &url.URL{Scheme: "http", Host: h, Path: "/"} }
	var cs []*http.Cookie
	for i := range 5 {
		cs = append(cs, &http.Cookie{Name: fmt.Sprintf("c%d", i), Value: "v"})
	}
	jar.SetCookies(u("a.test"), cs)
	if got := len(jar.Cookies(u("a.test"))); got != perHost {
		t.Errorf("a.test: %d cookies kept of 5, want %d", got, perHost)
	}
	// an update of a known cookie applies; a deletion frees a slot
	jar.SetCookies(u("a.test"), []*http.Cookie{{Name: "c0", Value: "new"}, {Name: "c1", MaxAge: -1}})
	jar.SetCookies(u("a.test"), []*http.Cookie{{Name: "c9", Value: "v"}})
	got := map[string]string{}
	for _, c := range jar.Cookies(u("a.test")) {
		got[c.Name] = c.Value
	}
	if len(got) != perHost || got["c0"] != "new" || got["c9"] != "v" || got["c1"] != "" {
		t.Errorf("a.test cookies after update and delete: %v", got)
	}
	if n := len(jar.Cookies(u("b.test"))); n != 0 {
		t.Errorf("b.test sees %d cookies of a.test", n)
	}
	jar.SetCookies(u("b.test"), cs[:1])
	jar.SetCookies(u("c.test"), cs[:1]) // a.test is the least recently used: forgotten
	if n := jar.hostCount(); n != hosts {
		t.Errorf("%d hosts kept, bound %d", n, hosts)
	}
	if n := len(jar.Cookies(u("a.test"))); n != 0 {
		t.Errorf("evicted a.test still has %d cookies", n)
	}
	if n := len(jar.Cookies(u("c.test"))); n != 1 {
		t.Errorf("c.test: %d cookies, want 1", n)
	}
}

// TestFetchGzipSitemap checks that gzip bodies are kept as received when
// they are sitemaps (.xml.gz path, or named by robots.txt) and dropped
// like any binary body otherwise.
func TestFetchGzipSitemap(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	fmt.Fprint(zw, `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>http://a.test/</loc></url></urlset>`)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	base := serve(t, "127.0.0.74", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("ct") {
		case "none":
			w.Header()["Content-Type"] = nil // sniffed
		default:
			w.Header().Set("Content-Type", r.URL.Query().Get("ct"))
		}
		_, _ = w.Write(gz.Bytes())
	}))
	tests := []struct {
		name     string
		path     string
		sitemap  bool
		wantBody bool
	}{
		{"xml.gz x-gzip", "/sitemap.xml.gz?ct=application/x-gzip", false, true},
		{"xml.gz gzip", "/s/SITEMAP.XML.GZ?ct=application/gzip", false, true},
		{"xml.gz sniffed", "/sitemap.xml.gz?ct=none", false, true},
		{"named by robots.txt", "/sitemap?ct=application/gzip", true, true},
		{"other gzip file", "/archive.tar.gz?ct=application/x-gzip", false, false},
		{"sitemap of another type", "/sitemap.xml.gz?ct=application/zip", true, false},
	}
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.Fetch(t.Context(), Request{URL: base + tt.path, Sitemap: tt.sitemap})
			if res.Err != nil || res.Status != 200 {
				t.Fatalf("status %d err %v", res.Status, res.Err)
			}
			if got := res.Body != nil; got != tt.wantBody {
				t.Fatalf("body kept = %v, want %v (content type %q)", got, tt.wantBody, res.ContentType)
			}
			if tt.wantBody && !bytes.Equal(res.Body, gz.Bytes()) {
				t.Errorf("body changed: %d bytes, want the %d gzip bytes as received", len(res.Body), gz.Len())
			}
		})
	}
}

// TestResolve checks the address server grouping uses: IP literals as
// they are, names through the DNS cache (a fetch after Resolve looks
// nothing up again), failures as errors.
func TestResolve(t *testing.T) {
	var lookups atomic.Int32
	f := New(Options{AllowPrivate: true, Lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		if host != "site.test" {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.74"), netip.MustParseAddr("127.0.0.75")}, nil
	}})
	defer f.Close()
	ctx := t.Context()
	for host, want := range map[string]string{
		"192.0.2.1": "192.0.2.1", "192.0.2.1:8080": "192.0.2.1", "[2001:db8::1]": "2001:db8::1",
		"[2001:db8::1]:8080": "2001:db8::1", "site.test": "127.0.0.74", "site.test:8080": "127.0.0.74",
	} {
		got, err := f.Resolve(ctx, host)
		if err != nil || got.String() != want {
			t.Errorf("Resolve(%s) = %v, %v; want %s", host, got, err, want)
		}
	}
	if _, err := f.Resolve(ctx, "site.test"); err != nil {
		t.Fatal(err)
	}
	if n := lookups.Load(); n != 1 {
		t.Errorf("%d lookups for one name resolved twice, want 1 (cached)", n)
	}
	if _, err := f.Resolve(ctx, "missing.test"); err == nil {
		t.Error("Resolve of an unknown name succeeded")
	}
}

// TestFetchReusesConnectionAfterUnreadBody: Fetch leaves the body of a
// redirect and of a binary unread; a small one is drained so that the next
// request to the host reuses the connection, a large one is not downloaded
// (the connection is closed instead).
func TestFetchReusesConnectionAfterUnreadBody(t *testing.T) {
	big := bytes.Repeat([]byte{0}, 1<<20)
	srv := unstartedOn(t, "127.0.0.73", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/page", http.StatusMovedPermanently) // a short HTML body
		case "/small.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			w.Header().Set("Content-Length", "8192")
			_, _ = w.Write(big[:8<<10])
		case "/chunked.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			_, _ = w.Write(big[:1<<10])
			w.(http.Flusher).Flush() // no Content-Length: chunked
			_, _ = w.Write(big[:1<<10])
		case "/big.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			_, _ = w.Write(big)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<p>hello</p>")
		}
	}))
	conns := countConns(srv)
	srv.Start()
	defer srv.Close()
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	fetch := func(path string, wantStatus int) {
		t.Helper()
		res := f.Fetch(t.Context(), Request{URL: srv.URL + path})
		if res.Status != wantStatus {
			t.Fatalf("fetch %s: status %d err %v, want %d", path, res.Status, res.Err, wantStatus)
		}
	}
	for _, p := range []string{"/moved", "/small.pdf", "/chunked.pdf", "/moved"} {
		if p == "/moved" {
			fetch(p, http.StatusMovedPermanently)
		} else {
			fetch(p, http.StatusOK)
		}
	}
	fetch("/page", http.StatusOK)
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for five requests with small unread bodies, want 1", n)
	}
	fetch("/big.pdf", http.StatusOK) // a megabyte left unread: not downloaded, connection closed
	fetch("/page", http.StatusOK)
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections after a large unread body, want 2 (the big body is not drained)", n)
	}
}

// TestIdleConnections: one idle connection per host is kept for the host's
// next turn, at most MaxIdleConns of them (the least recently used goes
// first), and one unused for IdleConnTimeout is closed.
func TestIdleConnections(t *testing.T) {
	type server struct {
		srv            *httptest.Server
		opened, closed atomic.Int32
	}
	var servers []*server
	for _, ip := range []string{"127.0.0.73", "127.0.0.74", "127.0.0.75"} {
		s := &server{}
		s.srv = unstartedOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, "ok")
		}))
		s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.opened.Add(1)
			case http.StateClosed:
				s.closed.Add(1)
			}
		}
		s.srv.Start()
		defer s.srv.Close()
		servers = append(servers, s)
	}
	f := New(Options{AllowPrivate: true, MaxIdleConns: 2, IdleConnTimeout: 300 * time.Millisecond})
	defer f.Close()
	fetch := func(s *server) {
		t.Helper()
		if res := f.Fetch(t.Context(), Request{URL: s.srv.URL + "/"}); res.Err != nil || res.Status != 200 {
			t.Fatalf("fetch %s: status %d err %v", s.srv.URL, res.Status, res.Err)
		}
	}
	fetch(servers[0])
	fetch(servers[0])
	if n := servers[0].opened.Load(); n != 1 {
		t.Fatalf("two turns of one host opened %d connections, want 1", n)
	}
	fetch(servers[1])
	fetch(servers[2]) // a third idle connection: the least recently used goes
	waitUntil(t, "the first host's connection closed for room", func() bool { return servers[0].closed.Load() == 1 })
	if servers[1].closed.Load() != 0 || servers[2].closed.Load() != 0 {
		t.Errorf("closed %d and %d of the newer hosts' connections, want none", servers[1].closed.Load(), servers[2].closed.Load())
	}
	waitUntil(t, "the idle connections closed by age", func() bool {
		return servers[1].closed.Load() == 1 && servers[2].closed.Load() == 1
	})
}

// waitUntil polls cond every 10ms for at most 5s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("waited 5s for %s", what)
		}
	}
}

// TestRelease: releasing a host closes its idle connection at once (the
// crawl holds no request of it) and no other host's; the host's next
// request dials again.
func TestRelease(t *testing.T) {
	var opened, closed [2]atomic.Int32
	var bases [2]string
	for i, ip := range []string{"127.0.0.76", "127.0.0.77"} {
		srv := unstartedOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))
		srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				opened[i].Add(1)
			case http.StateClosed:
				closed[i].Add(1)
			}
		}
		srv.Start()
		defer srv.Close()
		bases[i] = srv.URL
	}
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	fetch := func(i int) {
		t.Helper()
		if res := f.Fetch(t.Context(), Request{URL: bases[i] + "/"}); res.Err != nil || res.Status != 200 {
			t.Fatalf("fetch %s: status %d err %v", bases[i], res.Status, res.Err)
		}
	}
	fetch(0)
	fetch(1)
	if n := f.conns.len(); n != 2 {
		t.Fatalf("%d connections kept, want 2", n)
	}
	host0 := strings.TrimPrefix(bases[0], "http://")
	f.Release(host0)
	waitUntil(t, "the released host's connection closed", func() bool { return closed[0].Load() == 1 })
	if closed[1].Load() != 0 || f.conns.len() != 1 {
		t.Errorf("the other host: %d closed, %d kept; want its connection open and kept", closed[1].Load(), f.conns.len())
	}
	fetch(0)
	if n := opened[0].Load(); n != 2 {
		t.Errorf("the released host opened %d connections, want a new one for its next request", n)
	}
	f.Release("no-such-host.example") // nothing to close: no effect
	if n := f.conns.len(); n != 2 {
		t.Errorf("%d connections kept after releasing an unknown host, want 2", n)
	}
}

// TestUnansweredConnectionIsReset: a fetch cancelled before its answer
// resets its connection (the kernel drops what it had not delivered, so
// a request held up in a cut link never reaches the site later), while
// a connection whose request was answered closes gracefully. Seen from
// a raw server on loopback: a reset reads as ECONNRESET, a close as EOF.
func TestUnansweredConnectionIsReset(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.78:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type ending struct {
		path string
		err  error
	}
	ended := make(chan ending, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				path := strings.Fields(string(buf[:n]))[1]
				if path == "/answered" {
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
				_, err = c.Read(buf) // until the client ends the connection
				ended <- ending{path, err}
			}()
		}
	}()
	base := "http://" + ln.Addr().String()
	f := New(Options{AllowPrivate: true})
	defer f.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if res := f.Fetch(ctx, Request{URL: base + "/unanswered"}); res.Err == nil {
		t.Fatalf("an unanswered fetch succeeded: status %d", res.Status)
	}
	if res := f.Fetch(t.Context(), Request{URL: base + "/answered"}); res.Err != nil || res.Status != 200 {
		t.Fatalf("answered fetch: status %d err %v", res.Status, res.Err)
	}
	f.Release(strings.TrimPrefix(base, "http://"))
	got := map[string]error{}
	for range 2 {
		select {
		case e := <-ended:
			got[e.path] = e.err
		case <-time.After(10 * time.Second):
			t.Fatalf("connections ended: %v, want both", got)
		}
	}
	if err := got["/unanswered"]; !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the cancelled fetch's connection ended with %v, want a reset", err)
	}
	if err := got["/answered"]; !errors.Is(err, io.EOF) {
		t.Errorf("the answered fetch's connection ended with %v, want a graceful close (EOF)", err)
	}
}
