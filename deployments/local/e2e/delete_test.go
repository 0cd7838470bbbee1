package e2e_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/deployments/local/internal/results"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/warcdir"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLauncherDelete runs two crawls with --warc in one data directory,
// the way `make crawl` does, then `crawl delete` of the first: its rows
// are gone from every table (warc_files included), its WARC files and
// CDXJ indexes from every fetcher's directory, and the output says how
// many; the second crawl keeps its rows and files; a run that chooses
// the deleted crawl's id again is refused; a second delete removes
// nothing.
func TestLauncherDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 240*time.Second)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 2, PagesPerHost: 15, FirstHostOctet: 180})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	ch := chtest.Config(t)
	runCrawl := func(id, seed string) error {
		t.Helper()
		args := []string{"--seed", seed, "--crawl-id", id, "--warc", "--fetchers", "2",
			"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
			"--data-dir", data, "--timeout", "100s",
			"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database}
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
		out, err := os.Create(filepath.Join(dir, id+".out"))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		runErr := launcher.Run(ctx, cfg, strings.NewReader(""), out)
		if printed, _ := os.ReadFile(out.Name()); runErr != nil && !errors.Is(runErr, launcher.ErrDeleted) {
			t.Fatalf("launcher: %v\n%s\nservice logs:\n%s", runErr, printed, tails(data))
		}
		return runErr
	}
	if err := runCrawl("e2e-del-a", site.URL(0, demosite.PathIndex)); err != nil {
		t.Fatal(err)
	}
	if err := runCrawl("e2e-del-b", site.URL(1, demosite.PathIndex)); err != nil {
		t.Fatal(err)
	}
	warcDirs, _ := filepath.Glob(filepath.Join(data, "warc", "fetcher-*"))
	files := func(crawl string) (n int) {
		for _, d := range warcDirs {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				if id, ok := warcdir.CrawlOf("trawl", e.Name()); ok && id == crawl {
					n++
				}
			}
		}
		return n
	}
	aFiles, bFiles := files("e2e-del-a"), files("e2e-del-b")
	if aFiles == 0 || bFiles == 0 {
		t.Fatalf("WARC files and indexes: %d of a, %d of b in %v; want both crawls archived", aFiles, bFiles, warcDirs)
	}
	store, err := chstore.Open(ctx, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rows := func(crawl string) map[string]uint64 {
		left, err := store.CrawlRows(ctx, crawl)
		if err != nil {
			t.Fatal(err)
		}
		return left
	}
	before := rows("e2e-del-a")
	if before["fetch_log"] == 0 || before["warc_files"] == 0 || before["documents"] == 0 {
		t.Fatalf("rows of a before its deletion: %v", before)
	}
	bBefore := rows("e2e-del-b")

	del := func() string {
		t.Helper()
		cfg := launcher.DeleteConfig{Source: results.Source{DataDir: data, ClickHouse: ch},
			CrawlID: "e2e-del-a", Wait: time.Minute}
		out, err := os.CreateTemp(dir, "delete")
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if err := launcher.Delete(ctx, cfg, out, os.Stderr); err != nil {
			t.Fatalf("crawl delete: %v", err)
		}
		b, _ := os.ReadFile(out.Name())
		return string(b)
	}
	out := del()
	t.Logf("crawl delete:\n%s", out)
	for _, want := range []string{"deleted crawl e2e-del-a (its deletion published on the control topic)", "rows: fetch_log", "rows: warc_files",
		"warc: " + strconv.Itoa(aFiles/2) + " files removed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := files("e2e-del-a"); n != 0 {
		t.Errorf("%d files of the deleted crawl left", n)
	}
	if n := files("e2e-del-b"); n != bFiles {
		t.Errorf("the other crawl has %d files, had %d", n, bFiles)
	}
	for table, n := range rows("e2e-del-a") {
		if n != 0 {
			t.Errorf("%s: %d rows of the deleted crawl left", table, n)
		}
	}
	if after := rows("e2e-del-b"); after["fetch_log"] != bBefore["fetch_log"] || after["warc_files"] != bBefore["warc_files"] {
		t.Errorf("the other crawl's rows: %v, were %v", after, bBefore)
	}
	if err := runCrawl("e2e-del-a", site.URL(0, demosite.PathIndex)); !errors.Is(err, launcher.ErrDeleted) {
		t.Errorf("a run of the deleted crawl's id: %v, want refused", err)
	}
	if again := del(); !strings.Contains(again, "warc: 0 files removed") || !strings.Contains(again, "rows: none left") ||
		strings.Contains(again, "published") {
		t.Errorf("second delete:\n%s", again)
	}
}
