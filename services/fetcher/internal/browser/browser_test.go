package browser

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testTimeout bounds every test that drives Chromium.
const testTimeout = 90 * time.Second

// site is a local web server that counts what it is asked and serves a
// script-built page (an empty <div id="app">, a script that fetches
// /data/N.json and writes its text and links into the DOM), and the
// pages of the tests' bad cases.
type site struct {
	base string // http://127.0.0.x:port
	host string

	mu       sync.Mutex
	requests []request
	mux      *http.ServeMux
	// hang is closed at the end of the test, releasing the requests that
	// never end.
	hang chan struct{}
}

type request struct {
	path, ua, crawlHeader string
}

// newSite serves on ip (127.0.0.x) until the test ends.
func newSite(t testing.TB, ip string) *site {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	s := &site{base: "http://" + ln.Addr().String(), host: ln.Addr().String(), mux: http.NewServeMux(), hang: make(chan struct{})}
	s.routes()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ErrServerClosed at the end of the test
	}()
	t.Cleanup(func() {
		close(s.hang)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	return s
}

func (s *site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, request{path: r.URL.RequestURI(), ua: r.UserAgent(), crawlHeader: r.Header.Get("X-Crawl")})
	s.mu.Unlock()
	s.mux.ServeHTTP(w, r)
}

// seen returns the paths requested, in order.
func (s *site) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.requests {
		out = append(out, r.path)
	}
	return out
}

// count returns how many times path was requested.
func (s *site) count(path string) int {
	n := 0
	for _, p := range s.seen() {
		if p == path {
			n++
		}
	}
	return n
}

func (s *site) request(path string) (request, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		if r.path == path {
			return r, true
		}
	}
	return request{}, false
}

func html(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, body)
}

