//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// renderWeb is TestRenderScriptBuiltSites's web: 8 sites of 6 articles,
// half of them built in the browser (an HTML shell, /app.js and
// /data/<page>.json: websim's script-built hosts).
var renderWeb = webConfig{Hosts: 8, Articles: 6, MinLinks: 4, MaxLinks: 8, ScriptShare: 0.5}

// TestRenderScriptBuiltSites crawls a web half of whose sites build their
// pages with a script, with one crawler host whose fetcher renders as the
// bare-host guide says to turn it on: the render settings commented in
// deployments/bare/env/fetcher.env, Debian's chromium. It requires every
// content page requested (the script-built sites' links exist only in
// the DOM their scripts build), every stored document of those sites with
// the text and links of its rendered DOM, no page request of a host
// closer than the delay to the host's previous request (the browser's
// requests of a load included: the delay runs from the load's end), no
// page asked for twice, and the fetcher's metrics: a settled render per
// script-built document, none hung or failed. It logs the peak memory of
// the fetcher's Chromium processes.
//
// Found by this test: Chromium 156 blocked every request a page
// fulfilled from the fetched body makes to a private address (Local
// Network Access: the fulfilled document has no remote address, so it
// counts as public), and the lab's web is on 10.78.0.0/16: the renders
// settled with the empty shell. The fetcher's browser now passes
// --disable-features=LocalNetworkAccessChecks.
func TestRenderScriptBuiltSites(t *testing.T) {
	l := needLab(t)
	guide, err := commentedEnv(filepath.Join(l.repo, "deployments", "bare", "env", "fetcher.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"CRAWLER_RENDER", "CRAWLER_RENDER_TABS", "CRAWLER_CHROMIUM"} {
		if guide[k] == "" {
			t.Fatalf("deployments/bare/env/fetcher.env: no commented %s= line (the guide's rendering settings)", k)
		}
	}
	if _, err := os.Stat(guide["CRAWLER_CHROMIUM"]); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the guide's chromium: %v (.ci/run installs Debian's chromium)", err)
		}
		t.Skipf("the guide's chromium: %v (apt-get install chromium)", err)
	}
	tabs, err := strconv.Atoi(guide["CRAWLER_RENDER_TABS"])
	if err != nil {
		t.Fatalf("deployments/bare/env/fetcher.env: CRAWLER_RENDER_TABS: %v", err)
	}
	ctx := t.Context()
	c := startCrawl(t, crawlConfig{crawlers: 1, web: renderWeb, fetcherEnv: []string{
		"CRAWLER_RENDER=" + guide["CRAWLER_RENDER"],
		"CRAWLER_RENDER_TABS=" + guide["CRAWLER_RENDER_TABS"],
		"CRAWLER_CHROMIUM=" + guide["CRAWLER_CHROMIUM"],
	}})
	if len(c.ready.ScriptBuilt) == 0 {
		t.Fatalf("the web has no script-built site (--script-share %v)", renderWeb.ScriptShare)
	}
	mem := sampleMemory(ctx, crawlers[0], "fetcher")
	c.drain(ctx, 90*time.Second)
	peak := mem.stop()
	o := c.outcome(ctx)
	metrics, err := scrapeMetrics(ctx, c.service(crawlers[0], "fetcher").admin)
	if err != nil {
		t.Fatal(err)
	}
	c.stop()
	for k, v := range metrics {
		if strings.HasPrefix(k, "crawler_fetcher_render") && !strings.Contains(k, "_bucket") {
			t.Logf("%s %v", k, v)
		}
	}

	if o.Missing > 0 {
		t.Errorf("%d of %d content pages never requested: the script-built sites' links were not followed", o.Missing, o.Stats.PagesTotal)
	}
	if len(o.Unfetched) > 0 {
		t.Errorf("%d admitted URLs without a fetch: %v", len(o.Unfetched), o.Unfetched[:min(10, len(o.Unfetched))])
	}
	if o.Stats.Offsite > 0 || o.Stats.Disallowed > 0 {
		t.Errorf("%d off-site and %d disallowed requests", o.Stats.Offsite, o.Stats.Disallowed)
	}
	resources := c.webResources(ctx)
	p := pagePoliteness(resources)
	if p.violations > tolerate(2) {
		t.Errorf("%d page requests closer than the delay (%s) to their host's previous request, the browser's included; closest %s apart (%s)",
			p.violations, labDelay, p.minGap, p.minGapAt)
	}
	if len(p.repeated) > tolerate(2) {
		t.Errorf("pages requested again after a final answer: %v", p.repeated[:min(10, len(p.repeated))])
	}

	// What the parser stored of the script-built sites: every HTML page
	// with its links and more text than the shell's.
	prefixes := make([]string, len(c.ready.ScriptBuilt))
	for i, h := range c.ready.ScriptBuilt {
		prefixes[i] = "http://" + h + "/"
	}
	var docs, shells, unrendered uint64
	like := make([]string, len(prefixes))
	args := []any{c.id}
	for i, p := range prefixes {
		like[i] = "url LIKE ?"
		args = append(args, p+"%")
	}
	if err := c.store.Conn().QueryRow(ctx, `SELECT count(), countIf(outlinks = 0 OR length(text) < 40), countIf(rendered = '')
		FROM documents FINAL WHERE crawl_id = ? AND status = 200 AND content_type LIKE 'text/html%'
		AND (`+strings.Join(like, " OR ")+`)`, args...).Scan(&docs, &shells, &unrendered); err != nil {
		t.Fatalf("query documents: %v", err)
	}
	if docs == 0 || shells > 0 || unrendered > 0 {
		byKind := map[string]int{}
		for _, r := range resources {
			byKind[r.Kind] += len(r.Hits)
		}
		var sample string
		_ = c.store.Conn().QueryRow(ctx, `SELECT concat(url, ' ', rendered, ': ', substring(text, 1, 200)) FROM documents FINAL
			WHERE crawl_id = ? AND `+like[0]+` ORDER BY url LIMIT 1`, c.id, prefixes[0]+"%").Scan(&sample) // a diagnostic
		t.Errorf("script-built sites: %d HTML documents, %d of them without links or text (a shell stored as fetched), %d not rendered; the web's requests by kind: %v; a document: %s",
			docs, shells, unrendered, byKind, sample)
	}

	settled := metrics[`crawler_fetcher_renders_total{outcome="settled"}`]
	failed := metrics[`crawler_fetcher_renders_total{outcome="hung"}`] + metrics[`crawler_fetcher_renders_total{outcome="error"}`]
	if settled < float64(docs) || failed > 0 {
		t.Errorf("renders: %v settled for %d script-built documents, %v hung or failed", settled, docs, failed)
	}
	if metrics[`crawler_fetcher_render_verdicts_total{reason="has_text"}`] == 0 {
		t.Error("no page was left unrendered for its text: the server-rendered sites were rendered too")
	}
	t.Logf("rendered %v pages (%d script-built documents of %d sites), render time %.2f s on average; peak memory with %d tabs: Chromium %d MiB PSS (%d MiB RSS summed over %d processes), the fetcher %d MiB RSS",
		settled, docs, len(c.ready.ScriptBuilt),
		metrics["crawler_fetcher_render_duration_seconds_sum"]/max(1, metrics["crawler_fetcher_render_duration_seconds_count"]),
		tabs, peak.browserPSS>>20, peak.browserRSS>>20, peak.processes, peak.fetcherRSS>>20)
}

