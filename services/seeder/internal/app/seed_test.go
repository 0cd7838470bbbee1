package app

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestMain runs the tests against a real ClickHouse (serve_test.go) and
// fails the package when one leaves a goroutine behind.
func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestLoadJob: the crawl request of --spec is merged into the flags'
// configuration (crawl id unless --crawl-id gives one, sitemap settings
// added), its seeds count as seeds, and a bad combination or file fails
// before anything is published.
func TestLoadJob(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.json")
	if err := os.WriteFile(spec, []byte(`{"crawl_id": "from-file", "seeds": ["http://127.0.0.2/"],
		"sitemaps": true, "sitemap_urls": ["http://127.0.0.2/s.xml"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noSeeds := filepath.Join(dir, "noseeds.json")
	if err := os.WriteFile(noSeeds, []byte(`{"crawl_id": "c"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		stdin     string
		wantErr   string
		wantCrawl string
		wantJob   bool
	}{
		{name: "no spec", args: []string{"--crawl-id", "c", "--seed", "http://a/"}, wantCrawl: "c"},
		{name: "spec", args: []string{"--spec", spec}, wantCrawl: "from-file", wantJob: true},
		{name: "crawl id flag wins", args: []string{"--spec", spec, "--crawl-id", "flag"}, wantCrawl: "flag", wantJob: true},
		{name: "spec from stdin", args: []string{"--spec", "-"}, stdin: `{"crawl_id": "in", "seeds": ["http://a/"]}`, wantCrawl: "in", wantJob: true},
		{name: "both from stdin", args: []string{"--spec", "-", "--seeds-file", "-"}, wantErr: "cannot both read standard input"},
		{name: "missing spec", args: []string{"--spec", filepath.Join(dir, "nope.json")}, wantErr: "open spec"},
		{name: "no seeds anywhere", args: []string{"--spec", noSeeds}, wantErr: "validate seeds"},
		{name: "no crawl id", args: []string{"--seed", "http://a/"}, wantErr: "crawl-id: required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config.Seed
			fs := flag.NewFlagSet(Name, flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := envflag.Parse(fs, append([]string{"--kafka-brokers", "127.0.0.1:1"}, tt.args...), func(string) (string, bool) { return "", false }); err != nil {
				t.Fatal(err)
			}
			job, err := LoadJob(&cfg, strings.NewReader(tt.stdin), time.Now())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("LoadJob = %v, want an error mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadJob: %v", err)
			}
			if cfg.CrawlID != tt.wantCrawl || (job != nil) != tt.wantJob {
				t.Fatalf("crawl %q, job %v; want crawl %q, job %v", cfg.CrawlID, job, tt.wantCrawl, tt.wantJob)
			}
			if job != nil && job.Spec.GetCrawlId() != tt.wantCrawl {
				t.Errorf("job's spec is of crawl %q, want %q", job.Spec.GetCrawlId(), tt.wantCrawl)
			}
			if tt.name == "spec" && (!cfg.Sitemaps || len(cfg.SitemapURLs) != 1 || len(job.Seeds) != 1) {
				t.Errorf("spec not merged: sitemaps %v %v, seeds %v", cfg.Sitemaps, cfg.SitemapURLs, job.Seeds)
			}
		})
	}
}