// shell is a script-built page: its text and links come from
// /data/<n>.json.
func shell(n string, extra string) string {
	return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Page ` + n + `</title>` + extra + `</head>
<body><div id="app"></div><script src="/app.js?n=` + n + `"></script>
<noscript>Please enable JavaScript</noscript></body></html>`
}

// appJS builds the page from its data: the text in a <p>, each link an
// <a href>.
const appJS = `(async () => {
  const n = new URL(document.currentScript.src).searchParams.get("n");
  const app = document.getElementById("app");
  try {
    const d = await (await fetch("/data/" + n + ".json")).json();
    const p = document.createElement("p");
    p.textContent = d.text;
    app.append(p);
    for (const l of d.links) {
      const a = document.createElement("a");
      a.href = l;
      a.textContent = "link " + l;
      app.append(a);
    }
  } catch (e) {
    app.append("no data");
  }
})();`

func (s *site) routes() {
	s.mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, appJS)
	})
	s.mux.HandleFunc("/data/", func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/data/"), ".json")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"text":  "The text of page " + n + ", built by its script.",
			"links": []string{"/page/" + n + "/a", "/page/" + n + "/b"},
		})
	})
	s.mux.HandleFunc("/page/", func(w http.ResponseWriter, r *http.Request) {
		html(w, shell(strings.Trim(strings.TrimPrefix(r.URL.Path, "/page/"), "/"), ""))
	})
	s.mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
	})
	s.mux.HandleFunc("/poll", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "{}")
	})
	for _, p := range []string{"/img.png", "/font.woff2", "/movie.mp4"} {
		s.mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	}
	s.mux.HandleFunc("/style.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, `@font-face { font-family: F; src: url(/font.woff2) format("woff2"); } body { font-family: F; background: url(/img.png); }`)
	})
}

// newBrowser starts a Browser for the test, closed at its end.
func newBrowser(t *testing.T, opts Options) *Browser {
	t.Helper()
	if opts.PageTimeout == 0 {
		opts.PageTimeout = 10 * time.Second
	}
	if opts.SettleIdle == 0 {
		opts.SettleIdle = 200 * time.Millisecond
	}
	// Chromium runs under a context the test's end does not cancel, so
	// that the cleanup's Close is what stops it.
	b, err := New(context.WithoutCancel(t.Context()), opts)
	if err != nil {
		t.Fatalf("start browser: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close browser: %v", err)
		}
	})
	return b
}

// loadOK loads url, failing the test on an error.
func loadOK(ctx context.Context, t *testing.T, b *Browser, url string) *Page {
	t.Helper()
	p, err := b.Load(ctx, url)
	if err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	return p
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestScriptBuiltPage: the text and links a script builds from
// /data/1.json are in Page.HTML; the crawl's user agent and header reach
// the server with the page and with the script's fetch; every response
// is an Exchange, the data's body as served.
func TestScriptBuiltPage(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{UserAgent: "trawl-test/1.0 (+http://example.test/bot)", Headers: map[string]string{"X-Crawl": "crawl-7"}})

	p := loadOK(ctx, t, b, s.base+"/page/1")
	if p.Outcome != OutcomeSettled || p.Status != http.StatusOK {
		t.Fatalf("outcome %s, status %d", p.Outcome, p.Status)
	}
	for _, want := range []string{"The text of page 1, built by its script.", `<a href="/page/1/a">`, `<a href="/page/1/b">`, "<!DOCTYPE html>"} {
		if !strings.Contains(p.HTML, want) {
			t.Errorf("HTML lacks %q:\n%s", want, p.HTML)
		}
	}
	if p.Title != "Page 1" || p.FinalURL != s.base+"/page/1" {
		t.Errorf("title %q, final URL %q", p.Title, p.FinalURL)
	}
	for _, path := range []string{"/page/1", "/data/1.json"} {
		r, ok := s.request(path)
		if !ok {
			t.Fatalf("%s not requested: %v", path, s.seen())
		}
		if r.ua != "trawl-test/1.0 (+http://example.test/bot)" || r.crawlHeader != "crawl-7" {
			t.Errorf("%s: user agent %q, X-Crawl %q", path, r.ua, r.crawlHeader)
		}
	}
	// The one request blocked is the favicon Chromium asks for itself.
	if p.Requests != 3 || len(p.Blocked) != 1 || p.Blocked[BlockedType] != 1 || s.count("/favicon.ico") != 0 {
		t.Errorf("requests %d, blocked %v", p.Requests, p.Blocked)
	}
	var urls []string
	for _, ex := range p.Exchanges {
		urls = append(urls, ex.URL)
		if ex.URL == s.base+"/data/1.json" {
			if !strings.Contains(string(ex.Body), "The text of page 1") || ex.Status != 200 || ex.Header.Get("Content-Type") != "application/json" || ex.Method != "GET" {
				t.Errorf("data exchange: %+v", ex)
			}
			if got := ex.RequestHeaders.Get("X-Crawl"); got != "crawl-7" {
				t.Errorf("data exchange request X-Crawl %q", got)
			}
		}
	}
	slices.Sort(urls)
	if want := []string{s.base + "/app.js?n=1", s.base + "/data/1.json", s.base + "/page/1"}; !slices.Equal(urls, want) {
		t.Errorf("exchanges %v, want %v", urls, want)
	}
}

// TestRobotsBlocksSubresource: robots.txt (Allow) refusing /data/ blocks
// the script's fetch before it reaches the server, counts it, and the
// text it would have brought is absent.
func TestRobotsBlocksSubresource(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	var asked sync.Map
	b := newBrowser(t, Options{Allow: func(u string) bool {
		asked.Store(u, true)
		return !strings.Contains(u, "/data/")
	}})
	p := loadOK(ctx, t, b, s.base+"/page/2")
	if n := s.count("/data/2.json"); n != 0 {
		t.Errorf("/data/2.json requested %d times", n)
	}
	if p.Blocked[BlockedRobots] != 1 || p.Requests != 2 {
		t.Errorf("blocked %v, requests %d", p.Blocked, p.Requests)
	}
	if strings.Contains(p.HTML, "The text of page 2") || !strings.Contains(p.HTML, "no data") {
		t.Errorf("HTML:\n%s", p.HTML)
	}
	for _, u := range []string{s.base + "/page/2", s.base + "/app.js?n=2", s.base + "/data/2.json"} {
		if _, ok := asked.Load(u); !ok {
			t.Errorf("Allow not asked for %s", u)
		}
	}

	// The page itself refused: nothing is loaded.
	before := len(s.seen())
	p = loadOK(ctx, t, b, s.base+"/data/page")
	if p.Outcome != OutcomeRobots || len(s.seen()) != before {
		t.Errorf("refused page: outcome %s, requests %v", p.Outcome, s.seen()[before:])
	}
}

// TestBlocksTypesAndOtherHosts: images, fonts and media are never
// requested, nor is another host's script; with AllowOtherHosts the
// other host's script is.
func TestBlocksTypesAndOtherHosts(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	other := newSite(t, "127.0.0.2")
	other.mux.HandleFunc("/other.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		fmt.Fprint(w, `document.title = "other ran";`)
	})
	s.mux.HandleFunc("/rich", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><html><head><title>rich</title><link rel="stylesheet" href="/style.css">
<link rel="preload" href="/font.woff2" as="font" crossorigin></head><body><p>text</p>
<img src="/img.png"><video src="/movie.mp4" autoplay muted></video>
<script src="`+other.base+`/other.js"></script>
<script>fetch("/img.png"); new FontFace("G", "url(/font.woff2)").load().catch(() => {});</script></body></html>`)
	})
	b := newBrowser(t, Options{})
	p := loadOK(ctx, t, b, s.base+"/rich")
	for _, path := range []string{"/font.woff2", "/movie.mp4"} {
		if n := s.count(path); n != 0 {
			t.Errorf("%s requested %d times", path, n)
		}
	}
	// fetch("/img.png") is a fetch, not an image: it is let through.
	// <img> and CSS backgrounds are never requested.
	if n := s.count("/img.png"); n != 1 {
		t.Errorf("/img.png requested %d times, want 1 (the script's fetch only)", n)
	}
	if n := other.count("/other.js"); n != 0 {
		t.Errorf("other host's script requested %d times", n)
	}
	if p.Blocked[BlockedOtherHost] != 1 || p.Blocked[BlockedType] < 2 {
		t.Errorf("blocked %v", p.Blocked)
	}
	if p.Title != "rich" {
		t.Errorf("title %q: the other host's script ran", p.Title)
	}

	b2 := newBrowser(t, Options{AllowOtherHosts: true})
	p = loadOK(ctx, t, b2, s.base+"/rich")
	if n := other.count("/other.js"); n != 1 || p.Title != "other ran" {
		t.Errorf("allowed other host: requested %d times, title %q", n, p.Title)
	}
}

