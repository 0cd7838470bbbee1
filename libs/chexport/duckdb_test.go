package chexport_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// duckdbDir is the node project that reads Parquet with DuckDB
// (`npm ci` there; .ci/run does it).
const duckdbDir = "testdata/duckdb"

// duckdbResult is what check.mjs prints.
type duckdbResult struct {
	Rows    int `json:"rows"`
	Columns []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"columns"`
	Values []map[string]*string `json:"values"`
}

// readWithDuckDB reads a Parquet file with DuckDB (node, @duckdb/node-api),
// skipping the test when node or the package is not installed.
func readWithDuckDB(t *testing.T, file string) duckdbResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Parquet read-back with DuckDB needs Node.js (apt-get install nodejs) and `npm ci` in libs/chexport/testdata/duckdb")
	}
	if _, err := os.Stat(filepath.Join(duckdbDir, "node_modules", "@duckdb", "node-api")); err != nil {
		t.Skip("@duckdb/node-api is not installed: run `npm ci` in libs/chexport/testdata/duckdb (.ci/run does)")
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, "check.mjs", abs)
	cmd.Dir = duckdbDir
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("duckdb read of %s: %v\n%s", file, err, stderr)
	}
	var res duckdbResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode check.mjs output %q: %v", out, err)
	}
	return res
}

// TestParquetDuckDB reads exported Parquet files with DuckDB, an
// independent reader: row counts, the types DuckDB infers from the
// schema's logical types, and typed values.
func TestParquetDuckDB(t *testing.T) {
	s := chtest.NewStore(t)
	f := insertFixture(t, s, "duck", 1)
	tests := []struct {
		table  chexport.Table
		types  map[string]string
		values map[string]string // column = DuckDB's text of the first row's value
	}{
		{
			table: chexport.FetchLog,
			types: map[string]string{"url": "VARCHAR", "url_fp": "UBIGINT", "status": "USMALLINT", "duration_ms": "UINTEGER",
				"fetched_at": "TIMESTAMP WITH TIME ZONE", "final": "BOOLEAN", "bytes": "UBIGINT", "priority": "INTEGER", "priority_reason": "VARCHAR"},
			values: map[string]string{"url": f.fetchLog[0].URL, "url_fp": strconv.FormatUint(f.fetchLog[0].URLFP, 10),
				"status": "200", "final": "true", "fetched_at": "2024-05-17 10:30:00+00", "priority": "-3"},
		},
		{
			table: chexport.Documents,
			types: map[string]string{"text": "VARCHAR", "content_fp": "UBIGINT", "outlinks": "UINTEGER", "fetched_at": "TIMESTAMP WITH TIME ZONE"},
			values: map[string]string{"url": f.documents[0].URL, "text": f.documents[0].Text, "title": f.documents[0].Title,
				"content_fp": strconv.FormatUint(f.documents[0].ContentFP, 10), "fetched_at": "2024-05-17 10:30:00+00"},
		},
		{
			table:  chexport.Links,
			types:  map[string]string{"anchor_text": "VARCHAR", "position": "USMALLINT", "found_at": "TIMESTAMP WITH TIME ZONE"},
			values: map[string]string{"source_url": f.links[0].SourceURL, "position": "1"},
		},
		{
			table:  chexport.URLEvents,
			types:  map[string]string{"state": "VARCHAR", "partition": "USMALLINT", "event_time": "TIMESTAMP WITH TIME ZONE", "priority": "INTEGER"},
			values: map[string]string{"state": "duplicate", "url": f.urlEvents[0].URL, "reason": f.urlEvents[0].Reason},
		},
	}
	for _, tt := range tests {
		t.Run(string(tt.table), func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "out.parquet")
			out, err := chexport.CreateOutput(file)
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			if _, err := chexport.Export(t.Context(), s.Conn(), chexport.Request{CrawlID: f.crawl, Table: tt.table, Format: chexport.Parquet}, out); err != nil {
				t.Fatal(err)
			}
			if err := out.Commit(); err != nil {
				t.Fatal(err)
			}
			res := readWithDuckDB(t, file)
			if res.Rows != fixtureRows {
				t.Errorf("duckdb counts %d rows, want %d", res.Rows, fixtureRows)
			}
			types := map[string]string{}
			for _, c := range res.Columns {
				types[c.Name] = c.Type
			}
			for col, want := range tt.types {
				if types[col] != want {
					t.Errorf("duckdb type of %s = %q, want %q", col, types[col], want)
				}
			}
			// The fixture's first row, found by its URL (the file is in
			// the server's order).
			key := "url"
			if tt.table == chexport.Links {
				key = "source_url"
			}
			var row map[string]*string
			for _, r := range res.Values {
				if v := r[key]; v != nil && *v == tt.values[key] {
					row = r
				}
			}
			if row == nil {
				t.Fatalf("duckdb read no row with %s %q", key, tt.values[key])
			}
			for col, want := range tt.values {
				if got := row[col]; got == nil || *got != want {
					t.Errorf("duckdb value of %s = %s, want %q", col, deref(got), want)
				}
			}
		})
	}
}

// TestParquetDuckDBMillis: fetch_log's millisecond survives in DuckDB.
func TestParquetDuckDBMillis(t *testing.T) {
	s := chtest.NewStore(t)
	insert(t, s, chstore.FetchLog, chstore.FetchLogRow{CrawlID: "ms", URL: "http://a.test/", URLFP: 1, Host: "a.test",
		FetchedAt: base, FetchedAtMs: 789, Status: 200})
	file := filepath.Join(t.TempDir(), "ms.parquet")
	out, err := chexport.CreateOutput(file)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := chexport.Export(t.Context(), s.Conn(), chexport.Request{CrawlID: "ms", Table: chexport.FetchLog, Format: chexport.Parquet}, out); err != nil {
		t.Fatal(err)
	}
	if err := out.Commit(); err != nil {
		t.Fatal(err)
	}
	res := readWithDuckDB(t, file)
	if len(res.Values) != 1 {
		t.Fatalf("duckdb read %d rows, want 1", len(res.Values))
	}
	if got := res.Values[0]["fetched_at"]; got == nil || *got != "2024-05-17 10:30:00.789+00" {
		t.Errorf("fetched_at = %s, want 2024-05-17 10:30:00.789+00", deref(got))
	}
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return strconv.Quote(*s)
}
