package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/deployments/local/internal/chboot"
	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/warcdir"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// noEnv keeps the test's CRAWLER_* variables (CRAWLER_CLICKHOUSE_ADDR)
// from the commands: they must find the data directory's own server.
func noEnv(string) (string, bool) { return "", false }

var base = time.Date(2024, 5, 17, 10, 30, 0, 0, time.UTC)

// newDataDir makes a data directory as a crawl leaves it: a private
// ClickHouse in <dir>/clickhouse holding two crawls' documents and fetch
// log, and their specs (crawl-b written last). The server is left running
// when running, else stopped.
func newDataDir(t *testing.T, running bool) (string, *chboot.Server) {
	t.Helper()
	dir := t.TempDir()
	srv, err := chboot.Ensure(t.Context(), chstore.Config{}, dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	store, err := chstore.Open(t.Context(), chstore.Config{Addr: []string{srv.Addr}, Database: chstore.DefaultDatabase,
		Username: chstore.DefaultUsername, DialTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for crawl, n := range map[string]int{"crawl-a": 2, "crawl-b": 3} {
		var (
			docs  []chstore.DocumentRow
			fetch []chstore.FetchLogRow
		)
		for i := range n {
			url := "http://" + crawl + ".test/" + string(rune('a'+i))
			at := base.Add(time.Duration(i) * time.Second)
			if crawl == "crawl-b" {
				at = at.Add(time.Hour)
			}
			docs = append(docs, chstore.DocumentRow{CrawlID: crawl, URL: url, URLFP: uint64(i + 1), Host: crawl + ".test",
				FetchedAt: at, Status: 200, Title: "page, \"" + crawl + "\"", Text: "text\nof " + url})
			fetch = append(fetch, chstore.FetchLogRow{CrawlID: crawl, URL: url, URLFP: uint64(i + 1), Host: crawl + ".test",
				Attempt: 1, FetchedAt: at, FetchedAtMs: 250, Status: 200, Bytes: 1000, Final: true})
		}
		insert(t, store, chstore.Documents, docs)
		insert(t, store, chstore.FetchLog, fetch)
	}
	specs := filepath.Join(dir, "specs")
	if err := os.MkdirAll(specs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, crawl := range []string{"crawl-b", "crawl-a"} { // written in the other order, dated in this one
		path := filepath.Join(specs, crawl+".json")
		if err := os.WriteFile(path, []byte(`{"crawl_id":"`+crawl+`"}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(1-i) * time.Hour)
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	if !running {
		if err := srv.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	return dir, srv
}

func insert[T any](t *testing.T, s *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	w := chstore.NewBatchWriter(s, table, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = w.Run(ctx) // stopped by cancel once the rows are in; Write reports a failure
	}()
	defer func() { cancel(); wg.Wait() }()
	if err := w.Write(t.Context(), rows...); err != nil {
		t.Fatalf("insert %s: %v", table.Name, err)
	}
}

// crawl runs the command with args and returns its standard output and
// error, and its error.
func crawl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	stdout, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	runErr := run(t.Context(), args, noEnv, nil, stdout, stderr)
	out, err := os.ReadFile(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := os.ReadFile(stderr.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out), string(errOut), runErr
}

// answers reports whether the data directory's server answers.
func answers(t *testing.T, dataDir string) bool {
	t.Helper()
	addr, err := chlocal.ConfiguredAddr(filepath.Join(dataDir, "clickhouse"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	return chlocal.Ping(ctx, addr) == nil
}

// TestExportAndQueryStartTheServer: with the data directory's server
// stopped, export and query start it, answer, and stop it again.
func TestExportAndQueryStartTheServer(t *testing.T) {
	dir, _ := newDataDir(t, false)

	out, notes, err := crawl(t, "export", "--data-dir", dir)
	if err != nil {
		t.Fatalf("export: %v\n%s", err, notes)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var d chexport.DocumentRow
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ids = append(ids, d.CrawlID)
	}
	if strings.Join(ids, ",") != "crawl-b,crawl-b,crawl-b" {
		t.Errorf("default export gave documents of %v, want crawl-b's three (its spec is the newest)", ids)
	}
	if !strings.Contains(notes, "last crawl") || !strings.Contains(notes, "stopped clickhouse") {
		t.Errorf("notes %q: want the crawl chosen and the server stopped", notes)
	}
	if answers(t, dir) {
		t.Error("the server export started still answers")
	}

	out, notes, err = crawl(t, "query", "--data-dir", dir, "SELECT crawl_id, count() AS n, max(fetched_at) AS last FROM documents FINAL GROUP BY crawl_id ORDER BY crawl_id")
	if err != nil {
		t.Fatalf("query: %v\n%s", err, notes)
	}
	want := "crawl_id\tn\tlast\ncrawl-a\t2\t2024-05-17 10:30:01\ncrawl-b\t3\t2024-05-17 11:30:02\n"
	if out != want {
		t.Errorf("query printed %q, want %q", out, want)
	}
	if answers(t, dir) {
		t.Error("the server query started still answers")
	}

	_, notes, err = crawl(t, "query", "--data-dir", dir, "SELEKT 1")
	if err == nil || !strings.Contains(err.Error(), "Syntax error") {
		t.Errorf("bad query: error %v, want ClickHouse's syntax error", err)
	}
	if !strings.Contains(notes, "stopped clickhouse") || answers(t, dir) {
		t.Errorf("bad query: the server is not stopped (notes %q)", notes)
	}
}

// TestExportWhileServerRuns: a server already running on the data
// directory is used and left running; every table and format, the
// crawl's own choice, and the errors of a crawl without rows.
func TestExportWhileServerRuns(t *testing.T) {
	dir, srv := newDataDir(t, true)
	out := t.TempDir()

	csvFile := filepath.Join(out, "fetch.csv")
	if _, notes, err := crawl(t, "export", "--data-dir", dir, "--crawl-id", "crawl-a", "--table", "fetch_log", "--format", "csv", "--out", csvFile); err != nil {
		t.Fatalf("export csv: %v\n%s", err, notes)
	} else if !strings.Contains(notes, "using the clickhouse running") || !strings.Contains(notes, "wrote 2 rows") {
		t.Errorf("notes %q", notes)
	}
	b, err := os.ReadFile(csvFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\r\n"), "\r\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "crawl_id,url,url_fp,host,") || !strings.Contains(lines[1], ",2024-05-17T10:30:0") {
		t.Errorf("csv:\n%s", b)
	}

	pqFile := filepath.Join(out, "docs.parquet")
	if _, notes, err := crawl(t, "export", "--data-dir", dir, "--format", "parquet", "--out", pqFile); err != nil {
		t.Fatalf("export parquet: %v\n%s", err, notes)
	}
	docs, err := parquet.ReadFile[chexport.DocumentRow](pqFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 || docs[0].CrawlID != "crawl-b" || !strings.HasPrefix(docs[0].Text, "text\nof http://crawl-b.test/") {
		t.Errorf("parquet rows: %+v", docs)
	}

	errs := []struct {
		name string
		args []string
		want string
	}{
		{"unknown crawl", []string{"--crawl-id", "nope"}, `crawl "nope" not found`},
		{"table without rows", []string{"--table", "links", "--format", "csv"}, `crawl "crawl-b" has no rows in links`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(out, tt.name+".out")
			_, _, err := crawl(t, append([]string{"export", "--data-dir", dir, "--out", file}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
			if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed export left %s (%v)", file, err)
			}
		})
	}

	// A data directory without specs: the crawl with the latest fetch,
	// read through --clickhouse-addr; an empty database holds no crawl.
	bare := t.TempDir()
	stdout, notes, err := crawl(t, "export", "--data-dir", bare, "--clickhouse-addr", srv.Addr, "--table", "fetch_log")
	if err != nil {
		t.Fatalf("export by the latest fetch: %v\n%s", err, notes)
	}
	if strings.Count(stdout, `"crawl_id":"crawl-b"`) != 3 {
		t.Errorf("export by the latest fetch:\n%s", stdout)
	}
	_, _, err = crawl(t, "export", "--data-dir", bare, "--clickhouse-addr", srv.Addr, "--clickhouse-database", "nothing_here")
	if err == nil || !strings.Contains(err.Error(), "holds no crawl") {
		t.Errorf("empty database: error %v, want the data dir holds no crawl", err)
	}

	// Query's TSV: ClickHouse's escapes, NULL as \N, arrays and dates as
	// ClickHouse prints them.
	stdout, notes, err = crawl(t, "query", "--data-dir", dir,
		`SELECT 'a\tb\\c' AS s, [1, 2] AS a, ['x'] AS xs, toNullable(NULL) AS n, toDate('2024-05-17') AS d`)
	if err != nil {
		t.Fatalf("query: %v\n%s", err, notes)
	}
	if want := "s\ta\txs\tn\td\n" + `a\tb\\c` + "\t[1,2]\t['x']\t\\N\t2024-05-17\n"; stdout != want {
		t.Errorf("query printed %q, want %q", stdout, want)
	}

	if !answers(t, dir) {
		t.Error("export and query stopped a server they did not start")
	}
}

// TestBadInput: errors that name what is wrong, before any server starts.
func TestBadInput(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing data dir", []string{"export", "--data-dir", filepath.Join(empty, "nope")}, "does not exist"},
		{"data dir without a crawl", []string{"export", "--data-dir", empty}, "holds no crawl"},
		{"query on a data dir without a crawl", []string{"query", "--data-dir", empty, "SELECT 1"}, "holds no crawl"},
		{"unwritable output", []string{"export", "--data-dir", empty, "--out", filepath.Join(empty, "no", "dir", "f.csv")}, "does not exist"},
		{"unknown table", []string{"export", "--table", "pages"}, "documents, fetch_log, links, url_events"},
		{"unknown format", []string{"export", "--format", "xlsx"}, "jsonl, csv, parquet"},
		{"query without SQL", []string{"query", "--data-dir", empty}, "want one SQL query"},
		{"stray argument", []string{"export", "--data-dir", empty, "extra"}, `unexpected argument "extra"`},
		{"delete without a crawl id", []string{"delete", "--data-dir", empty}, "want one crawl id"},
		{"delete of two crawls", []string{"delete", "--data-dir", empty, "a", "b"}, "want one crawl id"},
		{"delete of an invalid crawl id", []string{"delete", "--data-dir", empty, "a b"}, `crawl id "a b"`},
		{"delete with no wait", []string{"delete", "--data-dir", empty, "--wait", "0s", "a"}, "wait: 0s must be positive"},
		{"delete in a missing data dir", []string{"delete", "--data-dir", filepath.Join(empty, "nope"), "a"}, "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := crawl(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("the commands left %d entries in the data dir", len(entries))
	}
}

// TestDelete: `crawl delete` on a stopped data directory removes one
// crawl's rows (the data directory's own server started and stopped
// again) and its WARC files and indexes from every fetcher's directory,
// prints what it removed, marks the crawl's record deleted, and leaves the
// other crawl's rows and files; repeated, it finds nothing more to remove;
// an unknown crawl is an error.
func TestDelete(t *testing.T) {
	dir, _ := newDataDir(t, false)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	files := map[string][]string{}
	for i, crawl := range []string{"crawl-a", "crawl-b"} {
		for f := range 2 {
			fd := filepath.Join(dir, "warc", fmt.Sprintf("fetcher-%d", f))
			if err := os.MkdirAll(fd, 0o755); err != nil {
				t.Fatal(err)
			}
			name := warcdir.Name("trawl", crawl, at, int64(i+1), fmt.Sprintf("f%d", f)) + ".gz"
			for _, n := range []string{name, name + warcdir.IndexSuffix} {
				p := filepath.Join(fd, n)
				if err := os.WriteFile(p, make([]byte, 1000), 0o644); err != nil {
					t.Fatal(err)
				}
				files[crawl] = append(files[crawl], p)
			}
		}
	}
	out, _, err := crawl(t, "delete", "--data-dir", dir, "crawl-a")
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	for _, want := range []string{"deleted crawl crawl-a", "rows: documents", "2 removed", "rows: fetch_log", "warc: 2 files removed, 4000 bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, p := range files["crawl-a"] {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left", p)
		}
	}
	for _, p := range files["crawl-b"] {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("crawl-b's %s: %v", p, err)
		}
	}
	rec, err := os.ReadFile(filepath.Join(dir, "crawls", "crawl-a.json"))
	if err != nil || !strings.Contains(string(rec), `"deleted"`) {
		t.Errorf("crawl-a's record: %s, %v; want it marked deleted", rec, err)
	}
	if answers(t, dir) {
		t.Error("the server delete started is still running")
	}
	q, _, err := crawl(t, "query", "--data-dir", dir, "SELECT crawl_id, count() FROM fetch_log GROUP BY crawl_id ORDER BY crawl_id")
	if err != nil || q != "crawl_id\tcount()\ncrawl-b\t3\n" {
		t.Errorf("fetch_log after the delete: %q, %v; want crawl-b's 3 rows only", q, err)
	}
	again, _, err := crawl(t, "delete", "--data-dir", dir, "crawl-a")
	if err != nil || !strings.Contains(again, "rows: none left") || !strings.Contains(again, "warc: 0 files removed") {
		t.Errorf("second delete: %v\n%s", err, again)
	}
	if _, _, err := crawl(t, "delete", "--data-dir", dir, "nope"); err == nil || !strings.Contains(err.Error(), "no such crawl") {
		t.Errorf("delete of an unknown crawl: %v", err)
	}
}