// TestMaxRequests: past MaxRequests, the page's requests are blocked
// before they reach the server, and counted.
func TestMaxRequests(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/many", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>many</title><script>
for (let i = 0; i < 20; i++) fetch("/poll?i=" + i).catch(() => {});
</script>`)
	})
	b := newBrowser(t, Options{MaxRequests: 5})
	p := loadOK(ctx, t, b, s.base+"/many")
	if len(s.seen()) != 5 || p.Requests != 5 || p.Blocked[BlockedMaxRequests] != 16 {
		t.Errorf("server saw %d requests %v; page: requests %d, blocked %v", len(s.seen()), s.seen(), p.Requests, p.Blocked)
	}
}

// TestOneTabSerializesLoads: with one tab, two loads at once run one
// after the other: the server never sees a request of one page between
// two of the other's.
func TestOneTabSerializesLoads(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{Tabs: 1})
	var wg sync.WaitGroup
	for _, n := range []string{"10", "11"} {
		wg.Go(func() {
			p, err := b.Load(ctx, s.base+"/page/"+n)
			if err != nil || !strings.Contains(p.HTML, "The text of page "+n) {
				t.Errorf("page %s: %v", n, err)
			}
		})
	}
	wg.Wait()
	var order []string
	for _, path := range s.seen() {
		n := "10"
		if strings.Contains(path, "11") {
			n = "11"
		}
		if len(order) == 0 || order[len(order)-1] != n {
			order = append(order, n)
		}
	}
	if len(order) != 2 {
		t.Errorf("requests interleaved: %v", s.seen())
	}
}

// TestNeverSettles: a page that polls forever and holds a request open
// ends at the time limit with what its DOM holds.
func TestNeverSettles(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/busy", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>busy</title><body><p id="early">written early</p><script>
fetch("/hang").catch(() => {});
setInterval(() => fetch("/poll").catch(() => {}), 50);
</script></body>`)
	})
	b := newBrowser(t, Options{PageTimeout: 3 * time.Second, SettleIdle: 300 * time.Millisecond, MaxRequests: 1000})
	start := time.Now()
	p := loadOK(ctx, t, b, s.base+"/busy")
	if p.Outcome != OutcomeTimeout || !strings.Contains(p.HTML, "written early") {
		t.Errorf("outcome %s, HTML:\n%s", p.Outcome, p.HTML)
	}
	if d := time.Since(start); d < 3*time.Second || d > 20*time.Second {
		t.Errorf("load took %v", d)
	}
	// The tab is reset: the next page loads and settles.
	if p := loadOK(ctx, t, b, s.base+"/page/3"); p.Outcome != OutcomeSettled {
		t.Errorf("next page: %s", p.Outcome)
	}
}

