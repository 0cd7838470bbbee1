package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "trawl-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // best effort, in the temporary directory
	binDir = dir
	return chtest.Main(m)
}

// The service binaries, built once per test binary on first use. Package
// state is the only way to share TestMain's build directory with tests.
var (
	binDir    string
	buildOnce sync.Once
	bins      map[string]string
	buildErr  error
)

func serviceBins(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		wd, err := os.Getwd()
		if err != nil {
			buildErr = err
			return
		}
		root, err := supervise.FindRepoRoot(wd)
		if err != nil {
			buildErr = err
			return
		}
		start := time.Now()
		bins, buildErr = supervise.Build(ctx, root, binDir, pipeline.Services)
		fmt.Fprintf(os.Stderr, "e2e: built services in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if buildErr != nil {
		t.Fatalf("build services: %v", buildErr)
	}
	return bins
}

// crawlEnv is one test's crawl: demo site, pipeline, ClickHouse database.
type crawlEnv struct {
	t       *testing.T
	site    *demosite.Site
	p       *pipeline.Pipeline
	crawlID string
	delay   time.Duration
	stopped bool

	mu       sync.Mutex
	restarts []supervise.Event // what the supervisors did (autoRestart)
}

type envConfig struct {
	site    demosite.Config
	delay   time.Duration
	args    map[string][]string
	noSite  bool
	crawlID string
	// autoRestart puts the services under supervisors (the launcher's
	// default). Off (the default here), a service that exits fails the
	// test, and tests that kill services restart them themselves.
	autoRestart bool
	// cluster, when set, runs the crawl on this ClickHouse cluster in
	// cluster mode (a fresh database on it) instead of the test server.
	cluster *chlocal.Cluster
}

// startEnv starts the demo site and the pipeline (separate processes,
// embedded broker, real ClickHouse with a fresh database). On failure the
// tail of every service log is logged.
func startEnv(t *testing.T, ctx context.Context, ec envConfig) *crawlEnv {
	t.Helper()
	b := serviceBins(t)
	e := &crawlEnv{t: t, delay: ec.delay, crawlID: "e2e-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")}
	site, err := demosite.Start(ctx, ec.site)
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	e.site = site
	t.Cleanup(func() { site.Close() })
	var ch chstore.Config
	if ec.cluster != nil {
		ch = chtest.ClusterConfig(t, ec.cluster)
	} else {
		ch = chtest.Config(t)
	}
	dataDir := t.TempDir()
	start := time.Now()
	p, err := pipeline.Start(ctx, pipeline.Config{
		DataDir: dataDir, Bins: b, ClickHouseAddr: strings.Join(ch.Addr, ","), Database: ch.Database, ClickHouseCluster: ch.Cluster,
		Partitions: 8, SessionTimeout: 4 * time.Second, Delay: ec.delay, AllowPrivate: true,
		Args: ec.args, LogLevel: "debug", StopGrace: 20 * time.Second,
		AutoRestart: ec.autoRestart,
		OnRestart: func(ev supervise.Event) {
			t.Logf("supervisor: %s", ev)
			e.mu.Lock()
			e.restarts = append(e.restarts, ev)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("start pipeline: %v\n%s", err, tails(dataDir))
	}
	t.Logf("pipeline ready in %s", time.Since(start).Round(time.Millisecond))
	e.p = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs (%s):\n%s", dataDir, p.LogTails(40))
		}
		if !e.stopped {
			p.Kill()
		}
		p.Close()
	})
	return e
}

func tails(dataDir string) string {
	var b strings.Builder
	files, _ := filepath.Glob(filepath.Join(dataDir, "logs", "*.log"))
	for _, f := range files {
		fmt.Fprintf(&b, "==== %s\n%s\n", filepath.Base(f), supervise.Tail(f, 40))
	}
	return b.String()
}

// seed runs the seeder and fails the test unless it exits 0.
func (e *crawlEnv) seed(ctx context.Context, seeds []string, seedsFile string) *supervise.Process {
	e.t.Helper()
	proc, err := e.p.Seed(ctx, pipeline.SeedRun{CrawlID: e.crawlID, Seeds: seeds, SeedsFile: seedsFile})
	if err != nil {
		e.t.Fatalf("seed: %v", err)
	}
	return proc
}

// supervisorEvents returns what the supervisors did so far.
func (e *crawlEnv) supervisorEvents() []supervise.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]supervise.Event(nil), e.restarts...)
}

