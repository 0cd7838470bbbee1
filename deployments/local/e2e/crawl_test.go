package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

const e2eDelay = 150 * time.Millisecond

// jitter is how much earlier than the fetcher's delay the site may see a
// request: the fetcher stamps the time before connecting, the site after
// accepting, and the two clocks are the same, so only scheduling noise.
const jitter = 10 * time.Millisecond

func TestCrawlEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	start := time.Now()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 5, PagesPerHost: 50, FirstHostOctet: 20}, delay: e2eDelay})
	e.seed(ctx, e.site.Seeds(), "")
	s := e.drain(ctx, 120*time.Second)
	e.stop()
	t.Logf("crawl drained: %s; total %s", s.Line(), time.Since(start).Round(time.Millisecond))

	// Every reachable allowed page exactly once, nothing else, nothing
	// disallowed.
	if dups := checkCoverage(t, e.site, true); dups > 0 {
		t.Errorf("%d duplicate fetches in an undisturbed crawl", dups)
	}

	// Politeness: no two requests to one host closer than the delay.
	reqs := e.site.Requests()
	if gap, where := minGapPerHost(reqs); gap < e2eDelay-jitter {
		t.Errorf("two requests to one host %s apart (%s), delay is %s", gap, where, e2eDelay)
	} else {
		t.Logf("smallest gap between two requests to one host: %s", gap)
	}

	// One fetch_log row per request; robots-denied rows without a request.
	rows := e.fetchLog(ctx)
	requested := pageRequests(reqs)
	disallowed := map[string]bool{}
	for _, u := range e.site.Disallowed() {
		disallowed[u] = true
	}
	rowsPerURL := map[string]int{}
	denied := map[string]bool{}
	for _, r := range rows {
		if strings.HasSuffix(r.URL, demosite.PathRobots) {
			continue
		}
		if r.ErrorKind == "robots_denied" {
			denied[r.URL] = true
			if requested[r.URL] > 0 {
				t.Errorf("robots_denied row for %s, which was requested", r.URL)
			}
			if !disallowed[r.URL] {
				t.Errorf("robots_denied row for allowed URL %s", r.URL)
			}
			continue
		}
		rowsPerURL[r.URL]++
	}
	for u, n := range requested {
		if rowsPerURL[u] != n {
			t.Errorf("%s: %d fetch_log rows, %d requests", u, rowsPerURL[u], n)
		}
	}
	for u, n := range rowsPerURL {
		if requested[u] == 0 {
			t.Errorf("%s: %d fetch_log rows (error kind or status) but no request", u, n)
		}
	}
	for u := range disallowed {
		if !denied[u] {
			t.Errorf("disallowed %s has no robots_denied row", u)
		}
	}

	// A document per HTML page fetched with 200, none for anything else.
	docs := e.documents(ctx)
	html := map[string]bool{}
	for _, u := range e.site.HTMLPages() {
		html[u] = true
		if st, ok := docs[u]; !ok || st != 200 {
			t.Errorf("HTML page %s: document status %d (present %v), want 200", u, st, ok)
		}
	}
	for u := range docs {
		if !html[u] {
			t.Errorf("document for non-page %s", u)
		}
	}
	t.Logf("%d requests (%d robots.txt), %d fetch_log rows, %d robots_denied, %d documents",
		len(reqs), len(reqs)-sum(requested), len(rows), len(denied), len(docs))
}

func TestCrawlSurvivesKills(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 170*time.Second)
	defer cancel()
	start := time.Now()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 5, PagesPerHost: 50, FirstHostOctet: 40}, delay: e2eDelay})
	total := len(e.site.ReachableAllowed())
	e.seed(ctx, e.site.Seeds(), "")

	mon := e.p.Monitor(e.crawlID)
	waitFetched := func(n int) {
		t.Helper()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if len(pageRequests(e.site.Requests())) >= n {
				return
			}
			if err := e.p.Check(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
				s, _ := mon.Poll(context.WithoutCancel(ctx))
				t.Fatalf("waiting for %d fetched pages: %v (%s)", n, ctx.Err(), s.Line())
			case <-tick.C:
			}
		}
	}
	killRestart := func(name string) {
		t.Helper()
		proc := e.p.Process(name)
		if proc == nil {
			t.Fatalf("no process %s", name)
		}
		before := len(pageRequests(e.site.Requests()))
		if err := proc.Kill(); err != nil {
			t.Fatalf("kill %s: %v", name, err)
		}
		if err := e.p.Restart(ctx, proc); err != nil {
			t.Fatalf("restart %s: %v", name, err)
		}
		t.Logf("SIGKILLed %s at %d/%d pages; restarted and ready", name, before, total)
	}

	waitFetched(total * 3 / 10)
	killRestart("fetcher-0")
	waitFetched(total * 6 / 10)
	killRestart("scheduler")

	s := e.drain(ctx, 140*time.Second)
	e.stop()
	dups := checkCoverage(t, e.site, false)
	msg := fmt.Sprintf("crawl with fetcher and scheduler SIGKILLed drained: %s; %d reachable pages, %d duplicate fetches; total %s",
		s.Line(), total, dups, time.Since(start).Round(time.Millisecond))
	t.Log(msg)
	fmt.Println("e2e:", msg)

	docs := e.documents(ctx)
	for _, u := range e.site.HTMLPages() {
		if st, ok := docs[u]; !ok || st != 200 {
			t.Errorf("HTML page %s: document status %d (present %v), want 200", u, st, ok)
		}
	}
}

