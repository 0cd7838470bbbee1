package httpfetch

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// serve starts h on ip (a 127.0.0.x "host") and returns its base URL.
func serve(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	srv := unstartedOn(t, ip, h)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// unstartedOn returns a server of h listening on ip, not started.
func unstartedOn(t *testing.T, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	return srv
}

// countConns counts the connections srv accepts.
func countConns(srv *httptest.Server) *atomic.Int32 {
	var n atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return &n
}

const chinese = "中华人民共和国是世界上人口最多的国家之一，历史悠久，文化灿烂。" +
	"北京是中国的首都，也是全国的政治、文化和国际交往中心。上海是中国最大的经济中心城市，" +
	"拥有繁忙的港口和现代化的金融区。长江和黄河是中国最重要的两条河流，孕育了古老的中华文明。" +
	"春节是中国最重要的传统节日，人们在这一天团聚，吃饺子，放鞭炮，互相拜年。"

func gbk(t *testing.T, s string) []byte {
	t.Helper()
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatalf("encode gbk: %v", err)
	}
	return b
}

func TestFetch(t *testing.T) {
	page := "<html><head><title>t</title></head><body>" + chinese + "</body></html>"
	metaPage := `<html><head><meta charset="gbk"><title>t</title></head><body>` + chinese + "</body></html>"
	big := strings.Repeat("a", 100<<10)

	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte("<html><body>héllo</body></html>"))
	})
	mux.HandleFunc("/gbk-header", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=GBK")
		_, _ = w.Write(gbk(t, page))
	})
	mux.HandleFunc("/gbk-meta", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(gbk(t, metaPage))
	})
	mux.HandleFunc("/gbk-undeclared", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write(gbk(t, page))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(big))
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(bytes.Repeat([]byte{0x89, 'P', 'N', 'G'}, 1000))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere?x=1", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/busy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r)
	})
	mux.HandleFunc("/slow-headers", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for range 200 {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	base := serve(t, "127.0.0.2", mux)

	// a port with nothing listening
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	opts := Options{
		AllowPrivate:          true,
		ConnectTimeout:        time.Second,
		ResponseHeaderTimeout: 300 * time.Millisecond,
		FetchTimeout:          600 * time.Millisecond,
		MaxBodyBytes:          10 << 10,
	}
	tests := []struct {
		name        string
		opts        *Options // nil: opts
		url         string
		wantStatus  int
		wantKind    failure.Kind
		wantType    string
		wantCharset string
		wantBody    string // substring of the UTF-8 body; "-" for no body
		wantLen     int    // exact body length when > 0
		wantTrunc   bool
		wantLoc     string
		retryable   bool
	}{
		{name: "ok", url: base + "/ok", wantStatus: 200, wantType: "text/html", wantCharset: "utf-8", wantBody: "héllo"},
		{name: "gbk declared in header", url: base + "/gbk-header", wantStatus: 200, wantType: "text/html", wantCharset: "gbk", wantBody: chinese},
		{name: "gbk declared in meta", url: base + "/gbk-meta", wantStatus: 200, wantType: "text/html", wantCharset: "gbk", wantBody: chinese},
		{name: "gbk undeclared", url: base + "/gbk-undeclared", wantStatus: 200, wantType: "text/html", wantCharset: "gb18030", wantBody: chinese},
		{name: "body over cap", url: base + "/big", wantStatus: 200, wantKind: failure.BodyTooLarge, wantType: "text/plain", wantCharset: "utf-8", wantLen: 10 << 10, wantTrunc: true},
		{name: "non html body dropped", url: base + "/png", wantStatus: 200, wantType: "image/png", wantBody: "-"},
		{name: "redirect not followed", url: base + "/redirect", wantStatus: 301, wantKind: failure.Redirect, wantType: "text/html", wantLoc: base + "/elsewhere?x=1", wantBody: "-"},
		{name: "503 retryable", url: base + "/busy", wantStatus: 503, retryable: true, wantBody: "-"},
		{name: "404 is an answer", url: base + "/missing", wantStatus: 404, wantType: "text/plain", wantCharset: "utf-8", wantBody: "not found"},
		{name: "response header timeout", url: base + "/slow-headers", wantKind: failure.Timeout, retryable: true, wantBody: "-"},
		{name: "trickling body hits total timeout", url: base + "/trickle", wantStatus: 200, wantKind: failure.Timeout, wantType: "text/html", retryable: true, wantBody: "-"},
		{name: "connection refused", url: "http://" + closedAddr + "/", wantKind: failure.Connect, retryable: true, wantBody: "-"},
		{name: "private address refused", opts: &Options{}, url: base + "/ok", wantKind: failure.RefusedAddress, wantBody: "-"},
		{name: "unsupported scheme", url: "gopher://127.0.0.2/file", wantKind: failure.InvalidURL, wantBody: "-"},
		{name: "dns failure", url: "http://does-not-exist.invalid/", wantKind: failure.DNS, retryable: true, wantBody: "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.opts != nil {
				o = *tt.opts
			}
			f := New(o)
			defer f.Close()
			r := f.Fetch(t.Context(), Request{URL: tt.url})
			if r.Status != tt.wantStatus || r.Kind != tt.wantKind {
				t.Fatalf("status, kind = %d %q (err %v), want %d %q", r.Status, r.Kind, r.Err, tt.wantStatus, tt.wantKind)
			}
			if r.ContentType != tt.wantType {
				t.Errorf("content type = %q, want %q", r.ContentType, tt.wantType)
			}
			if r.Charset != tt.wantCharset {
				t.Errorf("charset = %q, want %q", r.Charset, tt.wantCharset)
			}
			switch {
			case tt.wantBody == "-":
				if len(r.Body) != 0 {
					t.Errorf("body = %d bytes, want none", len(r.Body))
				}
			case tt.wantBody != "":
				if !strings.Contains(string(r.Body), tt.wantBody) {
					t.Errorf("body = %.200q, want it to contain %.50q", r.Body, tt.wantBody)
				}
			}
			if tt.wantLen > 0 && len(r.Body) != tt.wantLen {
				t.Errorf("body length = %d, want %d", len(r.Body), tt.wantLen)
			}
			if r.Truncated != tt.wantTrunc {
				t.Errorf("truncated = %v, want %v", r.Truncated, tt.wantTrunc)
			}
			if r.RedirectLocation != tt.wantLoc {
				t.Errorf("redirect location = %q, want %q", r.RedirectLocation, tt.wantLoc)
			}
			if got := failure.IsRetryable(r.Err); got != tt.retryable {
				t.Errorf("IsRetryable(%v) = %v, want %v", r.Err, got, tt.retryable)
			}
		})
	}
}

