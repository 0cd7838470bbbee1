package e2e_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLauncherTimeLimit runs a crawl the way `make crawl` does with the
// launcher's --max-duration, --user-agent and --header: the site sees the
// crawl's User-Agent and header on every request, robots.txt included, no
// request after the time limit, and the launcher ends on its own (exit 0)
// saying the crawl reached its time limit.
func TestLauncherTimeLimit(t *testing.T) {
	const (
		limit = 4 * time.Second
		ua    = "launchbot/1.0 (+https://example.org/launchbot)"
		from  = "ops@example.org"
	)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 2, PagesPerHost: 300, FirstHostOctet: 205})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	dir := t.TempDir()
	ch := chtest.Config(t)
	args := []string{
		"--seed", site.URL(0, demosite.PathIndex), "--seed", site.URL(1, demosite.PathIndex),
		"--max-duration", limit.String(), "--user-agent", ua, "--header", "From: " + from,
		"--crawl-id", "e2e-launcher-time-limit",
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
	runErr := launcher.Run(ctx, cfg, strings.NewReader(""), out)
	printed, _ := os.ReadFile(out.Name())
	if runErr != nil {
		t.Fatalf("launcher: %v\n%s\nservice logs:\n%s", runErr, printed, tails(filepath.Join(dir, "data")))
	}
	t.Logf("launcher output:\n%s", printed)
	for _, want := range []string{`"max_duration":"4s"`, `"user_agent":"launchbot/1.0`, "crawl e2e-launcher-time-limit reached its time limit (4s)"} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("launcher output lacks %s", want)
		}
	}
	reqs := site.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	first := reqs[0].Time
	for _, r := range reqs {
		if r.Time.Before(first) {
			first = r.Time
		}
	}
	pages := 0
	for _, r := range reqs {
		if r.UserAgent != ua || r.From != from {
			t.Errorf("%s requested with User-Agent %q, From %q; want %q, %q", r.URL(), r.UserAgent, r.From, ua, from)
		}
		if r.Time.After(first.Add(limit + controlGrace)) {
			t.Errorf("%s requested %s after the first request, past the time limit of %s", r.URL(), r.Time.Sub(first), limit)
		}
		if !r.IsRobots() {
			pages++
		}
	}
	if reachable := len(site.ReachableAllowed()); pages == 0 || pages >= reachable {
		t.Errorf("%d of %d reachable pages requested: want some, not all", pages, reachable)
	}
}
