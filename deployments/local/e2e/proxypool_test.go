package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// TestCrawlThroughDyingProxies crawls the demo site with every fetch going
// through the proxy pool's proxies, kills two of the three proxies
// mid-crawl, and checks that the crawl still completes: every reachable
// allowed page is fetched and every HTML page has its document.
func TestCrawlThroughDyingProxies(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()

	var checks atomic.Int64 // every check passes through one proxy
	checkPage := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		checks.Add(1)
		fmt.Fprint(w, "proxy check page")
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.179:0")
	if err != nil {
		t.Fatal(err)
	}
	checkPage.Listener.Close()
	checkPage.Listener = ln
	checkPage.Start()
	defer checkPage.Close()

	var pxs []*proxytest.Proxy
	list := ""
	for i := range 3 {
		p := proxytest.Start(t, fmt.Sprintf("127.0.0.%d", 171+i), proxytest.Options{})
		pxs = append(pxs, p)
		list += p.Addr() + "\n"
	}
	file := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	apiLn, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	poolAPI := apiLn.Addr().String()
	apiLn.Close()

	e := startEnv(t, ctx, envConfig{
		site:  demosite.Config{Hosts: 4, PagesPerHost: 25, FirstHostOctet: 160},
		delay: e2eDelay,
		args: map[string][]string{
			"proxypool": {"--proxies-file", file, "--check-url", checkPage.URL + "/", "--check-expect", "proxy check page",
				"--check-interval", "300ms", "--check-timeout", "1s", "--api-addr", poolAPI},
			"fetcher": {"--use-proxies", "--retry-backoff", "200ms", "--max-retry-backoff", "1s", "--max-attempts", "20"},
		},
	})

	// Wait until the pool has published all three (its API is polled: the
	// pool is another process).
	deadline := time.NewTimer(30 * time.Second)
	poll := time.NewTicker(200 * time.Millisecond)
	for live := 0; live < 3; live = liveProxies(t, poolAPI) {
		select {
		case <-deadline.C:
			t.Fatalf("proxy pool has %d live proxies", live)
		case <-poll.C:
		}
	}
	poll.Stop()
	deadline.Stop()
	// Wait until every fetcher knows the three (its proxies_known gauge:
	// the fetchers are other processes).
	for _, proc := range e.p.Processes() {
		if !strings.HasPrefix(proc.Name(), "fetcher") {
			continue
		}
		deadline := time.NewTimer(30 * time.Second)
		poll := time.NewTicker(100 * time.Millisecond)
		for known := 0.0; known < 3; known = gaugeValue(t, e.p.AdminAddr(proc), "crawler_fetcher_proxies_known") {
			select {
			case <-deadline.C:
				t.Fatalf("%s knows %v proxies, want 3", proc.Name(), known)
			case <-poll.C:
			}
		}
		poll.Stop()
		deadline.Stop()
	}

	e.seed(ctx, e.site.Seeds(), "")
	// Kill two proxies once a quarter of the site is fetched.
	want := len(e.site.ReachableAllowed())
	for len(e.site.Requests()) < want/4 {
		select {
		case <-ctx.Done():
			t.Fatal("crawl never got going")
		case <-time.After(50 * time.Millisecond):
		}
	}
	before := pxs[2].Requests()
	pxs[0].Close()
	pxs[1].Close()
	t.Logf("killed 2 of 3 proxies after %d requests", len(e.site.Requests()))

	s := e.drain(ctx, 120*time.Second)
	e.stop()
	t.Logf("crawl drained: %s; proxy requests: %d, %d, %d (survivor %d after the kill)",
		s.Line(), pxs[0].Requests(), pxs[1].Requests(), pxs[2].Requests(), pxs[2].Requests()-before)

	dups := checkCoverage(t, e.site, false)
	docs := e.documents(ctx)
	for _, u := range e.site.HTMLPages() {
		if st, ok := docs[u]; !ok || st != 200 {
			t.Errorf("HTML page %s: document status %d (present %v), want 200", u, st, ok)
		}
	}
	through := pxs[0].Requests() + pxs[1].Requests() + pxs[2].Requests() - int(checks.Load())
	if through < len(e.site.Requests()) {
		t.Errorf("%d site requests but only %d crawl requests went through the proxies", len(e.site.Requests()), through)
	}
	if pxs[2].Requests() <= before {
		t.Errorf("the surviving proxy served nothing after the kill")
	}
	t.Logf("%d duplicate fetches", dups)
}

func liveProxies(t *testing.T, addr string) int {
	t.Helper()
	b, ok := getBody(t, "http://"+addr+"/proxies")
	var ps []struct {
		Alive bool `json:"alive"`
	}
	if !ok || json.Unmarshal(b, &ps) != nil {
		return 0
	}
	n := 0
	for _, p := range ps {
		if p.Alive {
			n++
		}
	}
	return n
}

// getBody returns the body of a GET of url; ok is false when the server
// did not answer (yet).
func getBody(t *testing.T, url string) (body []byte, ok bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, err == nil
}

// gaugeValue reads an unlabelled gauge from an admin server's /metrics
// (0 when it cannot be read yet).
func gaugeValue(t *testing.T, addr, name string) float64 {
	t.Helper()
	b, _ := getBody(t, "http://"+addr+"/metrics")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return 0
}
