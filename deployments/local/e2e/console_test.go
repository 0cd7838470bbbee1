package e2e_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// chromium returns the headless browser the console test drives: $CHROME
// when set, else the first of Debian's chromium and its usual other names
// on the PATH.
func chromium() string {
	if p := os.Getenv("CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is one headless Chromium tab (its chromedp context is passed to
// every method) with the test's deadlines.
type browser struct {
	t    *testing.T
	base string
	// shots, when not empty, is a second directory for the screenshots
	// ($TRAWL_CONSOLE_SCREENSHOTS: docs/ refreshes them).
	shots string
}

// run runs steps, failing the test with what after 20 s.
func (b *browser) run(ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	get(ctx, b.t, what, chromedp.Steps(steps...))
}

// get runs one action returning a value, failing t with what after 20 s.
func get[T any](ctx context.Context, t *testing.T, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

// text is the text of the element sel, "" when there is none. It is
// read in one evaluation: the page's script may swap the element between
// a query and a read.
func (b *browser) text(ctx context.Context, sel string) string {
	b.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%s);return e?e.innerText:"";})()`, q)
	return strings.TrimSpace(get(ctx, b.t, "read "+sel, chromedp.Evaluate[string](js)))
}

// click clicks the element sel in one evaluation (the page's script may
// swap a live element between a query and a click).
func (b *browser) click(ctx context.Context, sel string) {
	b.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%s);if(!e){return false;}e.click();return true;})()`, q)
	if !get(ctx, b.t, "click "+sel, chromedp.Evaluate[bool](js)) {
		b.t.Fatalf("browser: no %s to click", sel)
	}
}

// location is the URL of the page.
func (b *browser) location(ctx context.Context) string {
	b.t.Helper()
	return get(ctx, b.t, "location", chromedp.Location())
}