// commentedEnv reads the settings an environment file suggests in comments
// of their own ("# CRAWLER_X=value"), the last of each.
func commentedEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "#")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.HasPrefix(k, "CRAWLER_") && !strings.ContainsAny(k, " \t") {
			out[k] = v
		}
	}
	return out, sc.Err()
}

// politeness is what the web saw of its hosts' page requests.
type politeness struct {
	violations int
	minGap     time.Duration
	minGapAt   string
	repeated   []string // pages requested again after a final answer
}

// pagePoliteness checks each page request (every kind but the
// script-built sites' /app.js and /data/, which a page load asks for
// within its host's turn) against the host's previous request of any kind:
// a page comes a delay after the end of the previous load, its browser
// requests included.
func pagePoliteness(rs []websim.Resource) politeness {
	type req struct {
		id, kind string
		hit      websim.Hit
	}
	p := politeness{minGap: time.Duration(1 << 62)}
	byHost := map[string][]req{}
	for _, r := range rs {
		h, _, _ := strings.Cut(r.ID, " ")
		final := false
		for _, x := range r.Hits {
			byHost[h] = append(byHost[h], req{r.ID, r.Kind, x})
			if final && r.Kind != websim.KindScript && r.Kind != websim.KindData {
				p.repeated = append(p.repeated, r.ID)
			}
			final = final || (x.Status > 0 && x.Status < 500)
		}
	}
	for _, reqs := range byHost {
		slices.SortFunc(reqs, func(a, b req) int { return a.hit.Arrived.Compare(b.hit.Arrived) })
		for i := 1; i < len(reqs); i++ {
			if k := reqs[i].kind; k == websim.KindScript || k == websim.KindData {
				continue
			}
			g := websim.Gap(reqs[i-1].hit, reqs[i].hit)
			if g < labDelay-jitter {
				p.violations++
			}
			if g < p.minGap {
				p.minGap, p.minGapAt = g, reqs[i-1].id+" then "+reqs[i].id
			}
		}
	}
	return p
}

