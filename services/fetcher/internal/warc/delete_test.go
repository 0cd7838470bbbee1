package warc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/warcdir"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// archiver is a Writer running on dir, listing its files in ClickHouse.
type archiver struct {
	w    *Writer
	reg  *prometheus.Registry
	stop func()
}

func startArchiver(t *testing.T, dir string, files *chstore.BatchWriter[chstore.WarcFileRow], maxOpen int) *archiver {
	t.Helper()
	reg := prometheus.NewRegistry()
	specs := func() []*crawlv1.CrawlSpec {
		return []*crawlv1.CrawlSpec{{CrawlId: "c1"}, {CrawlId: "c-2"}, {CrawlId: "c3"}}
	}
	w, err := Open(Options{Dir: dir, Instance: "del-1", MaxFileSize: 4 << 10, MaxOpenFiles: maxOpen, MaxBodyBytes: 4096,
		Specs: specs}, files, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return &archiver{w: w, reg: reg, stop: func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}}
}

// crawlFiles returns the names in dir of crawl's files (any form).
func crawlFiles(t *testing.T, dir, crawl string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if id, ok := warcdir.CrawlOf(DefaultPrefix, e.Name()); ok && id == crawl {
			out = append(out, e.Name())
		}
	}
	return out
}

// attempts returns the crawls of the captures of the WARC file at path,
// read with the spec reader (every length and digest verified).
func attempts(t *testing.T, path string) []string {
	t.Helper()
	recs, err := specRead(path)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	var out []string
	for _, r := range recs {
		if a := r.get(attemptField); a != "" {
			crawl, _, _ := strings.Cut(a, " ")
			out = append(out, crawl)
		}
	}
	return out
}

