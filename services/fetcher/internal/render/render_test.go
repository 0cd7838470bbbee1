package render

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// shell is a page its script builds: the server sends an empty app root.
const shell = `<!DOCTYPE html><html><head><title>Shell</title></head><body><div id="app"></div>` +
	`<script src="/app.js"></script></body></html>`

// site serves shell's script, its data and a robots.txt that disallows
// /data/secret, and logs the paths asked.
type site struct {
	srv  *httptest.Server
	host string
	mu   sync.Mutex
	asks []string
}

func startSite(t *testing.T) *site {
	t.Helper()
	s := &site{}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("User-agent: *\nDisallow: /data/secret\n"))
	})
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(`(async () => {
  const d = await (await fetch("/data/1.json")).json();
  const p = document.createElement("p"); p.textContent = d.text; document.getElementById("app").append(p);
  try { await fetch("/data/secret.json"); } catch (e) {}
})();`))
	})
	mux.HandleFunc("/data/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"text": "Text the script wrote."})
	})
	l, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.112:0")
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.asks = append(s.asks, r.URL.Path)
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	s.srv.Listener = l
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	s.host = l.Addr().String()
	return s
}

func (s *site) asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.asks)
}

// rulesOf fetches the site's robots.txt as the fetcher does.
func rulesOf(t *testing.T, s *site) *robots.Rules {
	t.Helper()
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 5 * time.Second})
	t.Cleanup(f.Close)
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	return rc.FetchAs(t.Context(), "http://"+s.host, s.host, robots.As{})
}

func fetched(status int) *httpfetch.Response {
	return &httpfetch.Response{Status: status, Body: []byte(shell), ContentType: "text/html"}
}

func settings(mode crawlv1.RenderMode) crawlsettings.Settings {
	return crawlsettings.Resolve(&crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: mode}}, crawlsettings.Fleet{})
}

// TestRenderWithoutBrowser: the render mode decides which fetched pages
// need a browser; without one they are kept as fetched and counted as
// no_browser; a page that is not a 200 is not looked at.
func TestRenderWithoutBrowser(t *testing.T) {
	r, err := New(nil, nil, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	req := &crawlv1.FetchRequest{Url: "http://127.0.0.112:1/shell"}
	rules := &robots.Rules{}
	for _, tt := range []struct {
		status int
		mode   crawlv1.RenderMode
		reason string
	}{
		{200, crawlv1.RenderMode_RENDER_MODE_ALWAYS, rendersniff.ReasonNoBrowser},
		{200, crawlv1.RenderMode_RENDER_MODE_AUTO, rendersniff.ReasonNoBrowser}, // an empty app root needs one
		{200, crawlv1.RenderMode_RENDER_MODE_NEVER, rendersniff.ReasonNever},
		{404, crawlv1.RenderMode_RENDER_MODE_ALWAYS, ""},
	} {
		before := testutil.ToFloat64(r.verdicts.WithLabelValues(tt.reason))
		res := fetched(tt.status)
		r.Render(t.Context(), req, "127.0.0.112:1", res, rules, settings(tt.mode))
		if string(res.Body) != shell || res.Rendered != "" {
			t.Errorf("%d, %v: body %q rendered %q, want the page as fetched", tt.status, tt.mode, res.Body, res.Rendered)
		}
		want := 1.0
		if tt.reason == "" {
			want = 0
		}
		if got := testutil.ToFloat64(r.verdicts.WithLabelValues(tt.reason)) - before; got != want {
			t.Errorf("%d, %v: %v verdicts %q, want %v", tt.status, tt.mode, got, tt.reason, want)
		}
	}
}

// TestRenderInBrowser: a script-built page is loaded in a real headless
// Chromium from its fetched body: its body becomes the DOM its script
// built, the site is asked for the script and its data but not for the
// page again, and robots.txt blocks the script's disallowed request.
func TestRenderInBrowser(t *testing.T) {
	s := startSite(t)
	rules := rulesOf(t, s)
	b, err := browser.New(context.WithoutCancel(t.Context()), browser.Options{Tabs: 1, PageTimeout: 20 * time.Second, SettleIdle: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	r, err := New(b, nil, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	res := fetched(http.StatusOK)
	r.Render(t.Context(), &crawlv1.FetchRequest{Url: "http://" + s.host + "/shell"}, s.host, res, rules, settings(crawlv1.RenderMode_RENDER_MODE_AUTO))
	if !strings.Contains(string(res.Body), "<p>Text the script wrote.</p>") || res.Rendered != string(browser.OutcomeSettled) {
		t.Fatalf("rendered %q, body %q: want the DOM the script built, settled", res.Rendered, res.Body)
	}
	asked := s.asked()
	if !slices.Contains(asked, "/app.js") || !slices.Contains(asked, "/data/1.json") {
		t.Errorf("site asked for %v, want the script and its data", asked)
	}
	if slices.Contains(asked, "/shell") || slices.Contains(asked, "/data/secret.json") {
		t.Errorf("site asked for %v: not the page again (it was fetched), nor what robots.txt disallows", asked)
	}
	if n := testutil.ToFloat64(r.renders.WithLabelValues(string(browser.OutcomeSettled))); n != 1 {
		t.Errorf("renders_total{outcome=settled} = %v, want 1", n)
	}
}