func TestFetchRetryAfter(t *testing.T) {
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	r := f.Fetch(t.Context(), Request{URL: base + "/"})
	var se *failure.StatusError
	if !errors.As(r.Err, &se) || se.Code != 429 || se.RetryAfter != 7*time.Second {
		t.Fatalf("err = %v, want StatusError 429 retry after 7s", r.Err)
	}
}

func TestFetchSendsHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusNotModified)
	}))
	f := New(Options{AllowPrivate: true, UserAgent: "trawl-test/1"})
	defer f.Close()
	r := f.Fetch(t.Context(), Request{URL: base + "/", ETag: `"e"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"})
	if r.Status != 304 || r.Kind != failure.None {
		t.Fatalf("status, kind = %d %q, want 304 none", r.Status, r.Kind)
	}
	h := <-got
	if h.Get("User-Agent") != "trawl-test/1" || h.Get("If-None-Match") != `"e"` || h.Get("If-Modified-Since") == "" {
		t.Fatalf("request headers = %v", h)
	}
}

// TestFetchSendsIdentity: a request's own User-Agent replaces the
// fetcher's and its extra headers are sent, an Accept among them replacing
// the fetcher's; without them the fetcher's User-Agent and Accept go.
func TestFetchSendsIdentity(t *testing.T) {
	got := make(chan http.Header, 1)
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	f := New(Options{AllowPrivate: true, UserAgent: "trawl-test/1"})
	defer f.Close()
	f.Fetch(t.Context(), Request{URL: base + "/", UserAgent: "examplebot/1.0 (+https://example.org/bot)",
		Header: []identity.Header{{Name: "Accept-Language", Value: "fr"}, {Name: "Accept", Value: "text/html"}, {Name: "From", Value: "ops@example.org"}}})
	h := <-got
	if h.Get("User-Agent") != "examplebot/1.0 (+https://example.org/bot)" || h.Get("Accept-Language") != "fr" ||
		h.Values("Accept")[0] != "text/html" || len(h.Values("Accept")) != 1 || h.Get("From") != "ops@example.org" || h.Get("Accept-Encoding") == "" {
		t.Fatalf("request headers = %v", h)
	}
	f.Fetch(t.Context(), Request{URL: base + "/"})
	h = <-got
	if h.Get("User-Agent") != "trawl-test/1" || h.Get("Accept-Language") != "" || !strings.HasPrefix(h.Get("Accept"), "text/html,") {
		t.Fatalf("request headers without an identity = %v", h)
	}
}

func TestRefused(t *testing.T) {
	tests := []struct {
		ip   string
		want bool
	}{
		{"127.0.0.1", true},
		{"127.0.0.2", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true},
		{"0.0.0.0", true},
		{"224.0.0.1", true},
		{"100.64.0.1", true},
		{"255.255.255.255", true},
		{"::1", true},
		{"::", true},
		{"fe80::1", true},
		{"fc00::1", true},
		{"ff02::1", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.0.0.1", true},
		{"93.184.216.34", false},
		{"8.8.8.8", false},
		{"2606:4700::1111", false},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			if got := Refused(netip.MustParseAddr(tt.ip)); got != tt.want {
				t.Fatalf("Refused(%s) = %v, want %v", tt.ip, got, tt.want)
			}
		})
	}
}

func TestToUTF8(t *testing.T) {
	tests := []struct {
		name        string
		body        []byte
		header      string
		wantCharset string
		want        string
	}{
		{name: "utf-8 undeclared", body: []byte("<p>日本語 ünïcode</p>"), header: "text/html", wantCharset: "utf-8", want: "日本語 ünïcode"},
		{name: "utf-8 cut mid rune", body: []byte("<p>ab日")[:len("<p>ab日")-1], header: "text/html", wantCharset: "utf-8", want: "<p>ab"},
		{name: "bom wins", body: append([]byte{0xEF, 0xBB, 0xBF}, "<p>é</p>"...), header: "text/html; charset=iso-8859-1", wantCharset: "utf-8", want: "é"},
		{name: "latin1 declared", body: []byte("<p>caf\xe9</p>"), header: "text/html; charset=iso-8859-1", wantCharset: "windows-1252", want: "café"},
		{name: "invalid utf-8 declared", body: []byte("a\xffb"), header: "text/plain; charset=utf-8", wantCharset: "utf-8", want: "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, cs := ToUTF8(tt.body, tt.header, "text/html")
			if cs != tt.wantCharset || !strings.Contains(string(out), tt.want) {
				t.Fatalf("ToUTF8 = %q %q, want %q containing %q", out, cs, tt.wantCharset, tt.want)
			}
		})
	}
}

// TestCapturedBodyRecycled: with a capture (the WARC archive) the body's
// buffers are recycled too, by Release once the exchange is archived, and
// not before: a GBK page's bytes as received stay in its capture while a
// later fetch reads and converts another page, and Release clears both
// the UTF-8 body and the capture's copy.
func TestCapturedBodyRecycled(t *testing.T) {
	pages := [2]string{
		"<html><head><title>一</title></head><body>" + chinese + "</body></html>",
		"<html><head><title>二</title></head><body>" + strings.Repeat("春节", 400) + "</body></html>",
	}
	mux := http.NewServeMux()
	for i, p := range pages {
		mux.HandleFunc(fmt.Sprintf("/p%d", i), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=GBK")
			_, _ = w.Write(gbk(t, p))
		})
	}
	base := serve(t, "127.0.0.2", mux)
	f := New(Options{AllowPrivate: true, ConnectTimeout: time.Second, FetchTimeout: 5 * time.Second, MaxBodyBytes: 1 << 20})
	var res [2]*Response
	for i := range pages {
		res[i] = f.Fetch(t.Context(), Request{URL: base + fmt.Sprintf("/p%d", i), Host: "h", Capture: true})
		if res[i].Err != nil || res[i].Exchange == nil {
			t.Fatalf("fetch p%d: err %v, exchange %v", i, res[i].Err, res[i].Exchange)
		}
	}
	for i, r := range res {
		if string(r.Body) != pages[i] {
			t.Errorf("p%d: body is not the page in UTF-8 (%d bytes)", i, len(r.Body))
		}
		if !bytes.Equal(r.Exchange.Body, gbk(t, pages[i])) {
			t.Errorf("p%d: the capture's body is not the GBK bytes as received (%d bytes): its buffer was reused", i, len(r.Exchange.Body))
		}
	}
	res[0].Release()
	if res[0].Body != nil || res[0].Exchange.Body != nil {
		t.Error("Release left the body or the capture's body set")
	}
	if !bytes.Equal(res[1].Exchange.Body, gbk(t, pages[1])) || string(res[1].Body) != pages[1] {
		t.Error("releasing one response changed another's bytes")
	}
	res[1].Release()
}
