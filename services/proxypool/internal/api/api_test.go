package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

func TestProxies(t *testing.T) {
	live, _, _ := proxylist.ParseLine("http://user:topsecret@127.0.0.1:3128")
	dead, _, _ := proxylist.ParseLine("socks5://127.0.0.2:1080")
	unchecked, _, _ := proxylist.ParseLine("127.0.0.3:8080")
	p := pool.New(time.Second)
	p.Set([]proxylist.Entry{live, dead, unchecked})
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p.Record(check.Result{Entry: live, Alive: true, Outcome: check.OK, Latency: 1500 * time.Microsecond, CheckedAt: at})
	p.Record(check.Result{Entry: dead, Outcome: check.Connect, CheckedAt: at})

	rec := httptest.NewRecorder()
	Handler(p).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/proxies", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if strings.Contains(rec.Body.String(), "topsecret") {
		t.Fatalf("body leaks the password: %s", rec.Body)
	}
	var got []Proxy
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]Proxy{}
	for _, g := range got {
		byAddr[g.Addr] = g
	}
	tests := []struct {
		addr    string
		alive   bool
		checked bool
		latency float64
	}{
		{"127.0.0.1:3128", true, true, 1.5},
		{"127.0.0.2:1080", false, true, 0},
		{"127.0.0.3:8080", false, false, 0},
	}
	for _, tt := range tests {
		g, ok := byAddr[tt.addr]
		if !ok {
			t.Errorf("%s missing from %s", tt.addr, rec.Body)
			continue
		}
		if g.Alive != tt.alive || g.Checked != tt.checked || g.LatencyMS != tt.latency || (g.CheckedAt != nil) != tt.checked {
			t.Errorf("%s = %+v, want alive %v checked %v latency %v", tt.addr, g, tt.alive, tt.checked, tt.latency)
		}
	}
	rec = httptest.NewRecorder()
	Handler(p).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/proxies", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST status = %d, want 405", rec.Code)
	}
}