// drain waits until every consumer group is drained.
func (e *crawlEnv) drain(ctx context.Context, timeout time.Duration) progress.Snapshot {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := e.p.Monitor(e.crawlID).WaitDrained(ctx, progress.DrainConfig{
		Interval: 500 * time.Millisecond, StablePolls: 4, Check: e.p.Check, IdleTimeout: 20 * time.Second,
	})
	if err != nil {
		e.t.Fatalf("crawl did not drain: %v (last: %s)", err, s.Line())
	}
	return s
}

// stop stops every service with SIGTERM and requires exit code 0.
func (e *crawlEnv) stop() {
	e.t.Helper()
	start := time.Now()
	err := e.p.Stop()
	e.stopped = true
	e.t.Logf("services stopped in %s", time.Since(start).Round(time.Millisecond))
	if err != nil {
		e.t.Errorf("services did not stop cleanly: %v", err)
	}
}

// fetchRow is one fetch_log row.
type fetchRow struct {
	URL         string
	Status      uint16
	ErrorKind   string
	ContentType string
	Attempt     uint16
	Fetcher     string
}

func (e *crawlEnv) fetchLog(ctx context.Context) []fetchRow {
	e.t.Helper()
	rows, err := e.p.Store.Conn().Query(ctx,
		"SELECT url, status, error_kind, content_type, attempt, fetcher FROM fetch_log FINAL WHERE crawl_id = ? ORDER BY url",
		e.crawlID)
	if err != nil {
		e.t.Fatalf("query fetch_log: %v", err)
	}
	defer rows.Close()
	var out []fetchRow
	for rows.Next() {
		var r fetchRow
		if err := rows.Scan(&r.URL, &r.Status, &r.ErrorKind, &r.ContentType, &r.Attempt, &r.Fetcher); err != nil {
			e.t.Fatalf("scan fetch_log: %v", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("read fetch_log: %v", err)
	}
	return out
}

// documents returns url -> status of the crawl's documents.
func (e *crawlEnv) documents(ctx context.Context) map[string]uint16 {
	e.t.Helper()
	rows, err := e.p.Store.Conn().Query(ctx, "SELECT url, status FROM documents FINAL WHERE crawl_id = ?", e.crawlID)
	if err != nil {
		e.t.Fatalf("query documents: %v", err)
	}
	defer rows.Close()
	out := map[string]uint16{}
	for rows.Next() {
		var (
			u string
			s uint16
		)
		if err := rows.Scan(&u, &s); err != nil {
			e.t.Fatalf("scan documents: %v", err)
		}
		out[u] = s
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("read documents: %v", err)
	}
	return out
}

// pageRequests returns the request log without robots.txt requests, as
// URL -> count.
func pageRequests(reqs []demosite.Request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if !r.IsRobots() {
			out[r.URL()]++
		}
	}
	return out
}

// checkCoverage checks that every reachable allowed URL was requested
// (exactly once when exact), nothing else was, and no disallowed path was;
// it returns the number of duplicate requests.
func checkCoverage(t *testing.T, site *demosite.Site, exact bool) (dups int) {
	t.Helper()
	got := pageRequests(site.Requests())
	want := site.ReachableAllowed()
	wantSet := map[string]bool{}
	var missing []string
	for _, u := range want {
		wantSet[u] = true
		switch n := got[u]; {
		case n == 0:
			missing = append(missing, u)
		case n > 1:
			dups += n - 1
			if exact {
				t.Errorf("%s fetched %d times, want once", u, n)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d reachable allowed URLs never fetched, e.g. %v", len(missing), len(want), first(missing, 10))
	}
	var unexpected []string
	for u := range got {
		if !wantSet[u] {
			unexpected = append(unexpected, u)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		t.Errorf("%d unexpected URLs requested: %v", len(unexpected), first(unexpected, 10))
	}
	for _, r := range site.Requests() {
		if demosite.IsDisallowed(r.Path) {
			t.Errorf("robots.txt-disallowed URL requested: %s", r.URL())
		}
	}
	return dups
}

// minGapPerHost returns the smallest interval between two consecutive
// requests (robots.txt included) to one host, and where it happened.
func minGapPerHost(reqs []demosite.Request) (time.Duration, string) {
	byHost := map[string][]time.Time{}
	for _, r := range reqs {
		byHost[r.Host] = append(byHost[r.Host], r.Time)
	}
	minGap, where := time.Duration(1<<62), ""
	for h, ts := range byHost {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			if g := ts[i].Sub(ts[i-1]); g < minGap {
				minGap, where = g, fmt.Sprintf("%s request %d", h, i)
			}
		}
	}
	return minGap, where
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