// TestScriptLoops: a script that never yields ends at the time limit;
// the tab is closed and replaced, and the next load works. The loop
// starts in the load event's handler: started by a timer, it raced the
// page's settling, and once (a loaded machine, the timer late by more
// than SettleIdle) the page settled first.
func TestScriptLoops(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/loop", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>loop</title><body><p>before the loop</p><script>
window.addEventListener("load", () => { for (;;) {} });
</script></body>`)
	})
	b := newBrowser(t, Options{PageTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
	p := loadOK(ctx, t, b, s.base+"/loop")
	if p.Outcome != OutcomeTimeout && p.Outcome != OutcomeHung {
		t.Errorf("outcome %s", p.Outcome)
	}
	t.Logf("looping page: outcome %s, %d bytes of HTML", p.Outcome, len(p.HTML))
	if st := b.Stats(); st.TabsClosed != 1 {
		t.Errorf("tabs closed %d, want 1", st.TabsClosed)
	}
	if p := loadOK(ctx, t, b, s.base+"/page/4"); p.Outcome != OutcomeSettled || !strings.Contains(p.HTML, "The text of page 4") {
		t.Errorf("next page: %s", p.Outcome)
	}
	if st := b.Stats(); st.TabsOpened != 2 {
		t.Errorf("tabs opened %d, want 2", st.TabsOpened)
	}
}

// TestNavigatesAway: a page whose script goes to another host, or to
// another page of its host, stays as it was and says so; a redirect of
// the page to another host is not followed.
func TestNavigatesAway(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	other := newSite(t, "127.0.0.2")
	s.mux.HandleFunc("/away", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>away</title><body><p>still here</p><script>
setTimeout(() => { location.href = "`+other.base+`/elsewhere"; }, 50);
</script></body>`)
	})
	s.mux.HandleFunc("/sideways", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>sideways</title><body><p>still here</p><script>
setTimeout(() => { location.href = "/page/5"; }, 50);
</script></body>`)
	})
	s.mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.base+"/elsewhere", http.StatusFound)
	})
	b := newBrowser(t, Options{})

	p := loadOK(ctx, t, b, s.base+"/away")
	if p.Outcome != OutcomeNavigatedAway || p.Blocked[BlockedOtherHost] != 1 || !strings.Contains(p.HTML, "still here") || p.FinalURL != s.base+"/away" {
		t.Errorf("script to another host: outcome %s, blocked %v, final %s, HTML:\n%s", p.Outcome, p.Blocked, p.FinalURL, p.HTML)
	}
	p = loadOK(ctx, t, b, s.base+"/sideways")
	if p.Outcome != OutcomeNavigatedAway || p.Blocked[BlockedNavigation] != 1 || s.count("/page/5") != 0 || !strings.Contains(p.HTML, "still here") {
		t.Errorf("script to another page: outcome %s, blocked %v, HTML:\n%s", p.Outcome, p.Blocked, p.HTML)
	}
	p = loadOK(ctx, t, b, s.base+"/moved")
	if p.Outcome != OutcomeNavigatedAway || p.Blocked[BlockedOtherHost] != 1 || p.HTML != "" {
		t.Errorf("redirect to another host: outcome %s, blocked %v, HTML %q", p.Outcome, p.Blocked, p.HTML)
	}
	if n := len(other.seen()); n != 0 {
		t.Errorf("other host requested: %v", other.seen())
	}
}

// TestDialogs: alert and confirm are dismissed and counted; the page
// goes on (a dismissed confirm answers false).
func TestDialogs(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/dialogs", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>dialogs</title><body><script>
alert("hello");
document.body.append(confirm("sure?") ? "confirmed" : "dismissed");
</script></body>`)
	})
	b := newBrowser(t, Options{})
	p := loadOK(ctx, t, b, s.base+"/dialogs")
	if p.Outcome != OutcomeSettled || p.Dialogs != 2 || !strings.Contains(p.HTML, "dismissed") {
		t.Errorf("outcome %s, dialogs %d, HTML:\n%s", p.Outcome, p.Dialogs, p.HTML)
	}
}

