package consume

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

// scriptSite serves a script-built page (/shell: an empty app root and a
// script that fetches /data/1.json and writes its text and links), an
// ordinary article, and a robots.txt that keeps /data/secret.json out.
func scriptSite() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("User-agent: *\nDisallow: /data/secret\n"))
	})
	page := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write([]byte(body))
		}
	}
	mux.HandleFunc("/shell", page(`<!DOCTYPE html><html><head><title>Shell</title></head><body><div id="app"></div>`+
		`<script src="/app.js"></script><noscript>Please enable JavaScript</noscript></body></html>`))
	mux.HandleFunc("/article", page(`<html><head><title>Article</title><script src="/analytics.js"></script></head><body><p>`+
		strings.Repeat("A paragraph the server rendered, with its words in the HTML. ", 10)+`<a href="/next">next</a></p></body></html>`))
	mux.HandleFunc("/app.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(`(async () => {
  const app = document.getElementById("app");
  const d = await (await fetch("/data/1.json")).json();
  const p = document.createElement("p"); p.textContent = d.text; app.append(p);
  for (const l of d.links) { const a = document.createElement("a"); a.href = l; a.textContent = l; app.append(a); }
  try { await fetch("/data/secret.json"); } catch (e) {}
})();`))
	})
	mux.HandleFunc("/data/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"text": "Text the script wrote.", "links": []string{"/built/a", "/built/b"}})
	})
	return mux
}

// TestRenderAuto: with --render auto, a script-built page is loaded in a
// real headless Chromium from its fetched body within its host's turn:
// its FetchedPage carries the DOM its script built (rendered), the site is
// asked for the page once and for the script and its data, robots.txt
// blocks the script's disallowed request, and the host's next request
// waits its delay after the load's last request. An ordinary page is
// not rendered.
func TestRenderAuto(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	s := startSite(t, "127.0.0.111", scriptSite())
	b, err := browser.New(context.WithoutCancel(ctx), browser.Options{Tabs: 1, PageTimeout: 20 * time.Second, SettleIdle: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })

	var mu sync.Mutex
	pages := map[string]*crawlv1.FetchedPage{}
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, kcfg.Topics().Fetched, func(_ kafka.Message, p *crawlv1.FetchedPage) {
		mu.Lock()
		pages[strings.TrimPrefix(p.GetUrl(), s.base)] = p
		mu.Unlock()
	})
	const delay = 300 * time.Millisecond
	writeRequests(ctx, t, kcfg, s, "r", map[string]uint64{},
		&crawlv1.FetchRequest{Url: "/shell"}, &crawlv1.FetchRequest{Url: "/article"})
	p := startFetcher(ctx, t, kcfg, store, "render", 100, Options{
		Politeness: politeness.Options{Delay: delay}, Renderer: b, Render: rendersniff.Auto})
	waitFor(ctx, t, "both pages published", func() bool { mu.Lock(); defer mu.Unlock(); return len(pages) == 2 })
	p.stop(t)
	stopFollow()
	_ = fg.Wait()

	shell, article := pages["/shell"], pages["/article"]
	if !shell.GetRendered() || shell.GetRenderOutcome() != string(browser.OutcomeSettled) {
		t.Errorf("shell: rendered %v outcome %q, want a settled render", shell.GetRendered(), shell.GetRenderOutcome())
	}
	for _, want := range []string{"Text the script wrote.", `<a href="/built/a">`, "<title>Shell</title>"} {
		if !strings.Contains(string(shell.GetBody()), want) {
			t.Errorf("the shell's published body lacks %q:\n%s", want, shell.GetBody())
		}
	}
	if article.GetRendered() || !strings.Contains(string(article.GetBody()), "A paragraph the server rendered") {
		t.Errorf("article: rendered %v; an ordinary page must go as fetched", article.GetRendered())
	}
	spans, hits := s.snapshot()
	for path, want := range map[string]int{"/shell": 1, "/article": 1, "/app.js": 1, "/data/1.json": 1, "/data/secret.json": 0, "/analytics.js": 0} {
		if hits[path] != want {
			t.Errorf("%s asked %d times, want %d (all: %v)", path, hits[path], want, hits)
		}
	}
	// The load is the host's turn: the next request starts a delay after
	// the load's last request ended (or the article came first).
	var loadEnd, articleStart time.Time
	for _, sp := range spans {
		switch sp.path {
		case "/data/1.json", "/app.js", "/shell":
			if sp.end.After(loadEnd) {
				loadEnd = sp.end
			}
		case "/article":
			articleStart = sp.start
		}
	}
	if shellStart := spanStart(spans, "/shell"); articleStart.After(shellStart) && articleStart.Sub(loadEnd) < delay-20*time.Millisecond {
		t.Errorf("the host's next request came %v after the load's last, want its delay %v", articleStart.Sub(loadEnd), delay)
	}
	if n := metricstest.Value(t, p.reg, "renders_total", "outcome", string(browser.OutcomeSettled)); n != 1 {
		t.Errorf("renders_total{outcome=settled} = %v, want 1", n)
	}
	if n := metricstest.Value(t, p.reg, "render_verdicts_total", "reason", rendersniff.ReasonHasText); n != 1 {
		t.Errorf("render_verdicts_total{reason=has_text} = %v, want 1 (the article)", n)
	}
}

// spanStart is when path was first asked.
func spanStart(spans []span, path string) time.Time {
	for _, sp := range spans {
		if sp.path == path {
			return sp.start
		}
	}
	return time.Time{}
}

// TestRenderSpec: a crawl's spec decides its pages' render mode over the
// fetcher's --render, per site: on a fleet that renders nothing, with a
// browser that starts at the first page that needs it, a crawl whose
// render.sites say always for one host has that host's pages rendered
// (the ordinary article too) and another host's kept as fetched (its own
// mode, never), while a crawl without a spec renders nothing.
func TestRenderSpec(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	a := startSite(t, "127.0.0.112", scriptSite())
	other := startSite(t, "127.0.0.113", scriptSite())
	b, err := browser.New(context.WithoutCancel(ctx), browser.Options{Tabs: 1, PageTimeout: 20 * time.Second, SettleIdle: 200 * time.Millisecond, Lazy: true})
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if b.PID() != 0 {
		t.Fatalf("a lazy browser started Chromium before its first load (pid %d)", b.PID())
	}
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "spec", Revision: 1, Render: &crawlv1.Render{
		Mode:  crawlv1.RenderMode_RENDER_MODE_NEVER,
		Sites: []*crawlv1.RenderSite{{Hosts: []string{"127.0.0.112"}, Mode: crawlv1.RenderMode_RENDER_MODE_ALWAYS}},
	}})

	var mu sync.Mutex
	pages := map[string]*crawlv1.FetchedPage{} // crawl + URL
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, kcfg.Topics().Fetched, func(_ kafka.Message, p *crawlv1.FetchedPage) {
		mu.Lock()
		pages[p.GetCrawlId()+" "+p.GetUrl()] = p
		mu.Unlock()
	})
	writeRequests(ctx, t, kcfg, a, "spec", map[string]uint64{}, &crawlv1.FetchRequest{Url: "/shell"}, &crawlv1.FetchRequest{Url: "/article"})
	writeRequests(ctx, t, kcfg, other, "spec", map[string]uint64{"/shell": 10}, &crawlv1.FetchRequest{Url: "/shell"})
	writeRequests(ctx, t, kcfg, a, "fleet", map[string]uint64{"/shell": 20}, &crawlv1.FetchRequest{Url: "/shell"})
	p := startFetcher(ctx, t, kcfg, store, "render-spec", 100, Options{
		Politeness: politeness.Options{Delay: 20 * time.Millisecond}, Renderer: b, Render: rendersniff.Never, Crawls: specs})
	waitFor(ctx, t, "four pages published", func() bool { mu.Lock(); defer mu.Unlock(); return len(pages) == 4 })
	p.stop(t)
	stopFollow()
	_ = fg.Wait()

	for key, want := range map[string]bool{
		"spec " + a.base + "/shell":     true,
		"spec " + a.base + "/article":   true, // always: an ordinary page too
		"spec " + other.base + "/shell": false,
		"fleet " + a.base + "/shell":    false,
	} {
		pg := pages[key]
		if pg.GetRendered() != want {
			t.Errorf("%s: rendered %v (%q), want %v", key, pg.GetRendered(), pg.GetRenderOutcome(), want)
		}
	}
	if shell := pages["spec "+a.base+"/shell"]; !strings.Contains(string(shell.GetBody()), "Text the script wrote.") {
		t.Errorf("the rendered shell lacks its script's text:\n%s", shell.GetBody())
	}
	if st := b.Stats(); st.Starts != 1 || st.Loads != 2 {
		t.Errorf("browser: %d starts and %d loads, want 1 start (at the first page that needs it) and 2 loads", st.Starts, st.Loads)
	}
	if n := metricstest.Value(t, p.reg, "render_verdicts_total", "reason", rendersniff.ReasonNever); n != 2 {
		t.Errorf("render_verdicts_total{reason=never} = %v, want 2", n)
	}
}
