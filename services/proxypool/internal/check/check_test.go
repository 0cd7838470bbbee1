package check

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const checkBody = "trawl check page"

// origin starts the check page on ip; path /fail answers 500.
func origin(t *testing.T, ip string, useTLS bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "<html><body>%s</body></html>", checkBody)
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func entry(t *testing.T, line string) proxylist.Entry {
	t.Helper()
	e, ok, err := proxylist.ParseLine(line)
	if err != nil || !ok {
		t.Fatalf("parse %q: %v", line, err)
	}
	return e
}

func TestCheck(t *testing.T) {
	plain := origin(t, "127.0.0.30", false)
	secure := origin(t, "127.0.0.30", true)
	roots := secure.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	// The production client, trusting the test origin's certificate (which
	// names example.com, not 127.0.0.30).
	trusting := func(e proxylist.Entry) (*http.Client, error) {
		c, err := ProxyClient(e)
		if err != nil {
			return nil, err
		}
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, ServerName: "example.com"}
		return c, nil
	}

	healthy := proxytest.Start(t, "127.0.0.31", proxytest.Options{})
	authed := proxytest.Start(t, "127.0.0.32", proxytest.Options{Username: "alice", Password: "hunter2-secret"})
	slow := proxytest.Start(t, "127.0.0.33", proxytest.Options{Mode: proxytest.Slow, Delay: 5 * time.Second})
	wrong := proxytest.Start(t, "127.0.0.34", proxytest.Options{Mode: proxytest.WrongContent})
	dead := proxytest.Start(t, "127.0.0.35", proxytest.Options{})
	dead.Close()
	socks := proxytest.StartSOCKS5(t, "127.0.0.36", proxytest.Options{Username: "bob", Password: "socks-secret"})
	socksWrong := proxytest.StartSOCKS5(t, "127.0.0.37", proxytest.Options{Mode: proxytest.WrongContent})

	tests := []struct {
		name     string
		proxy    string
		url      string
		expect   string
		outcome  string
		distrust bool // a client that trusts no certificate: as if a proxy intercepted TLS
	}{
		{name: "healthy", proxy: healthy.URL(), url: plain.URL, expect: checkBody, outcome: OK},
		{name: "healthy https via connect", proxy: healthy.URL(), url: secure.URL, expect: checkBody, outcome: OK},
		{name: "credentials", proxy: authed.URL(), url: plain.URL, expect: checkBody, outcome: OK},
		{name: "wrong credentials", proxy: "http://alice:wrong@" + authed.Addr(), url: plain.URL, outcome: ProxyAuth},
		{name: "wrong credentials https", proxy: "http://alice:wrong@" + authed.Addr(), url: secure.URL, outcome: ProxyAuth},
		{name: "dead", proxy: dead.URL(), url: plain.URL, outcome: Connect},
		{name: "slow", proxy: slow.URL(), url: plain.URL, outcome: Timeout},
		{name: "wrong content", proxy: wrong.URL(), url: plain.URL, expect: checkBody, outcome: WrongContent},
		{name: "wrong content accepted without expect", proxy: wrong.URL(), url: plain.URL, outcome: OK},
		{name: "wrong content breaks https", proxy: wrong.URL(), url: secure.URL, outcome: WrongContent},
		{name: "untrusted origin certificate", proxy: healthy.URL(), url: secure.URL, distrust: true, outcome: WrongContent},
		{name: "socks5", proxy: socks.URL(), url: plain.URL, expect: checkBody, outcome: OK},
		{name: "socks5 https", proxy: socks.URL(), url: secure.URL, expect: checkBody, outcome: OK},
		{name: "socks5 wrong credentials", proxy: "socks5://bob:wrong@" + socks.Addr(), url: plain.URL, outcome: Connect},
		{name: "socks5 wrong content", proxy: socksWrong.URL(), url: plain.URL, expect: checkBody, outcome: WrongContent},
		{name: "bad status", proxy: healthy.URL(), url: plain.URL + "/fail", outcome: BadStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{URL: tt.url, Expect: tt.expect, Timeout: 300 * time.Millisecond}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			e := entry(t, tt.proxy)
			newClient := trusting
			if tt.distrust {
				newClient = func(e proxylist.Entry) (*http.Client, error) {
					c, err := ProxyClient(e)
					if err == nil {
						c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: x509.NewCertPool(), ServerName: "example.com"}
					}
					return c, err
				}
			}
			r := New(cfg, newClient, time.Now).Check(t.Context(), e)
			if r.Outcome != tt.outcome {
				t.Fatalf("outcome = %q (err %v), want %q", r.Outcome, r.Err, tt.outcome)
			}
			if r.Alive != (tt.outcome == OK) {
				t.Errorf("alive = %v with outcome %q", r.Alive, r.Outcome)
			}
			if (r.Err == nil) != r.Alive {
				t.Errorf("err = %v with alive %v", r.Err, r.Alive)
			}
			if r.Alive && r.Latency <= 0 {
				t.Errorf("latency = %v, want > 0", r.Latency)
			}
			if r.Err != nil && e.Password != "" && strings.Contains(r.Err.Error(), e.Password) {
				t.Errorf("error leaks the password: %v", r.Err)
			}
		})
	}
}