// TestDownloadRefused: a page that is a download is refused, and nothing
// is saved.
func TestDownloadRefused(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/report.csv", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("Content-Disposition", `attachment; filename="report.csv"`)
		fmt.Fprint(w, "a,b\n1,2\n")
	})
	b := newBrowser(t, Options{})
	p := loadOK(ctx, t, b, s.base+"/report.csv")
	if p.Outcome != OutcomeDownload || p.Blocked[BlockedDownload] != 1 || p.HTML != "" {
		t.Errorf("outcome %s, blocked %v, HTML %q", p.Outcome, p.Blocked, p.HTML)
	}
	if p := loadOK(ctx, t, b, s.base+"/page/6"); p.Outcome != OutcomeSettled {
		t.Errorf("next page: %s", p.Outcome)
	}
}

// TestGzipExchange: the body of a compressed response is kept as the
// page got it, decoded.
func TestGzipExchange(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	s.mux.HandleFunc("/gz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		fmt.Fprint(zw, `<!DOCTYPE html><title>gz</title><p>compressed page</p>`)
		_ = zw.Close()
	})
	b := newBrowser(t, Options{})
	p := loadOK(ctx, t, b, s.base+"/gz")
	if len(p.Exchanges) != 1 {
		t.Fatalf("exchanges: %+v", p.Exchanges)
	}
	ex := p.Exchanges[0]
	t.Logf("gzip exchange: Content-Encoding %q, body %q", ex.Header.Get("Content-Encoding"), ex.Body)
	if !strings.Contains(string(ex.Body), "compressed page") {
		t.Errorf("body %q", ex.Body)
	}
}

// TestBrowserCrashRestarts: Chromium killed during a load makes that
// load return ErrBrowserGone; the next load starts a new Chromium.
func TestBrowserCrashRestarts(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	started := make(chan struct{})
	var once sync.Once
	s.mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(started) })
		html(w, `<!DOCTYPE html><title>slow</title><script>fetch("/hang")</script>`)
	})
	b := newBrowser(t, Options{})
	pid := b.PID()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Load(ctx, s.base+"/slow")
		errc <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("page never requested")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrBrowserGone) {
			t.Errorf("load during the kill: %v, want ErrBrowserGone", err)
		}
	case <-ctx.Done():
		t.Fatal("load stuck after the kill")
	}
	p := loadOK(ctx, t, b, s.base+"/page/7")
	if p.Outcome != OutcomeSettled || b.PID() == pid || b.PID() == 0 {
		t.Errorf("after restart: outcome %s, pid %d (was %d)", p.Outcome, b.PID(), pid)
	}
	if st := b.Stats(); st.Starts != 2 || st.Restarts[RestartDied] != 1 || st.Errors != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestTabCrash: the renderer killed during a load makes that load return
// ErrTabCrashed; the tab is replaced and the next load works.
func TestTabCrash(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	started := make(chan struct{})
	var once sync.Once
	s.mux.HandleFunc("/crash-me", func(w http.ResponseWriter, _ *http.Request) {
		html(w, `<!DOCTYPE html><title>crash me</title><script>fetch("/signal").then(() => fetch("/hang"))</script>`)
	})
	s.mux.HandleFunc("/signal", func(w http.ResponseWriter, _ *http.Request) {
		once.Do(func() { close(started) })
		fmt.Fprint(w, "{}")
	})
	b := newBrowser(t, Options{})
	errc := make(chan error, 1)
	go func() {
		_, err := b.Load(ctx, s.base+"/crash-me")
		errc <- err
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("page never ran")
	}
	killed := 0
	pids, err := descendants(b.PID())
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "--type=renderer") && !strings.Contains(string(cmd), "--extension-process") {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatal("no renderer found")
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrTabCrashed) {
			t.Errorf("load during the kill: %v, want ErrTabCrashed", err)
		}
	case <-ctx.Done():
		t.Fatal("load stuck after the kill")
	}
	if p := loadOK(ctx, t, b, s.base+"/page/8"); p.Outcome != OutcomeSettled {
		t.Errorf("after the crash: %s", p.Outcome)
	}
	if st := b.Stats(); st.TabsClosed != 1 || st.TabsOpened != 2 || st.Starts != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestRestartAfterPages: RestartAfter bounds the pages one Chromium