// until polls cond every 250 ms until it holds or timeout passes.
func (b *browser) until(ctx context.Context, what string, timeout time.Duration, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			b.t.Fatalf("browser: %s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("browser: %s: %v", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// counter is the number the counter id shows, -1 when it shows none.
func (b *browser) counter(ctx context.Context, id string) int {
	b.t.Helper()
	n, err := strconv.Atoi(b.text(ctx, "#"+id))
	if err != nil {
		return -1
	}
	return n
}

// shot saves a screenshot of the viewport (PNG) into the test's artifact
// directory, and into shots when set.
func (b *browser) shot(ctx context.Context, name string) {
	b.t.Helper()
	png := get(ctx, b.t, "screenshot "+name, chromedp.CaptureScreenshot())
	for _, dir := range []string{b.t.ArtifactDir(), b.shots} {
		if dir == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil { // a screenshot for people to look at
			b.t.Fatal(err)
		}
	}
}

// TestConsoleBrowser drives the operator console of `seeder serve` with
// headless Chromium against a real crawl (the demo site, the pipeline on
// the embedded broker and ClickHouse): log in with the token, submit a
// form with errors and see each at its field, submit the crawl through the
// form, watch its counters rise on their own (the fetch-and-swap script),
// pause and resume it through the confirmation, see it drain, open a
// host's page (robots.txt, fetch log) and a URL's story. Screenshots of
// each page go to the test's artifact directory (go test -artifacts).
func TestConsoleBrowser(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		t.Skip("no chromium binary on the PATH (apt-get install chromium, or set $CHROME): the console's browser test needs one")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	// Two hosts of 40 pages, 400 ms apart: a crawl of about 16 s, long
	// enough to pause while it runs.
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 2, PagesPerHost: 40, FirstHostOctet: 170}, delay: 400 * time.Millisecond,
		args: map[string][]string{"parser": {"--store-links"}}}) // as the launcher's -console does
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := e.p.StartServiceEnv(ctx, "seeder", "seeder-console", []string{"serve", "--api-addr", addr, "--console-refresh", "1s"},
		[]string{"CRAWLER_API_TOKEN=" + jobsToken}); err != nil {
		t.Fatalf("start seeder serve: %v", err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	b := &browser{t: t, base: "http://" + addr, shots: os.Getenv("TRAWL_CONSOLE_SCREENSHOTS")}
	start := time.Now()
	// The first action starts the browser: it runs on the browser's own
	// context, as a timeout there would stop the browser.
	if err := chromedp.Do(bctx, chromedp.Navigate(b.base+"/ui/")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("chromium started in %s", time.Since(start).Round(time.Millisecond))

	// Without a session: the login form (401), then the token.
	b.run(bctx, "the login form", chromedp.WaitVisible(chromedp.CSS("#token")))
	b.shot(bctx, "console-login")
	b.run(bctx, "log in", chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), jobsToken), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/new"]`)))
	if loc := b.location(bctx); strings.Contains(loc, jobsToken) {
		t.Fatalf("the token is in the URL %s", loc)
	}

	// A form with errors: each at its field.
	b.run(bctx, "open the form", chromedp.Navigate(b.base+"/ui/new"), chromedp.WaitVisible(chromedp.CSS("#submit-crawl")),
		chromedp.SetValue(chromedp.CSS("#f-crawl_id"), "bad id!"),
		chromedp.SetValue(chromedp.CSS("#f-seeds_text"), "not a url"),
		chromedp.SetValue(chromedp.CSS("#f-politeness-delay"), "fast"),
		chromedp.SetValue(chromedp.CSS("#f-limits-max_pages"), "-1"),
		chromedp.Click(chromedp.CSS("#submit-crawl")), chromedp.WaitVisible(chromedp.CSS("#error-summary")))
	for sel, want := range map[string]string{
		"#f-crawl_id-msg .field-error":         "want 1-64",
		"#f-limits-max_pages-msg .field-error": "whole number",
	} {
		if got := b.text(bctx, sel); !strings.Contains(got, want) {
			t.Errorf("error at %s: %q, want %q", sel, got, want)
		}
	}
	b.shot(bctx, "console-form-errors")

	// The crawl, submitted through the form.
	for sel, v := range map[string]string{"#f-crawl_id": e.crawlID, "#f-name": "console e2e", "#f-seeds_text": strings.Join(e.site.Seeds(), "\n"),
		"#f-limits-max_depth": "50", "#f-limits-max_pages": "1000"} {
		b.run(bctx, "set "+sel, chromedp.SetValue(chromedp.CSS(sel), v))
	}
	b.run(bctx, "clear the delay", chromedp.Clear(chromedp.CSS("#f-politeness-delay")))
	b.run(bctx, "submit the crawl", chromedp.Click(chromedp.CSS("#submit-crawl")), chromedp.WaitVisible(chromedp.CSS("#c-fetched")))
	if loc := b.location(bctx); !strings.HasSuffix(loc, "/ui/crawls/"+e.crawlID) {
		t.Fatalf("after submitting: at %s", loc)
	}
	// The counters rise without a reload (the page swaps its live parts).
	first := 0
	b.until(bctx, "a first page fetched", 60*time.Second, func() bool { first = b.counter(bctx, "c-fetched"); return first > 0 })
	b.until(bctx, "the counter rising on its own", 30*time.Second, func() bool { return b.counter(bctx, "c-fetched") > first })
	b.shot(bctx, "console-crawl")

	// Pause and resume through the confirmation page.
	b.click(bctx, "#pause")
	b.run(bctx, "pause", chromedp.WaitVisible(chromedp.CSS("#confirm")))
	b.shot(bctx, "console-confirm")
	b.run(bctx, "confirm pause", chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#resume")))
	if s := b.text(bctx, "#crawl-state"); s != "paused" {
		t.Errorf("state after pause: %q", s)
	}
	b.click(bctx, "#resume")
	b.run(bctx, "resume", chromedp.WaitVisible(chromedp.CSS("#confirm")),
		chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#pause")))
	b.until(bctx, "the crawl drained", 90*time.Second, func() bool { return b.text(bctx, "#crawl-state") == "drained" })
	if got, want := b.counter(bctx, "c-documents"), len(e.site.HTMLPages()); got != want {
		t.Errorf("documents %d, want the site's %d HTML pages", got, want)
	}
	b.run(bctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#c-fetched")))
	b.shot(bctx, "console-crawl-drained")

	// A host: politeness, robots.txt as fetched, fetch log.
	b.click(bctx, `#tables a[href*="/hosts/"]`)
	b.run(bctx, "open a host", chromedp.WaitVisible(chromedp.CSS("#h-robots")))
	if got := b.text(bctx, "#fetchlog"); !strings.Contains(got, "200") {
		t.Errorf("host fetch log shows no 200: %.300s", got)
	}
	if got := b.text(bctx, "pre.robots"); !strings.Contains(got, "Disallow") {
		t.Errorf("host robots.txt: %q, want its rules", got)
	}
	b.shot(bctx, "console-host")

	// A URL's story, from the documents table.
	b.run(bctx, "the crawl again", chromedp.Navigate(b.base+"/ui/crawls/"+e.crawlID), chromedp.WaitVisible(chromedp.CSS("#docs")))
	// One of the site's pages (/secN/pageM.html), each linked from a page:
	// the newest document can be a host's /landing, which only a redirect
	// leads to, and whose story has no linking page.
	b.click(bctx, `#docs td.url a[href*="%2Fsec"]`)
	b.run(bctx, "open a URL", chromedp.WaitVisible(chromedp.CSS("#doc-title")))
	if got := b.text(bctx, "#admitted"); !strings.Contains(got, "Admitted at depth") {
		t.Errorf("story: %q", got)
	}
	// A page links to it.
	if got := b.text(bctx, "#discovered"); !strings.Contains(got, "Pages linking to it") {
		t.Errorf("story, discovered: %q", got)
	}
	if got := b.text(bctx, "#attempts"); !strings.Contains(got, "200") {
		t.Errorf("story attempts: %.300s", got)
	}
	b.shot(bctx, "console-url")

	b.run(bctx, "the crawls", chromedp.Navigate(b.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-crawl=%q]`, e.crawlID))))
	if s := b.text(bctx, fmt.Sprintf(`tr[data-crawl=%q] .state`, e.crawlID)); s != "drained" {
		t.Errorf("the crawls list shows the drained crawl %q", s)
	}
	b.shot(bctx, "console-crawls")
	t.Logf("browser part took %s", time.Since(start).Round(time.Millisecond))
}

// TestLauncherConsole runs the launcher with --console, as the README's
// `make crawl ARGS=--console` does: it prints the console's address and
// the token file, the console refuses a request without a session and
// shows the crawl after a login with the file's token, and it stays up
// after the crawl drained until the launcher is interrupted.
func TestLauncherConsole(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 1, PagesPerHost: 10, FirstHostOctet: 176})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	consoleAddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	ch := chtest.Config(t)
	const crawlID = "e2e-launcher-console"
	args := []string{"--seed", site.Seeds()[0], "--crawl-id", crawlID, "--allow-private", "--delay", e2eDelay.String(),
		"--data-dir", filepath.Join(dir, "data"), "--timeout", "100s", "--console", "--console-addr", consoleAddr,
		"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database}
	var cfg launcher.Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("flags: %v", err)
	}
	cfg.Bins = serviceBins(t)
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- launcher.Run(runCtx, cfg, strings.NewReader(""), out) }()
	printed := func() string { b, _ := os.ReadFile(out.Name()); return string(b) }
	waitFor := func(what string) {
		t.Helper()
		deadline := time.Now().Add(100 * time.Second)
		for !strings.Contains(printed(), what) {
			select {
			case err := <-done:
				t.Fatalf("launcher ended before printing %q: %v\n%s\n%s", what, err, printed(), tails(filepath.Join(dir, "data")))
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("launcher never printed %q:\n%s", what, printed())
			}
		}
	}
	tokenFile := filepath.Join(dir, "data", launcher.ConsoleTokenFile)
	waitFor("console: http://" + consoleAddr + "/ui/ (log in with the token in " + tokenFile)
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(tokenFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want mode 0600", fi.Mode(), err)
	}
	if strings.Contains(printed(), strings.TrimSpace(string(token))) {
		t.Error("the launcher printed the token")
	}
	base := "http://" + consoleAddr
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Jar: jar}
	do := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := do(http.MethodGet, "/ui/", nil); code != http.StatusUnauthorized {
		t.Errorf("console without a session: %d, want 401", code)
	}
	if code, body := do(http.MethodPost, "/ui/login", url.Values{"token": {strings.TrimSpace(string(token))}}); code != http.StatusOK || !strings.Contains(body, "New crawl") {
		t.Errorf("login with the token file's token: %d", code)
	}
	// The one-shot seeder publishes the crawl's spec after the console
	// started: look for it once the crawl drained.
	waitFor("the console stays up at http://" + consoleAddr + "/ui/")
	if code, body := do(http.MethodGet, "/ui/", nil); code != http.StatusOK || !strings.Contains(body, crawlID) {
		t.Errorf("console after the crawl drained: %d", code)
	}
	if code, body := do(http.MethodGet, "/ui/crawls/"+crawlID, nil); code != http.StatusOK || !strings.Contains(body, `<dd id="c-documents">`) {
		t.Errorf("the crawl's page: %d", code)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("launcher: %v\n%s", err, printed())
		}
	case <-ctx.Done():
		t.Fatal("the launcher did not stop when interrupted")
	}
	t.Logf("launcher output:\n%s", printed())
}