// scrapeMetrics reads a service's /metrics into series → value (the
// series as exposed: name{labels}).
func scrapeMetrics(ctx context.Context, admin string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", admin, err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// memoryPeak is the most memory a service and the processes it started
// held at one sample.
type memoryPeak struct {
	fetcherRSS int64
	browserPSS int64 // proportional set size of its descendants: shared pages counted once
	browserRSS int64 // their RSS summed: shared pages counted in each
	processes  int
}

// memorySampler samples a service's process tree every 500 ms until stop.
type memorySampler struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	peak   memoryPeak
}

// sampleMemory starts sampling the process named comm in host h's
// namespace and its descendants (the fetcher's Chromium).
func sampleMemory(ctx context.Context, h host, comm string) *memorySampler {
	ctx, cancel := context.WithCancel(ctx)
	m := &memorySampler{cancel: cancel}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			s := treeMemory(ctx, h, comm)
			m.mu.Lock()
			if s.browserPSS > m.peak.browserPSS {
				m.peak.browserPSS, m.peak.browserRSS, m.peak.processes = s.browserPSS, s.browserRSS, s.processes
			}
			m.peak.fetcherRSS = max(m.peak.fetcherRSS, s.fetcherRSS)
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

// stop stops the sampler and returns the peak.
func (m *memorySampler) stop() memoryPeak {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

// treeMemory is one sample of the memory of the process named comm in
// host h's namespace and of its descendants.
func treeMemory(ctx context.Context, h host, comm string) memoryPeak {
	var s memoryPeak
	out, err := exec.CommandContext(ctx, "ip", "netns", "pids", h.ns()).Output()
	if err != nil {
		return s
	}
	parent := map[int]int{}
	root := 0
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		rest := strings.Fields(string(b[end+1:]))
		if len(rest) < 2 {
			continue
		}
		parent[pid], _ = strconv.Atoi(rest[1])
		if string(b[open+1:end]) == comm {
			root = pid
		}
	}
	if root == 0 {
		return s
	}
	s.fetcherRSS = rollup(root)["Rss:"]
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				r := rollup(pid)
				s.browserPSS += r["Pss:"]
				s.browserRSS += r["Rss:"]
				s.processes++
				break
			}
		}
	}
	return s
}

// rollup reads /proc/<pid>/smaps_rollup in bytes by field ("Rss:",
// "Pss:").
func rollup(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[f[0]] = v << 10
			}
		}
	}
	return out
}