// loads; Close removes its user data directory.
func TestRestartAfterPages(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{RestartAfter: 2})
	var pids []int
	for i := range 3 {
		loadOK(ctx, t, b, s.base+fmt.Sprintf("/page/%d", 20+i))
		pids = append(pids, b.PID())
	}
	if pids[0] != pids[1] || pids[1] == pids[2] {
		t.Errorf("pids %v: want a new Chromium for the third page", pids)
	}
	if st := b.Stats(); st.Restarts[RestartPages] != 1 || st.Starts != 2 {
		t.Errorf("stats %+v", st)
	}
	dir := userDataDir(t, b.PID())
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("user data dir %s: %v", dir, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("user data dir %s after Close: %v", dir, err)
	}
	if _, err := b.Load(ctx, s.base+"/page/1"); !errors.Is(err, ErrClosed) {
		t.Errorf("load after Close: %v", err)
	}
}

// TestRestartOnRSS: Chromium whose processes hold more than MaxRSS is
// restarted after the load that found it so.
func TestRestartOnRSS(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{MaxRSS: 1 << 20})
	first := b.PID()
	loadOK(ctx, t, b, s.base+"/page/30")
	if b.PID() == first {
		t.Errorf("pid %d unchanged after a load over MaxRSS", first)
	}
	if p := loadOK(ctx, t, b, s.base+"/page/31"); p.Outcome != OutcomeSettled {
		t.Errorf("after the restart: %s", p.Outcome)
	}
	if st := b.Stats(); st.Restarts[RestartRSS] != 2 || st.Starts != 3 {
		t.Errorf("stats %+v", st)
	}
}

// userDataDir reads Chromium's --user-data-dir from its command line.
func userDataDir(t *testing.T, pid int) string {
	t.Helper()
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range strings.Split(string(cmd), "\x00") {
		if dir, ok := strings.CutPrefix(arg, "--user-data-dir="); ok {
			return dir
		}
	}
	t.Fatalf("no --user-data-dir in %q", cmd)
	return ""
}

// TestUsage: the browser's processes are found and measured.
func TestUsage(t *testing.T) {
	b := newBrowser(t, Options{})
	u, err := b.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if u.Processes < 2 || u.RSS < 10<<20 || u.PSS <= 0 || u.PSS > u.RSS {
		t.Errorf("usage %+v", u)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"negative tabs", Options{Tabs: -1}, false},
		{"negative timeout", Options{PageTimeout: -time.Second}, false},
		{"settle not below timeout", Options{PageTimeout: time.Second, SettleIdle: time.Second}, false},
		{"negative cap", Options{MaxRequests: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.o.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v", err)
			}
		})
	}
}

// TestConnectionRefused: a page whose server is not there ends as
// OutcomeFailed with Chromium's reason, and the tab goes on.
func TestConnectionRefused(t *testing.T) {
	ctx := testContext(t)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{})
	p := loadOK(ctx, t, b, "http://"+addr+"/")
	if p.Outcome != OutcomeFailed || !strings.Contains(p.Error, "ERR_CONNECTION_REFUSED") || p.HTML != "" {
		t.Errorf("outcome %s, error %q, HTML %q", p.Outcome, p.Error, p.HTML)
	}
	if p := loadOK(ctx, t, b, s.base+"/page/9"); p.Outcome != OutcomeSettled {
		t.Errorf("next page: %s", p.Outcome)
	}
}

