package e2e_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLauncherScope runs a whole crawl the way `make crawl` does
// (launcher.Run with the launcher's own flags) with a scope given partly
// in a --spec file (same_host_only, deny patterns, a per-host budget the
// flags override) and partly as flags (allowed hosts, the budget), and
// checks the demo site's request log: not one request outside the scope.
//
// Only host 0 is seeded. Host 1 is allowed but reachable only through
// links from host 0's pages (dropped: same host only) and host 0's
// /redirect, whose target, host 1's /landing.html, is in scope: a redirect
// is no link, so same_host_only does not apply to it (the scheduler judges
// redirect targets by the host and pattern rules). Host 2 is not allowed:
// host 0's links to it must all be dropped. The budget (12 pages per host)
// is below what host 0 has in scope.
func TestLauncherScope(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 3, PagesPerHost: 40, FirstHostOctet: 100})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	hosts := site.Hosts()
	hostname := func(h int) string { return strings.Split(hosts[h], ":")[0] }

	const budget = 12
	dir := t.TempDir()
	spec := filepath.Join(dir, "scope.json")
	if err := os.WriteFile(spec, []byte(`{
		"name": "scoped demo",
		"scope": {"same_host_only": true, "deny_patterns": ["/sec1/", "\\.json$"]},
		"limits": {"max_pages_per_host": 1000}
	}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := chtest.Config(t)
	args := []string{
		"--spec", spec,
		"--seed", site.URL(0, demosite.PathIndex),
		"--allow-host", hostname(0), "--allow-host", hostname(1),
		"--max-pages-per-host", "12", // overrides the file's 1000
		"--crawl-id", "e2e-launcher-scope",
		"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
		"--data-dir", filepath.Join(dir, "data"), "--timeout", "100s",
		"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database,
	}
	var cfg launcher.Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, func(string) (string, bool) { return "", false }); err != nil {
		t.Fatalf("flags: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("flags: %v", err)
	}
	cfg.Bins = serviceBins(t)
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start := time.Now()
	runErr := launcher.Run(ctx, cfg, strings.NewReader(""), out)
	printed, _ := os.ReadFile(out.Name())
	if runErr != nil {
		t.Fatalf("launcher: %v\n%s\nservice logs:\n%s", runErr, printed, tails(filepath.Join(dir, "data")))
	}
	t.Logf("launcher output:\n%s", printed)
	for _, want := range []string{`"same_host_only":true`, `"max_pages_per_host":12`, `"allow_hosts":["` + hostname(0) + `","` + hostname(1) + `"]`, "crawl e2e-launcher-scope"} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("launcher output lacks %s", want)
		}
	}

	denied := regexp.MustCompile(`/sec1/|\.json$`)
	perHost := map[string]int{}
	for _, r := range site.Requests() {
		u := r.URL()
		switch {
		case r.Host == hosts[2]:
			t.Errorf("request to a host outside the scope: %s", u)
		case r.Host == hosts[1] && r.Path != demosite.PathRobots && r.Path != demosite.PathLanding:
			t.Errorf("request to host 1 other than the redirect target (same host only): %s", u)
		case denied.MatchString(r.Path):
			t.Errorf("request to a denied URL: %s", u)
		case demosite.IsDisallowed(r.Path):
			t.Errorf("robots.txt-disallowed URL requested: %s", u)
		}
		if !r.IsRobots() {
			perHost[r.Host]++
		}
	}
	if n := perHost[hosts[0]]; n > budget || n < budget/2 {
		t.Errorf("host 0: %d page requests, want at most the budget %d and at least %d (the site has more in scope)", n, budget, budget/2)
	}
	if n := perHost[hosts[1]]; n > 1 {
		t.Errorf("host 1: %d page requests, want at most its /landing.html", n)
	}
	t.Logf("requests per host %v (budget %d); total %s", perHost, budget, time.Since(start).Round(time.Millisecond))
}
