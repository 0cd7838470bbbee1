package launcher

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
)

// TestReadWarcUsage: the benchmark's WARC line sums the fetchers' closed
// files and their indexes (not files still open), per fetch.
func TestReadWarcUsage(t *testing.T) {
	dir := t.TempDir()
	files := map[string]int{
		"fetcher-0/trawl-1-00001-f0.warc.gz":      3000,
		"fetcher-0/trawl-1-00001-f0.warc.gz.cdxj": 100,
		"fetcher-1/trawl-1-00001-f1.warc.gz":      1000,
		"fetcher-1/trawl-1-00002-f1.warc.gz.open": 5000,
		"fetcher-1/.lock":                         0,
	}
	for name, size := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := readWarcUsage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if *u != (WarcUsage{Files: 2, Bytes: 4000, IndexBytes: 100}) {
		t.Fatalf("usage %+v", *u)
	}
	var out bytes.Buffer
	Bench{Processes: nil, Warc: u, Summary: progress.Summary{Fetched: 4}}.Print(&out)
	if !strings.Contains(out.String(), "warc: 2 files") || !strings.Contains(out.String(), "1.0 KiB per fetch of 4") {
		t.Fatalf("bench output lacks the warc line:\n%s", out.String())
	}
}