// TestLoadFetched: a page the fetcher has already fetched is read by the
// browser from the fetched document, not asked of the server again; the
// page's scripts still fetch what they need, and build the same page.
func TestLoadFetched(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{})
	doc := &Document{Status: http.StatusOK, Body: []byte(shell("7", "")), Header: http.Header{
		"Content-Type":     {"text/html; charset=utf-8"},
		"Content-Encoding": {"gzip"}, // the fetcher decoded the body: dropped
		"Content-Length":   {"1"},
	}}
	p, err := b.LoadAs(ctx, s.base+"/page/7", As{Document: doc})
	if err != nil {
		t.Fatal(err)
	}
	if p.Outcome != OutcomeSettled || p.Status != http.StatusOK || p.Title != "Page 7" {
		t.Fatalf("outcome %s, status %d, title %q", p.Outcome, p.Status, p.Title)
	}
	if !strings.Contains(p.HTML, "The text of page 7, built by its script.") || !strings.Contains(p.HTML, `<a href="/page/7/a">`) {
		t.Errorf("the fetched shell was not built:\n%s", p.HTML)
	}
	if n := s.count("/page/7"); n != 0 {
		t.Errorf("the fetched page was asked of the server %d times: %v", n, s.seen())
	}
	if s.count("/data/7.json") != 1 || s.count("/app.js?n=7") != 1 {
		t.Errorf("the page's script and data: %v", s.seen())
	}
	if p.Requests != 2 {
		t.Errorf("%d requests counted, want 2 (the script and its data; the page came from the fetch)", p.Requests)
	}
	for _, ex := range p.Exchanges {
		if ex.URL == s.base+"/page/7" {
			t.Errorf("the fetched page is an exchange of the browser's: it is the fetcher's to archive")
		}
	}
	// A plain Load of the same browser asks the server.
	loadOK(ctx, t, b, s.base+"/page/8")
	if s.count("/page/8") != 1 {
		t.Errorf("Load did not request its page: %v", s.seen())
	}
}

// TestLoadAs: one Browser serves several crawls, each load with its own
// identity and robots.txt: the server sees each load's user agent and
// header, on the page and its data, and a robots.txt that refuses /data/
// blocks the data of its own load only.
func TestLoadAs(t *testing.T) {
	ctx := testContext(t)
	s := newSite(t, "127.0.0.1")
	b := newBrowser(t, Options{Tabs: 1, UserAgent: "fleet-bot/1.0 (+http://example.test/fleet)"})
	noData := func(u string) bool { return !strings.Contains(u, "/data/") }
	loads := []struct {
		page   string
		as     As
		ua     string
		header string
		built  bool
	}{
		{"/page/1", As{UserAgent: "crawl-a/1.0 (+http://a.test/bot)", Headers: map[string]string{"X-Crawl": "a"}}, "crawl-a/1.0 (+http://a.test/bot)", "a", true},
		{"/page/2", As{Allow: noData}, "fleet-bot/1.0 (+http://example.test/fleet)", "", false},
		{"/page/3", As{UserAgent: "crawl-b/2.0 (+http://b.test/bot)", Headers: map[string]string{"X-Crawl": "b"}}, "crawl-b/2.0 (+http://b.test/bot)", "b", true},
	}
	for _, l := range loads {
		p, err := b.LoadAs(ctx, s.base+l.page, l.as)
		if err != nil {
			t.Fatalf("%s: %v", l.page, err)
		}
		n := strings.TrimPrefix(l.page, "/page/")
		if built := strings.Contains(p.HTML, "The text of page "+n); built != l.built {
			t.Errorf("%s: built %v, want %v (blocked %v)", l.page, built, l.built, p.Blocked)
		}
		if !l.built && p.Blocked[BlockedRobots] != 1 {
			t.Errorf("%s: blocked %v, want its data refused by its robots.txt", l.page, p.Blocked)
		}
		for _, path := range []string{l.page, "/data/" + n + ".json"} {
			r, ok := s.request(path)
			if !ok {
				if path != l.page && !l.built {
					continue // refused: never reached the server
				}
				t.Fatalf("%s not requested: %v", path, s.seen())
			}
			if r.ua != l.ua || r.crawlHeader != l.header {
				t.Errorf("%s: user agent %q, X-Crawl %q; want %q, %q", path, r.ua, r.crawlHeader, l.ua, l.header)
			}
		}
	}
}
