package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

// startServer serves h on ip (a loopback address) and returns its base URL
// and a function returning the requests it had, by path and query.
func startServer(t *testing.T, ip string, h http.Handler) (base string, hits func() map[string]int) {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.RequestURI()]++
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(seen))
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// TestSERPSeedsIgnoreRobots crawls keyword result pages of a local search
// engine whose robots.txt disallows /search, as the real engines' do,
// through the crawl-jobs API and every service. The crawl that sets
// politeness.serp_ignore_robots fetches its result page, follows only the
// result links (the parser's --serp-config), and still obeys robots.txt
// everywhere else: its own seed on the engine's /search and a disallowed
// page of a result site are robots-denied. A crawl of the same keyword
// without the flag fetches nothing. Both end finished.
func TestSERPSeedsIgnoreRobots(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()

	results, resultHits := startServer(t, "127.0.0.171", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
		case "/r1":
			fmt.Fprint(w, `<html><body><a href="/private/x">private</a> <a href="/r3">three</a></body></html>`)
		default:
			fmt.Fprintf(w, "<html><body><p>result %s</p></body></html>", r.URL.Path)
		}
	}))
	engine, engineHits := startServer(t, "127.0.0.170", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /search\n")
		case "/search":
			fmt.Fprintf(w, `<html><body><div class="ad"><a href="%[1]s/ad">ad</a></div>
<div class="res"><a href="%[1]s/r1">one</a></div><div class="res"><a href="%[1]s/r2">two</a></div>
<a href="/search?q=%[2]s&p=2">next</a> <a href="/about">about</a></body></html>`, results, r.URL.Query().Get("q"))
		default:
			fmt.Fprint(w, "<html><body>engine</body></html>")
		}
	}))
	serpConfig := filepath.Join(t.TempDir(), "serp.json")
	if err := os.WriteFile(serpConfig, []byte(`[{"name": "local", "results": "div.res a[href]"}]`), 0o600); err != nil {
		t.Fatal(err)
	}

	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 1, PagesPerHost: 1, FirstHostOctet: 172}, delay: e2eDelay,
		args: map[string][]string{"parser": {"--serp-config", serpConfig}}})
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := e.p.StartService(ctx, "seeder", "seeder-api", []string{"serve", "--api-addr", addr, "--api-token", jobsToken}); err != nil {
		t.Fatalf("start seeder serve: %v", err)
	}
	api := jobsAPI{t: t, base: "http://" + addr}
	keywords := `"keywords":{"terms":["solar"],"templates":[{"name":"local","url":"` + engine + `/search?q={query}"}]}`
	exempt, plain := e.crawlID+"-exempt", e.crawlID+"-plain"
	for _, body := range []string{
		`{"crawl_id":"` + exempt + `","seeds":["` + engine + `/search?q=mine"],` + keywords + `,"politeness":{"serp_ignore_robots":true}}`,
		`{"crawl_id":"` + plain + `",` + keywords + `}`,
	} {
		if code := api.do(ctx, http.MethodPost, "/v1/crawls", body, nil); code != http.StatusCreated {
			t.Fatalf("submit %s: %d", body, code)
		}
	}
	for _, id := range []string{exempt, plain} {
		var v crawlView
		for v.Status != "drained" {
			select {
			case <-ctx.Done():
				t.Fatalf("crawl %s never drained; last %+v %+v", id, v, v.Counts)
			case <-time.After(300 * time.Millisecond):
			}
			if code := api.do(ctx, http.MethodGet, "/v1/crawls/"+id, "", &v); code != http.StatusOK {
				t.Fatalf("get %s: %d", id, code)
			}
		}
		if !v.Counts.Finished || v.Counts.Pending != 0 {
			t.Errorf("crawl %s drained with counts %+v, want finished", id, *v.Counts)
		}
	}

	kinds := func(crawl string) map[string]string {
		rows, err := e.p.Store.Conn().Query(ctx, "SELECT url, error_kind FROM fetch_log FINAL WHERE crawl_id = ? AND final", crawl)
		if err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var u, k string
			if err := rows.Scan(&u, &k); err != nil {
				t.Fatal(err)
			}
			out[u] = k
		}
		return out
	}
	wantExempt := map[string]string{
		engine + "/search?q=solar": "",              // the result page of the crawl's keyword
		engine + "/search?q=mine":  "robots_denied", // a seed of the user's own, not a result page
		results + "/r1":            "", results + "/r2": "", results + "/r3": "",
		results + "/private/x": "robots_denied", // the exception is for result pages only
	}
	if got := kinds(exempt); fmt.Sprint(got) != fmt.Sprint(wantExempt) {
		t.Errorf("crawl with serp_ignore_robots: outcomes %v, want %v", got, wantExempt)
	}
	wantPlain := map[string]string{engine + "/search?q=solar": "robots_denied"}
	if got := kinds(plain); fmt.Sprint(got) != fmt.Sprint(wantPlain) {
		t.Errorf("crawl without it: outcomes %v, want %v", got, wantPlain)
	}
	if h := engineHits(); h["/search?q=solar"] != 1 || len(h) != 2 {
		t.Errorf("engine requests %v, want its robots.txt and one result page", h)
	}
	if h := resultHits(); h["/private/x"] != 0 || h["/ad"] != 0 || h["/r1"] != 1 {
		t.Errorf("result site requests %v, want /r1, /r2, /r3 and robots.txt, never /private/x nor the ad", h)
	}
	e.stop()
}