// TestDeleteCrawl: three crawls archive through a writer that keeps two
// files open (the least recently used closed for the third): every file
// holds one crawl, named in it, and is listed with it in warc_files (real
// ClickHouse). A legacy file mixing c1 and c-2 (the layout before) is
// recovered and listed by the next start. DeleteCrawl("c1") then removes
// c1's closed and open files and indexes, rewrites the legacy file with
// c-2's fetches only (every digest verified, its index pointing at them,
// its row listed again with its new size), leaves the others' files as
// they were, archives no later fetch of c1, counts what it removed, and a
// second call removes nothing.
func TestDeleteCrawl(t *testing.T) {
	ctx := t.Context()
	base := site(t, "127.0.0.66")
	store := chtest.NewStore(t)
	files := chstore.NewBatchWriter(store, chstore.WarcFiles, chstore.BatchOptions{MaxRows: 1, FlushInterval: 10 * time.Millisecond}, zap.NewNop(), nil)
	fctx, stopFiles := context.WithCancel(ctx)
	filesDone := make(chan error, 1)
	go func() { filesDone <- files.Run(fctx) }()
	defer func() {
		stopFiles()
		if err := <-filesDone; err != nil {
			t.Error(err)
		}
	}()
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, MaxBodyBytes: 4096})
	defer f.Close()
	archive := func(w *Writer, crawl, path string) string {
		t.Helper()
		u := base + path
		file, _, err := w.Archive(ctx, request(crawl, u, 0, ""), f.Fetch(ctx, httpfetch.Request{URL: u, Host: "h", Capture: true}))
		if err != nil {
			t.Fatalf("archive %s of %s: %v", u, crawl, err)
		}
		return file
	}

	dir := t.TempDir()
	a := startArchiver(t, dir, files, 2)
	crawls := []string{"c1", "c-2", "c3"}
	for i := range 4 {
		for _, c := range crawls {
			if file := archive(a.w, c, fmt.Sprintf("/page/%s-%d", c, i)); !strings.Contains(file, "-"+warcdir.EncodeCrawl(c)+"-") {
				t.Fatalf("a fetch of %s archived in %s", c, file)
			}
		}
	}
	a.stop()
	if n := testutil.ToFloat64(a.w.m.evicted); n < 4 {
		t.Errorf("files closed for another crawl: %v, want ≥4 (three crawls round-robin, two open)", n)
	}
	for _, c := range crawls {
		names := crawlFiles(t, dir, c)
		if len(names) == 0 {
			t.Fatalf("no file of %s", c)
		}
		for _, n := range names {
			if !strings.HasSuffix(n, warcSuffix) {
				continue
			}
			for _, got := range attempts(t, filepath.Join(dir, n)) {
				if got != c {
					t.Fatalf("%s holds a fetch of %s", n, got)
				}
			}
		}
	}

	// A legacy file: c1's first file followed by the fetches of c-2's.
	c1first := filepath.Join(dir, crawlFiles(t, dir, "c1")[0])
	c2first := filepath.Join(dir, crawlFiles(t, dir, "c-2")[0])
	one, _ := os.ReadFile(c1first)
	two, _ := os.ReadFile(c2first)
	var c2fetches int64
	if _, _, err := scan(c2first, false, func(m member) error {
		if c2fetches == 0 {
			c2fetches = m.offset + m.length // after its warcinfo
		}
		return errStop
	}); err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dir, "trawl-20250101000000-00001-del-1.warc.gz")
	if err := os.WriteFile(legacy, append(one, two[c2fetches:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	mixed := attempts(t, legacy)
	if !slices.Contains(mixed, "c1") || !slices.Contains(mixed, "c-2") {
		t.Fatalf("legacy file holds %v", mixed)
	}

	a = startArchiver(t, dir, files, 2)
	defer func() {
		if a != nil {
			a.stop()
		}
	}()
	waitFor(t, func() bool { _, err := os.Stat(legacy + indexSuffix); return err == nil }, "the legacy file indexed")
	archive(a.w, "c1", "/page/c1-open") // an open file of c1
	archive(a.w, "c3", "/page/c3-open")
	if opens, _ := filepath.Glob(filepath.Join(dir, "*c1*"+openSuffix)); len(opens) != 1 {
		t.Fatalf("open files of c1: %v", opens)
	}
	var c1rows uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM warc_files FINAL WHERE crawl_id = 'c1'").Scan(&c1rows); err != nil {
		t.Fatal(err)
	}
	if c1rows == 0 {
		t.Fatal("warc_files lists no file of c1 under its crawl_id")
	}
	others := map[string][]byte{}
	for _, c := range []string{"c-2", "c3"} {
		for _, n := range crawlFiles(t, dir, c) {
			if strings.HasSuffix(n, warcSuffix) {
				b, _ := os.ReadFile(filepath.Join(dir, n))
				others[n] = b
			}
		}
	}
	c1warcs := 0
	for _, n := range crawlFiles(t, dir, "c1") {
		if strings.HasSuffix(n, warcSuffix) || strings.HasSuffix(n, warcSuffix+openSuffix) {
			c1warcs++
		}
	}

	r, err := a.w.DeleteCrawl(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != c1warcs || len(r.Rewritten) != 1 || r.Bytes == 0 {
		t.Fatalf("removal %+v: want %d files of c1 and the legacy file rewritten", r, c1warcs)
	}
	if left := crawlFiles(t, dir, "c1"); len(left) != 0 {
		t.Fatalf("files of c1 left: %v", left)
	}
	for n, b := range others {
		if now, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(now) != string(b) {
			t.Errorf("%s of another crawl changed (%v)", n, err)
		}
	}
	got := attempts(t, legacy)
	if slices.Contains(got, "c1") || !slices.Contains(got, "c-2") {
		t.Fatalf("rewritten legacy file holds %v, want c-2's fetches only", got)
	}
	recs, _ := specRead(legacy)
	if strings.Contains(string(recs[0].block), "c1") {
		t.Errorf("rewritten warcinfo still names c1: %q", recs[0].block)
	}
	byOffset := map[int64]specRecord{}
	for _, rec := range recs {
		byOffset[rec.offset] = rec
	}
	idx, _ := os.ReadFile(legacy + indexSuffix)
	lines := strings.Split(strings.TrimSpace(string(idx)), "\n")
	if len(lines) != len(got) {
		t.Fatalf("index of the rewritten file: %d lines, %d captures", len(lines), len(got))
	}
	for _, line := range lines {
		var e cdxEntry
		parts := strings.SplitN(line, " ", 3)
		if len(parts) != 3 || json.Unmarshal([]byte(parts[2]), &e) != nil {
			t.Fatalf("cdxj line %q", line)
		}
		rec, ok := byOffset[e.Offset]
		if !ok || rec.length != e.Length || rec.get("WARC-Target-URI") != e.URL {
			t.Fatalf("cdxj line %q points at no record of that length and URL", line)
		}
	}
	if file := archive(a.w, "c1", "/page/c1-late"); file != "" {
		t.Errorf("a fetch of the deleted crawl archived in %s", file)
	}
	if left := crawlFiles(t, dir, "c1"); len(left) != 0 {
		t.Fatalf("files of c1 after its deletion: %v", left)
	}
	if n := testutil.ToFloat64(a.w.m.deletedFiles); int(n) != r.Files {
		t.Errorf("deleted files counted %v, removed %d", n, r.Files)
	}
	if n := testutil.ToFloat64(a.w.m.deletedBytes); int64(n) != r.RemovedBytes() {
		t.Errorf("deleted bytes counted %v, removed %d", n, r.RemovedBytes())
	}
	again, err := a.w.DeleteCrawl(ctx, "c1")
	if err != nil || again.Files != 0 || len(again.Rewritten) != 0 {
		t.Errorf("second DeleteCrawl %+v, %v: want nothing removed", again, err)
	}
	if _, err := a.w.DeleteCrawl(ctx, ""); err == nil {
		t.Error("DeleteCrawl of an empty id accepted")
	}
	a.stop()
	a = nil

	st, _ := os.Stat(legacy)
	var bytesListed uint64
	if err := store.Conn().QueryRow(ctx, "SELECT bytes FROM warc_files FINAL WHERE file = ?", filepath.Base(legacy)).Scan(&bytesListed); err != nil {
		t.Fatal(err)
	}
	if int64(bytesListed) != st.Size() {
		t.Errorf("warc_files lists the rewritten file with %d bytes, it has %d", bytesListed, st.Size())
	}
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
