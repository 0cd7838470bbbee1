package proxytest_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// origin starts an HTTP server on ip that echoes what it saw and counts hits.
func origin(t *testing.T, ip string, tlsOn bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Origin", "yes")
		w.Header().Set("X-Saw-Proxy-Authorization", r.Header.Get("Proxy-Authorization"))
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected TLS handshake failures
	srv.Listener.Close()
	srv.Listener = ln
	if tlsOn {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &hits
}

// client returns an HTTP client using proxyURL, trusting tlsSrv's cert when given.
func client(t *testing.T, proxyURL string, tlsSrv *httptest.Server, timeout time.Duration) *http.Client {
	t.Helper()
	u, err := url.Parse(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u)}
	if tlsSrv != nil {
		// httptest's certificate names 127.0.0.1 and example.com, not 127.0.0.x.
		tr.TLSClientConfig = &tls.Config{
			RootCAs:    tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs,
			ServerName: "example.com",
		}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

func get(t *testing.T, c *http.Client, u string) (int, http.Header, string, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

func TestForward(t *testing.T) {
	tests := []struct {
		name     string
		tls      bool
		opts     proxytest.Options
		proxyURL func(p *proxytest.Proxy) string
		status   int
		body     string // substring
		hits     int64  // origin hits
	}{
		{name: "get", status: 200, body: "hello /a", hits: 1},
		{name: "connect", tls: true, status: 200, body: "hello /a", hits: 1},
		{name: "auth accepted", opts: proxytest.Options{Username: "u", Password: "s3cret"}, status: 200, body: "hello /a", hits: 1},
		{name: "auth accepted connect", tls: true, opts: proxytest.Options{Username: "u", Password: "s3cret"}, status: 200, body: "hello /a", hits: 1},
		{
			name: "auth missing", opts: proxytest.Options{Username: "u", Password: "s3cret"},
			proxyURL: func(p *proxytest.Proxy) string { return "http://" + p.Addr() },
			status:   http.StatusProxyAuthRequired, hits: 0,
		},
		{
			name: "auth wrong", opts: proxytest.Options{Username: "u", Password: "s3cret"},
			proxyURL: func(p *proxytest.Proxy) string { return "http://u:nope@" + p.Addr() },
			status:   http.StatusProxyAuthRequired, hits: 0,
		},
		{name: "wrong content", opts: proxytest.Options{Mode: proxytest.WrongContent}, status: 200, body: proxytest.WrongBody, hits: 0},
		{name: "slow but in time", opts: proxytest.Options{Mode: proxytest.Slow, Delay: 50 * time.Millisecond}, status: 200, body: "hello /a", hits: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := origin(t, "127.0.0.2", tt.tls)
			p := proxytest.Start(t, "127.0.0.3", tt.opts)
			pu := p.URL()
			if tt.proxyURL != nil {
				pu = tt.proxyURL(p)
			}
			var tlsSrv *httptest.Server
			if tt.tls {
				tlsSrv = srv
			}
			status, hdr, body, err := get(t, client(t, pu, tlsSrv, 5*time.Second), srv.URL+"/a")
			if tt.tls && tt.status == http.StatusProxyAuthRequired {
				// http.Transport turns a failed CONNECT into an error.
				if err == nil || !strings.Contains(err.Error(), "Proxy Authentication Required") {
					t.Fatalf("err = %v, want proxy authentication required", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.status {
				t.Errorf("status = %d, want %d", status, tt.status)
			}
			if !strings.Contains(body, tt.body) {
				t.Errorf("body = %q, want it to contain %q", body, tt.body)
			}
			if got := hits.Load(); got != tt.hits {
				t.Errorf("origin hits = %d, want %d", got, tt.hits)
			}
			if p.Requests() != 1 {
				t.Errorf("proxy requests = %d, want 1", p.Requests())
			}
			if tt.status == http.StatusProxyAuthRequired && !strings.HasPrefix(hdr.Get("Proxy-Authenticate"), "Basic") {
				t.Errorf("Proxy-Authenticate = %q, want Basic", hdr.Get("Proxy-Authenticate"))
			}
			if tt.status == 200 && tt.hits == 1 {
				if hdr.Get("X-Origin") != "yes" {
					t.Errorf("origin header not copied: %v", hdr)
				}
				if v := hdr.Get("X-Saw-Proxy-Authorization"); v != "" {
					t.Errorf("origin saw Proxy-Authorization %q: hop-by-hop header forwarded", v)
				}
			}
		})
	}
}

func TestSlowTimesOut(t *testing.T) {
	srv, hits := origin(t, "127.0.0.2", false)
	p := proxytest.Start(t, "127.0.0.4", proxytest.Options{Mode: proxytest.Slow, Delay: 10 * time.Second})
	_, _, _, err := get(t, client(t, p.URL(), nil, 100*time.Millisecond), srv.URL+"/")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a client timeout", err)
	}
	start := time.Now()
	p.Close() // must not wait for the 10s delay
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if hits.Load() != 0 {
		t.Errorf("origin hit %d times, want 0", hits.Load())
	}
}

func TestCloseRefusesConnections(t *testing.T) {
	srv, _ := origin(t, "127.0.0.2", false)
	p := proxytest.Start(t, "127.0.0.5", proxytest.Options{})
	c := client(t, p.URL(), nil, 2*time.Second)
	if status, _, _, err := get(t, c, srv.URL+"/"); err != nil || status != 200 {
		t.Fatalf("before close: status %d, err %v", status, err)
	}
	p.Close()
	p.Close() // idempotent
	_, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", p.Addr())
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after close: err = %v, want connection refused", err)
	}
	if _, _, _, err := get(t, c, srv.URL+"/"); err == nil {
		t.Fatal("get through closed proxy succeeded")
	}
}

func TestCloseEndsOpenTunnel(t *testing.T) {
	// A raw TCP upstream that never speaks: the tunnel stays open until Close.
	up, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := up.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	p := proxytest.Start(t, "127.0.0.6", proxytest.Options{})
	conn, err := new(net.Dialer).DialContext(t.Context(), "tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", up.Addr(), up.Addr())
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("connect: %v %v", resp, err)
	}
	defer resp.Body.Close() // empty: the tunnel is conn itself
	upConn := <-accepted
	if upConn == nil {
		t.Fatal("upstream not dialed")
	}
	defer upConn.Close()

	// Bytes flow both ways.
	if _, err := io.WriteString(conn, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(upConn, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("upstream read %q, %v", buf, err)
	}
	if _, err := io.WriteString(upConn, "pong"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}

	p.Close()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after close: read err = %v, want EOF", err)
	}
}

func TestWrongContentBreaksTLSTunnel(t *testing.T) {
	srv, hits := origin(t, "127.0.0.2", true)
	p := proxytest.Start(t, "127.0.0.7", proxytest.Options{Mode: proxytest.WrongContent})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client(t, p.URL(), srv, 0).Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatal("TLS through a wrong-content proxy succeeded")
	}
	if hits.Load() != 0 {
		t.Errorf("origin hit %d times, want 0", hits.Load())
	}
}

func TestSOCKS5(t *testing.T) {
	tests := []struct {
		name     string
		tls      bool
		opts     proxytest.Options
		proxyURL func(p *proxytest.Proxy) string
		wantErr  bool
		body     string
		hits     int64
	}{
		{name: "http", body: "hello /a", hits: 1},
		{name: "https", tls: true, body: "hello /a", hits: 1},
		{name: "auth accepted", opts: proxytest.Options{Username: "u", Password: "s3cret"}, body: "hello /a", hits: 1},
		{
			name: "auth wrong", opts: proxytest.Options{Username: "u", Password: "s3cret"},
			proxyURL: func(p *proxytest.Proxy) string { return "socks5://u:nope@" + p.Addr() },
			wantErr:  true,
		},
		{
			name: "auth missing", opts: proxytest.Options{Username: "u", Password: "s3cret"},
			proxyURL: func(p *proxytest.Proxy) string { return "socks5://" + p.Addr() },
			wantErr:  true,
		},
		{name: "wrong content", opts: proxytest.Options{Mode: proxytest.WrongContent}, body: proxytest.WrongBody},
		{name: "wrong content breaks tls", tls: true, opts: proxytest.Options{Mode: proxytest.WrongContent}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, hits := origin(t, "127.0.0.2", tt.tls)
			p := proxytest.StartSOCKS5(t, "127.0.0.8", tt.opts)
			pu := p.URL()
			if !strings.HasPrefix(pu, "socks5://") {
				t.Fatalf("URL() = %q, want socks5 scheme", pu)
			}
			if tt.proxyURL != nil {
				pu = tt.proxyURL(p)
			}
			var tlsSrv *httptest.Server
			if tt.tls {
				tlsSrv = srv
			}
			status, _, body, err := get(t, client(t, pu, tlsSrv, 5*time.Second), srv.URL+"/a")
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got status %d body %q, want an error", status, body)
				}
			} else if err != nil || status != 200 || !strings.Contains(body, tt.body) {
				t.Fatalf("got %d %q %v, want 200 with %q", status, body, err, tt.body)
			}
			if hits.Load() != tt.hits {
				t.Errorf("origin hits = %d, want %d", hits.Load(), tt.hits)
			}
			if p.Requests() != 1 {
				t.Errorf("requests = %d, want 1", p.Requests())
			}
		})
	}
}

func TestSOCKS5SlowAndClose(t *testing.T) {
	srv, _ := origin(t, "127.0.0.2", false)
	p := proxytest.StartSOCKS5(t, "127.0.0.9", proxytest.Options{Mode: proxytest.Slow, Delay: 10 * time.Second})
	_, _, _, err := get(t, client(t, p.URL(), nil, 100*time.Millisecond), srv.URL+"/")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err = %v, want a client timeout", err)
	}
	p.Close()
	if _, err := (&net.Dialer{Timeout: time.Second}).DialContext(t.Context(), "tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after close: %v, want connection refused", err)
	}
}
