package e2e_test

import (
	"context"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// resumeArgs are the launcher's flags of a crawl of site's seeds in
// dataDir: the same command both times, no --crawl-id.
func resumeArgs(t *testing.T, site *demosite.Site, dataDir string) []string {
	t.Helper()
	ch := chtest.Config(t)
	args := []string{"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
		"--data-dir", dataDir, "--timeout", "100s",
		"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database}
	for _, s := range site.Seeds() {
		args = append(args, "--seed", s)
	}
	return args
}

// runLauncher runs the launcher in this process with args until it
// returns or stop fires (Ctrl-C), and returns its output.
func runLauncher(t *testing.T, ctx context.Context, args []string, out string, stop <-chan struct{}) (string, error) {
	t.Helper()
	var cfg launcher.Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("flags: %v", err)
	}
	cfg.Bins = launcherBins(t)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-runCtx.Done():
		}
	}()
	runErr := launcher.Run(runCtx, cfg, strings.NewReader(""), f)
	printed, _ := os.ReadFile(out)
	return string(printed), runErr
}

// whenPages closes the returned channel once the site has answered n page
// requests.
func whenPages(ctx context.Context, site *demosite.Site, n int) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if len(pageRequests(site.Requests())) >= n {
				close(ch)
				return
			}
		}
	}()
	return ch
}

// robotsPerHost counts robots.txt requests by host.
func robotsPerHost(site *demosite.Site) map[string]int {
	out := map[string]int{}
	for _, r := range site.Requests() {
		if r.IsRobots() {
			out[r.Host]++
		}
	}
	return out
}

// TestResumeAfterInterrupt: a crawl of your own seeds interrupted (Ctrl-C)
// halfway, then the same command run again: the second run says it
// resumes the same crawl, finishes it, and the site sees every page once
// and each robots.txt once over both runs (the second fetcher takes
// robots.txt from ClickHouse); the summary counts both runs.
func TestResumeAfterInterrupt(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 3, PagesPerHost: 40, FirstHostOctet: 160})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	dir := t.TempDir()
	args := resumeArgs(t, site, filepath.Join(dir, "data"))
	want := len(site.ReachableAllowed())

	first, err := runLauncher(t, ctx, args, filepath.Join(dir, "out1.txt"), whenPages(ctx, site, want/3))
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, first)
	}
	fetched := len(pageRequests(site.Requests()))
	if !strings.Contains(first, "new crawl") || !strings.Contains(first, "interrupted") || fetched >= want {
		t.Fatalf("first run did not start a crawl and stop halfway (%d of %d pages):\n%s", fetched, want, first)
	}
	second, err := runLauncher(t, ctx, args, filepath.Join(dir, "out2.txt"), nil)
	if err != nil {
		t.Fatalf("second run: %v\n%s\nservice logs:\n%s", err, second, tails(filepath.Join(dir, "data")))
	}
	t.Logf("first run (%d pages):\n%s\nsecond run:\n%s", fetched, first, second)
	id := crawlIDIn(t, first, "new crawl ")
	if !strings.Contains(second, "resuming crawl "+id) {
		t.Errorf("second run does not say it resumes crawl %s", id)
	}
	if dups := checkCoverage(t, site, true); dups > 0 {
		t.Errorf("%d pages requested twice over the two runs", dups)
	}
	for host, n := range robotsPerHost(site) {
		if n != 1 {
			t.Errorf("%s: robots.txt requested %d times over the two runs, want once", host, n)
		}
	}
	if !strings.Contains(second, "crawl "+id+"\n") || !summaryCovers(second, want) {
		t.Errorf("the second run's summary does not cover both runs' %d pages:\n%s", want, second)
	}
}

// TestResumeAfterKill: the launcher is killed (SIGKILL, no chance to stop
// anything) halfway through a crawl; the same command run again resumes
// the crawl and finishes it. The pages a killed run had in flight may be
// fetched again (their outcomes were never acknowledged): at most the
// fetcher's workers' worth.
func TestResumeAfterKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the launcher as a process of its own")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 3, PagesPerHost: 40, FirstHostOctet: 170})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	args := resumeArgs(t, site, dataDir)
	want := len(site.ReachableAllowed())
	crawlBin := launcherBin(t)

	cmd := exec.CommandContext(ctx, crawlBin, args...)
	outFile := filepath.Join(dir, "out1.txt")
	out, err := os.Create(outFile)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = os.Environ()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-whenPages(ctx, site, want/3):
	case <-ctx.Done():
		t.Fatalf("the first run never fetched a third of the site")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed
	first, _ := os.ReadFile(outFile)
	fetched := len(pageRequests(site.Requests()))

	second, err := runLauncher(t, ctx, args, filepath.Join(dir, "out2.txt"), nil)
	if err != nil {
		t.Fatalf("second run: %v\n%s\nservice logs:\n%s", err, second, tails(dataDir))
	}
	t.Logf("first run, killed after %d pages:\n%s\nsecond run:\n%s", fetched, first, second)
	id := crawlIDIn(t, string(first), "new crawl ")
	if !strings.Contains(second, "resuming crawl "+id) {
		t.Errorf("second run does not say it resumes crawl %s", id)
	}
	dups := checkCoverage(t, site, false)
	t.Logf("pages requested twice after the kill: %d (the killed run's in flight)", dups)
	if dups > 32 {
		t.Errorf("%d pages requested twice, want at most the killed fetcher's 32 workers' worth", dups)
	}
	if !summaryCovers(second, want) {
		t.Errorf("the second run's summary does not cover both runs' %d pages:\n%s", want, second)
	}
}

// launcherBins are the binaries a launcher runs: the services' and the
// broker's (--broker-process).
func launcherBins(t *testing.T) map[string]string {
	t.Helper()
	bins := maps.Clone(serviceBins(t))
	maps.Copy(bins, buildTool(t, "broker"))
	return bins
}

// launcherBin builds deployments/local/cmd/crawl once per test binary.
func launcherBin(t *testing.T) string {
	t.Helper()
	return buildTool(t, "crawl")["crawl"]
}

// buildTool builds one program of deployments/local/cmd into binDir.
func buildTool(t *testing.T, name string) map[string]string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := supervise.FindRepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	bins, err := supervise.BuildTools(t.Context(), root, binDir, []string{name})
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return bins
}

// crawlIDIn returns the crawl id that follows prefix in a run's output.
func crawlIDIn(t *testing.T, out, prefix string) string {
	t.Helper()
	i := strings.Index(out, prefix)
	if i < 0 {
		t.Fatalf("no %q in the output:\n%s", prefix, out)
	}
	id, _, _ := strings.Cut(out[i+len(prefix):], "\n")
	id, _, _ = strings.Cut(id, " ")
	return strings.TrimSuffix(id, ":")
}

// summaryCovers reports whether a run's summary counts at least pages
// fetches ("  fetches     N (…").
func summaryCovers(out string, pages int) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "fetches" {
			var n int
			for _, c := range f[1] {
				if c < '0' || c > '9' {
					return false
				}
				n = 10*n + int(c-'0')
			}
			return n >= pages
		}
	}
	return false
}