// TestCrawlHealsKilledFetcher runs the pipeline the way the launcher does,
// with its services supervised, SIGKILLs the fetcher mid-crawl and does
// not restart it: the supervisor does, and the crawl still fetches every
// reachable page.
func TestCrawlHealsKilledFetcher(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	start := time.Now()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 4, PagesPerHost: 40, FirstHostOctet: 120}, delay: e2eDelay, autoRestart: true})
	total := len(e.site.ReachableAllowed())
	e.seed(ctx, e.site.Seeds(), "")

	e.waitRequests(ctx, total*3/10)
	fetcher := e.p.Process("fetcher-0")
	before := len(pageRequests(e.site.Requests()))
	if err := fetcher.Kill(); err != nil {
		t.Fatalf("kill fetcher-0: %v", err)
	}
	t.Logf("SIGKILLed fetcher-0 at %d/%d pages; left to the supervisor", before, total)

	s := e.drain(ctx, 120*time.Second)
	e.stop()
	dups := checkCoverage(t, e.site, false)
	if got := e.p.Restarts(); got["fetcher-0"] != 1 || got["scheduler"] != 0 || got["parser"] != 0 || got["proxypool"] != 0 {
		t.Errorf("restarts %v, want fetcher-0 once and nothing else", got)
	}
	evs := e.supervisorEvents()
	if len(evs) != 1 || evs[0].Name != "fetcher-0" || evs[0].Restart != 1 || evs[0].Err == nil || !strings.Contains(evs[0].Err.Error(), "killed") {
		t.Errorf("supervisor events %v, want fetcher-0 killed and restarted once", evs)
	}
	msg := fmt.Sprintf("crawl with fetcher SIGKILLed and healed by its supervisor drained: %s; %d reachable pages, %d duplicate fetches; total %s",
		s.Line(), total, dups, time.Since(start).Round(time.Millisecond))
	t.Log(msg)
	fmt.Println("e2e:", msg)
}

func TestBadInputs(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	start := time.Now()
	const maxBody = 256 << 10
	e := startEnv(t, ctx, envConfig{
		site:  demosite.Config{Hosts: 1, PagesPerHost: 3, FirstHostOctet: 60, BigBytes: 3 * maxBody, SlowDelay: 20 * time.Second},
		delay: 100 * time.Millisecond,
		args: map[string][]string{"fetcher": {
			"--fetch-timeout", "1s", "--connect-timeout", "1s", "--max-body-bytes", fmt.Sprint(maxBody),
		}},
	})

	// A port on another loopback address with nothing listening.
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.61:0")
	if err != nil {
		t.Fatalf("reserve a port: %v", err)
	}
	unreachable := "http://" + ln.Addr().String() + "/"
	ln.Close()

	slow := e.site.URL(0, demosite.PathSlow)
	big := e.site.URL(0, demosite.PathBig)
	data := e.site.URL(0, demosite.PathData)
	const badLine = 3
	seeds := strings.Join([]string{
		slow,
		big,
		"this is :: not a url",
		data,
		unreachable,
	}, "\n") + "\n"
	seedsFile := filepath.Join(t.TempDir(), "seeds.txt")
	if err := os.WriteFile(seedsFile, []byte(seeds), 0o644); err != nil {
		t.Fatal(err)
	}
	seeder := e.seed(ctx, nil, seedsFile)
	log := seeder.LogTail(200)
	if !regexp.MustCompile(fmt.Sprintf(`line\W{0,3}%d\b`, badLine)).MatchString(log) {
		t.Errorf("seeder log does not name bad line %d:\n%s", badLine, log)
	}

	s := e.drain(ctx, 120*time.Second)
	e.stop() // every service must exit 0 on SIGTERM
	t.Logf("crawl drained: %s; total %s", s.Line(), time.Since(start).Round(time.Millisecond))

	byURL := map[string][]fetchRow{}
	for _, r := range e.fetchLog(ctx) {
		byURL[r.URL] = append(byURL[r.URL], r)
	}
	tests := []struct {
		name     string
		url      string
		wantKind string
		ctype    string
	}{
		{"unreachable host", unreachable, "connect", ""},
		{"slow page", slow, "timeout", ""},
		{"oversized body", big, "body_too_large", ""},
		{"non-HTML", data, "", "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := byURL[tt.url]
			if len(rows) == 0 {
				t.Fatalf("no fetch_log row for %s", tt.url)
			}
			for _, r := range rows {
				if r.ErrorKind != tt.wantKind {
					t.Errorf("attempt %d: error kind %q, want %q", r.Attempt, r.ErrorKind, tt.wantKind)
				}
				if tt.ctype != "" && !strings.HasPrefix(r.ContentType, tt.ctype) {
					t.Errorf("attempt %d: content type %q, want %q", r.Attempt, r.ContentType, tt.ctype)
				}
			}
			t.Logf("%d attempt(s) for %s", len(rows), tt.url)
		})
	}
	docs := e.documents(ctx)
	for _, u := range []string{data, big, slow, unreachable} {
		if _, ok := docs[u]; ok && u != big {
			t.Errorf("document for %s, which has no HTML page", u)
		}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