func TestCheckCanceled(t *testing.T) {
	plain := origin(t, "127.0.0.30", false)
	slow := proxytest.Start(t, "127.0.0.33", proxytest.Options{Mode: proxytest.Slow, Delay: 5 * time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	r := New(Config{URL: plain.URL, Timeout: 5 * time.Second}, ProxyClient, time.Now).Check(ctx, entry(t, slow.URL()))
	if r.Outcome != Canceled || r.Alive {
		t.Fatalf("outcome = %q alive %v, want canceled", r.Outcome, r.Alive)
	}
}

func TestRedact(t *testing.T) {
	e := entry(t, "http://alice:p%40ss%20word@127.0.0.1:8080")
	err := redact(fmt.Errorf("dial http://alice:p%%40ss%%20word@127.0.0.1:8080: p@ss word refused"), e)
	if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "p%40ss") {
		t.Errorf("redact left the password: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"ok", Config{URL: "http://127.0.0.1/x", Timeout: time.Second}, true},
		{"missing url", Config{Timeout: time.Second}, false},
		{"relative url", Config{URL: "/x", Timeout: time.Second}, false},
		{"ftp url", Config{URL: "ftp://h/x", Timeout: time.Second}, false},
		{"zero timeout", Config{URL: "http://h/x"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestLeakCheck checks through real proxies that forward faithfully (elite),
// add Via (anonymous) or add X-Forwarded-For (transparent) to an origin
// that echoes the request headers.
func TestLeakCheck(t *testing.T) {
	echo := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, checkBody)
		for k, vs := range r.Header {
			fmt.Fprintf(w, "%s: %s\n", k, strings.Join(vs, ", "))
		}
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.60:0")
	if err != nil {
		t.Fatal(err)
	}
	echo.Listener.Close()
	echo.Listener = ln
	echo.Start()
	defer echo.Close()

	tests := []struct {
		name        string
		leak        proxytest.Leak
		leakCheck   bool
		wantOutcome string
		wantAnon    string
	}{
		{"elite", proxytest.LeakNone, true, OK, Elite},
		{"anonymous", proxytest.LeakVia, true, OK, Anonymous},
		{"transparent", proxytest.LeakClient, true, Transparent, ""},
		{"transparent unchecked", proxytest.LeakClient, false, OK, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := proxytest.Start(t, fmt.Sprintf("127.0.0.%d", 61+i), proxytest.Options{Leak: tt.leak})
			c := New(Config{URL: echo.URL + "/", Expect: checkBody, Timeout: 5 * time.Second, LeakCheck: tt.leakCheck}, ProxyClient, time.Now)
			r := c.Check(t.Context(), entry(t, px.Addr()))
			if r.Outcome != tt.wantOutcome || r.Anonymity != tt.wantAnon || r.Alive != (tt.wantOutcome == OK) {
				t.Errorf("outcome %s anonymity %q alive %v (%v), want %s %q", r.Outcome, r.Anonymity, r.Alive, r.Err, tt.wantOutcome, tt.wantAnon)
			}
		})
	}
}

func TestAnonymityOfJSONEcho(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"headers": {"Accept": "*/*", "Host": "h"}}`, Elite},
		{`{"headers": {"Via": "1.1 squid", "Host": "h"}}`, Anonymous},
		{`{"headers": {"X-Forwarded-For": "10.1.2.3", "Via": "1.1 squid"}}`, Transparent},
		{"Host: h\nForwarded: for=10.1.2.3\n", Transparent},
		{"Host: h\nX-Viable: 1\n", Elite},
	}
	for _, tt := range tests {
		if got := anonymity([]byte(tt.body)); got != tt.want {
			t.Errorf("anonymity(%q) = %s, want %s", tt.body, got, tt.want)
		}
	}
}
