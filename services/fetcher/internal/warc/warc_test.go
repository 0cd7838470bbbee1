package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/text/encoding/simplifiedchinese"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/ftptest"
)

// childEnv makes the test binary a fetcher-like process that archives
// pages until it is killed (TestRecoverAfterKill).
const childEnv = "TRAWL_WARC_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(child(dir, os.Getenv("TRAWL_WARC_CHILD_SITE")))
	}
	os.Exit(chtest.MainLeakChecked(m))
}

// site is a test site on 127.0.0.x with every kind of answer the archive
// must keep as received.
// keptPDF is the body of the site's /manual.pdf: bytes that are not
// UTF-8, archived as received when the crawl keeps PDFs.
const keptPDF = "%PDF-1.4\n\xff\xfe\x00 binary \x80\x81 stream\n%%EOF\n"

func site(t testing.TB, ip string) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	html := func(s string) string {
		return "<html><head><title>" + s + "</title></head><body>" + strings.Repeat(s+" ", 40) + "</body></html>"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/manual.pdf", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write([]byte(keptPDF))
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(html("gzip")))
		_ = zw.Close()
	})
	mux.HandleFunc("/br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "br") {
			_, _ = w.Write([]byte(html("plain")))
			return
		}
		w.Header().Set("Content-Encoding", "br")
		bw := brotli.NewWriter(w)
		_, _ = bw.Write([]byte(html("brotli")))
		_ = bw.Close()
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for i := range 3 {
			_, _ = fmt.Fprintf(w, "<p>chunk %d</p>", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/gbk", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=gbk")
		b, _ := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(html("中文网页")))
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/etag", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte(html("etag")))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(html(strings.Repeat("big", 100))))
	})
	mux.HandleFunc("/same/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(html("same")))
	})
	mux.HandleFunc("/large/", func(w http.ResponseWriter, r *http.Request) {
		// 512 KiB that gzip cannot shrink much: archiving it takes a
		// while, so a kill lands mid-write.
		w.Header().Set("Content-Type", "text/plain")
		h := fnv.New64a()
		_, _ = h.Write([]byte(r.URL.Path))
		rng := rand.New(rand.NewPCG(h.Sum64(), 1)) // a payload per URL
		b := make([]byte, 512<<10)
		for i := range b {
			b[i] = byte(' ' + rng.IntN(95))
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/page/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(html(r.URL.Path)))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func request(crawl, u string, attempt uint32, etag string) *crawlv1.FetchRequest {
	return &crawlv1.FetchRequest{CrawlId: crawl, Url: u, UrlFp: uint64(len(u)) * 7919, Attempt: attempt, Etag: etag,
		Depth: 1, ParentUrl: "http://seed.test/", ScheduledAt: timestamppb.New(time.Unix(1700000000, 0))}
}

// TestArchiveCrawl: a crawl of a site with gzip, brotli (asked for by the
// fetcher's Accept-Encoding), chunked, GBK, a 304, a body cut at the cap,
// two identical payloads and an FTP file. Its WARC files read back with
// gowarc and with specRead (every record's Content-Length and digests
// verified), keep the bytes as received, and their CDXJ indexes point at
// every response; warc_files lists every file (real ClickHouse).
func TestArchiveCrawl(t *testing.T) {
	ctx := t.Context()
	base := site(t, "127.0.0.61")
	ftp := ftptest.Start(t, "127.0.0.62", ftptest.Options{Files: map[string]string{"/pub/data.bin": "\x00\x01binary\x02 file"}})
	store := chtest.NewStore(t)
	files := chstore.NewBatchWriter(store, chstore.WarcFiles, chstore.BatchOptions{MaxRows: 1, FlushInterval: 10 * time.Millisecond}, zap.NewNop(), nil)
	fctx, stopFiles := context.WithCancel(ctx)
	filesDone := make(chan error, 1)
	go func() { filesDone <- files.Run(fctx) }()

	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	w, err := Open(Options{Dir: dir, Instance: "test-1", MaxFileSize: 4 << 10, MaxBodyBytes: 4096, UserAgent: "trawl-test",
		Specs: func() []*crawlv1.CrawlSpec { return []*crawlv1.CrawlSpec{{CrawlId: "c1"}} }}, files, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(rctx) }()

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, MaxBodyBytes: 4096})
	defer f.Close()
	type fetched struct {
		url, file string
		offset    int64
		res       *httpfetch.Response
	}
	var got []fetched
	fetch := func(u, etag string) {
		res := f.Fetch(ctx, httpfetch.Request{URL: u, Host: "h", ETag: etag, Capture: true, Keep: []string{"application/pdf"}})
		file, off, err := w.Archive(ctx, request("c1", u, 0, etag), res)
		if err != nil {
			t.Fatalf("archive %s: %v", u, err)
		}
		if file == "" {
			t.Fatalf("archive %s: no record (status %d, err %v)", u, res.Status, res.Err)
		}
		got = append(got, fetched{u, file, off, res})
	}
	for _, p := range []string{"/gzip", "/br", "/chunked", "/gbk", "/big", "/same/1", "/same/2", "/manual.pdf"} {
		fetch(base+p, "")
	}
	fetch(base+"/etag", `"v1"`)
	fetch(ftp.URL()+"/pub/data.bin", "")
	for i := range 10 { // enough to rotate the 4 KiB files a few times
		fetch(fmt.Sprintf("%s/page/%d", base, i), "")
	}
	stop()
	if err := <-runDone; err != nil {
		t.Fatal(err)
	}
	stopFiles()
	if err := <-filesDone; err != nil {
		t.Fatal(err)
	}

	// What was received, per URL.
	if enc := got[1].res.Exchange.Header.Get("Content-Encoding"); enc != "br" {
		t.Fatalf("/br answered with Content-Encoding %q: the fetcher did not ask for brotli", enc)
	}

	warcs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	opens, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	if len(opens) != 0 || len(warcs) < 3 {
		t.Fatalf("files: %d closed, %d open; want ≥3 closed (rotation at 4 KiB) and none open", len(warcs), len(opens))
	}
	byFileOffset := map[string]specRecord{}
	indexed := map[string]bool{}
	revisits := map[string]string{}
	for _, path := range warcs {
		name := filepath.Base(path)
		if !strings.HasPrefix(name, "trawl-c1-") || !strings.HasSuffix(name, "-test-1.warc.gz") {
			t.Errorf("file name %s: want trawl-c1-<timestamp>-<serial>-test-1.warc.gz", name)
		}
		recs, err := specRead(path)
		if err != nil {
			t.Fatalf("spec reader, %s: %v", name, err)
		}
		if recs[0].get("WARC-Type") != "warcinfo" || !strings.Contains(string(recs[0].block), "software: trawl-fetcher/") ||
			!strings.Contains(string(recs[0].block), `crawl-spec: {"crawlId":"c1"}`) {
			t.Errorf("%s: first record %s, block %q", name, recs[0].get("WARC-Type"), recs[0].block)
		}
		for _, r := range recs {
			byFileOffset[fmt.Sprintf("%s@%d", name, r.offset)] = r
			if r.get("WARC-Type") == "revisit" {
				revisits[r.get("WARC-Target-URI")] = r.get("WARC-Profile")
			}
		}
		// gowarc reads the same file, with every digest validated.
		n := 0
		rd, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithSpecViolationPolicy(gowarc.ErrFail))
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range rd.Records() {
			if err != nil {
				t.Fatalf("gowarc, %s: %v", name, err)
			}
			if _, err := rec.WarcRecord.ValidateDigest(); err != nil {
				t.Fatalf("gowarc digest, %s: %v", name, err)
			}
			_ = rec.Close()
			n++
		}
		_ = rd.Close()
		if n != len(recs) {
			t.Errorf("%s: gowarc read %d records, the spec reader %d", name, n, len(recs))
		}
		// The CDXJ index: every capture, pointing at its record.
		idx, err := os.ReadFile(path + ".cdxj")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(idx)), "\n") {
			if line == "" {
				continue
			}
			parts := strings.SplitN(line, " ", 3)
			var e cdxEntry
			if len(parts) != 3 || json.Unmarshal([]byte(parts[2]), &e) != nil {
				t.Fatalf("cdxj line %q", line)
			}
			r, ok := byFileOffset[fmt.Sprintf("%s@%d", e.Filename, e.Offset)]
			if !ok || r.length != e.Length || r.get("WARC-Target-URI") != e.URL {
				t.Fatalf("cdxj line %q points at no record of that length and URL", line)
			}
			indexed[e.Filename+"@"+fmt.Sprint(e.Offset)] = true
		}
	}
	for _, g := range got {
		key := fmt.Sprintf("%s@%d", g.file, g.offset)
		r, ok := byFileOffset[key]
		if !ok || r.get("WARC-Target-URI") != g.url {
			t.Fatalf("%s: Archive returned %s, which holds no record of it", g.url, key)
		}
		if !indexed[key] {
			t.Errorf("%s: not in the CDXJ index", g.url)
		}
		p, _ := specPayload(r)
		switch path := strings.TrimPrefix(g.url, base); path {
		case "/gzip", "/br":
			if !bytes.Equal(p, g.res.Exchange.Body) || bytes.Contains(p, []byte("<html>")) {
				t.Errorf("%s: payload is not the coded body as received", path)
			}
		case "/chunked":
			if !bytes.Contains(r.block, []byte("X-Crawler-Transfer-Encoding: chunked")) || string(p) != "<p>chunk 0</p><p>chunk 1</p><p>chunk 2</p>" {
				t.Errorf("chunked: block %q", r.block)
			}
		case "/gbk":
			want, _ := simplifiedchinese.GBK.NewEncoder().Bytes([]byte("中文网页"))
			if !bytes.Contains(p, want) {
				t.Errorf("gbk: payload not GBK as received")
			}
		case "/manual.pdf":
			// A document the crawl keeps: archived as received, and the
			// same bytes go to the parser.
			if string(p) != keptPDF || string(g.res.Body) != keptPDF {
				t.Errorf("manual.pdf: payload %q, body %q, want the PDF as served", p, g.res.Body)
			}
		case "/big":
			if r.get("WARC-Truncated") != "length" || len(p) != 4096 {
				t.Errorf("big: WARC-Truncated %q, payload %d bytes", r.get("WARC-Truncated"), len(p))
			}
		case "/same/2":
			if r.get("WARC-Type") != "revisit" || revisits[g.url] != gowarc.ProfileIdenticalPayloadDigestV1_1 ||
				r.get("WARC-Refers-To-Target-URI") != base+"/same/1" {
				t.Errorf("same/2: %s %q refers to %q", r.get("WARC-Type"), r.get("WARC-Profile"), r.get("WARC-Refers-To-Target-URI"))
			}
		case "/etag":
			if r.get("WARC-Type") != "revisit" || r.get("WARC-Profile") != gowarc.ProfileServerNotModifiedV1_1 {
				t.Errorf("304: %s %q", r.get("WARC-Type"), r.get("WARC-Profile"))
			}
		default:
			if strings.HasPrefix(g.url, "ftp://") && (r.get("WARC-Type") != "resource" || string(r.block) != "\x00\x01binary\x02 file") {
				t.Errorf("ftp: %s %q", r.get("WARC-Type"), r.block)
			}
		}
	}

	var listed uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM warc_files FINAL WHERE fetcher = 'test-1' AND bytes > 0 AND crawl_id = 'c1'").Scan(&listed); err != nil {
		t.Fatal(err)
	}
	if int(listed) != len(warcs) {
		t.Errorf("warc_files lists %d files, %d written", listed, len(warcs))
	}
	// Every index was made while its file was written, none read back,
	// and each is the one read back from its file, byte for byte, its
	// counts too.
	checkIndexes(t, store, "test-1", warcs)
	if n := testutil.ToFloat64(w.m.indexReread); n != 0 {
		t.Errorf("files read again to be indexed: %v, want 0", n)
	}
	if n := w.indexBytes.Load(); n != 0 {
		t.Errorf("index lines of closed files still counted: %d bytes", n)
	}
	if n := testutil.ToFloat64(w.m.records.WithLabelValues("revisit")); n != 2 {
		t.Errorf("revisit records: %v, want 2", n)
	}
	t.Logf("%d files, %d records, %d fetches", len(warcs), len(byFileOffset), len(got))
}

// checkIndexes checks that the .cdxj of each file of warcs is the index
// read back from the file (every record verified), byte for byte, and
// that its warc_files row (of fetcher; store nil: unlisted) has the
// counts read back.
func checkIndexes(t *testing.T, store *chstore.Store, fetcher string, warcs []string) {
	t.Helper()
	for _, path := range warcs {
		name := filepath.Base(path)
		ix, err := indexFile(path, true)
		if err != nil {
			t.Fatalf("read back %s: %v", name, err)
		}
		want := path + ".want"
		if err := writeIndex(want, ix.lines); err != nil {
			t.Fatal(err)
		}
		wantB, _ := os.ReadFile(want)
		_ = os.Remove(want)
		got, err := os.ReadFile(path + indexSuffix)
		if err != nil {
			t.Fatal(err)
		}
		if len(ix.lines) == 0 || !bytes.Equal(got, wantB) {
			t.Errorf("%s: index written\n%s\nread back from the file\n%s", name, got, wantB)
		}
		if store == nil {
			continue
		}
		var records, responses, revisits uint32
		var opened time.Time
		if err := store.Conn().QueryRow(t.Context(), "SELECT records, responses, revisits, opened_at FROM warc_files FINAL "+
			"WHERE fetcher = ? AND file = ?", fetcher, name).Scan(&records, &responses, &revisits, &opened); err != nil {
			t.Fatalf("%s: warc_files row: %v", name, err)
		}
		if int(records) != ix.records || int(responses) != ix.responses || int(revisits) != ix.revisits || !opened.Equal(ix.opened) {
			t.Errorf("%s: listed %d records, %d responses, %d revisits, opened %v; read back %d, %d, %d, %v", name,
				records, responses, revisits, opened, ix.records, ix.responses, ix.revisits, ix.opened)
		}
	}
}

// child archives pages of site until it is killed, printing each URL once
// Archive returned (as the fetcher acks it then).
func child(dir, base string) int {
	w, err := Open(Options{Dir: dir, Instance: "child", MaxFileSize: 4 << 20, MaxBodyBytes: 1 << 20}, nil, zap.NewNop(), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.TODO() // a process of its own, killed: no test context
	go func() { _ = w.Run(ctx) }()
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		u := fmt.Sprintf("%s/page/%d", base, i)
		if i%2 == 1 {
			u = fmt.Sprintf("%s/large/%d", base, i)
		}
		res := f.Fetch(ctx, httpfetch.Request{URL: u, Host: "h", Capture: true})
		if _, _, err := w.Archive(ctx, request("c1", u, 0, ""), res); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(out, u)
		_ = out.Flush()
	}
}

// TestRecoverAfterKill: a process archiving pages is killed with SIGKILL
// mid-write (every other page is 512 KiB that gzip cannot shrink), after
// a hundred acknowledged pages. The next Open closes
// the file it left open (cut after the last complete fetch): every closed
// file reads back whole, every acknowledged page is in them, and pages
// archived again after the restart are counted as duplicates.
func TestRecoverAfterKill(t *testing.T) {
	base := site(t, "127.0.0.63")
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "TRAWL_WARC_CHILD_SITE="+base)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		acked[sc.Text()] = true
		if len(acked) == 101 { // pages 0-100: the next is a large one
			break
		}
	}
	// Kill as soon as the large page's records start reaching the file:
	// in the middle of its gzip member.
	size := max(openSize(dir), 0)
	for openSize(dir) < size+1024 {
		runtime.Gosched()
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() { // what it acked before it died
		acked[sc.Text()] = true
	}
	_ = cmd.Wait()
	if len(acked) < 101 {
		t.Fatalf("child acked %d pages", len(acked))
	}
	opens, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	if len(opens) != 1 {
		t.Fatalf("%d files left open by the kill, want 1", len(opens))
	}
	// Whether the kill cut a record depends on the scheduler; when it
	// did (most runs), the recovered file is shorter. The cuts
	// themselves are TestRecoverCuts'.
	leftOpen := strings.TrimSuffix(opens[0], ".open")
	st, err := os.Stat(opens[0])
	if err != nil {
		t.Fatal(err)
	}
	killedSize := st.Size()

	reg := prometheus.NewRegistry()
	w, err := Open(Options{Dir: dir, Instance: "after"}, nil, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// The restarted process archives again a page of the file left open
	// (as after the re-delivery of a fetch not acked): a counted
	// duplicate.
	recs, err := specRead(leftOpen)
	if err != nil {
		t.Fatalf("recovered file: %v", err)
	}
	u := recs[len(recs)-1].get("WARC-Target-URI")
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	if _, _, err := w.Archive(ctx, request("c1", u, 0, ""), f.Fetch(ctx, httpfetch.Request{URL: u, Host: "h", Capture: true})); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(w.m.recovered.WithLabelValues("closed")); n != 1 {
		t.Errorf("recovered files: %v, want 1", n)
	}
	st, err = os.Stat(leftOpen)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the file left open: %d bytes at the kill, %d cut", killedSize, killedSize-st.Size())
	if n := testutil.ToFloat64(w.m.duplicates); n != 1 {
		t.Errorf("duplicates counted: %v, want 1", n)
	}
	opens, _ = filepath.Glob(filepath.Join(dir, "*.open"))
	warcs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(opens) != 0 {
		t.Fatalf("still open: %v", opens)
	}
	archived := map[string]bool{}
	for _, path := range warcs {
		recs, err := specRead(path)
		if err != nil {
			t.Fatalf("closed file %s is corrupt: %v", filepath.Base(path), err)
		}
		if _, err := os.Stat(path + ".cdxj"); err != nil {
			t.Errorf("%s has no index", filepath.Base(path))
		}
		for _, r := range recs {
			if r.get("WARC-Type") == "response" || r.get("WARC-Type") == "revisit" {
				archived[r.get("WARC-Target-URI")] = true
			}
		}
	}
	missing := 0
	for u := range acked {
		if !archived[u] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged pages are not in the archive", missing, len(acked))
	}
	// The recovered file's index (read back) and the others' (written
	// by the child as it wrote them, or read back after the kill) are
	// the files' own.
	checkIndexes(t, nil, "", warcs)
	t.Logf("killed after %d acknowledged pages; %d files, %d pages archived", len(acked), len(warcs), len(archived))
}

// openSize is the size of the files open in dir, or -1.
func openSize(dir string) int64 {
	opens, _ := filepath.Glob(filepath.Join(dir, "*.open"))
	n := int64(-1)
	for _, p := range opens {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestRecoverCuts: files a crash left open at each point of a fetch's
// write: mid-member (a gzip member cut short), between the response and
// the metadata of a fetch (the fetch is incomplete: cut), after only the
// warcinfo (discarded), and complete (closed as is); and a closed file
// ending in part of a record (a failed write closes the file at once):
// cut when it is indexed.
func TestRecoverCuts(t *testing.T) {
	base := site(t, "127.0.0.65")
	src := t.TempDir()
	w, err := Open(Options{Dir: src, Instance: "src"}, nil, zap.NewNop(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	for _, p := range []string{"/page/a", "/large/b"} {
		if _, _, err := w.Archive(ctx, request("c1", base+p, 0, ""), f.Fetch(ctx, httpfetch.Request{URL: base + p, Host: "h", Capture: true})); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(src, "*.warc.gz"))
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	recs, err := specRead(files[0])
	if err != nil || len(recs) != 7 { // warcinfo, 2 × (request, response, metadata)
		t.Fatalf("%d records, %v", len(recs), err)
	}
	firstFetch := recs[3].offset + recs[3].length // after the first metadata
	largeResp := recs[5]
	tests := []struct {
		name    string
		size    int64
		want    int64 // size after recovery; -1: discarded
		fetches int
		closed  bool // a closed file without index (a write failed in it), not one left open
	}{
		{"mid-member", largeResp.offset + largeResp.length/2, firstFetch, 1, false},
		{"response without metadata", largeResp.offset + largeResp.length, firstFetch, 1, false},
		{"warcinfo only", recs[1].offset, -1, 0, false},
		{"complete", int64(len(data)), int64(len(data)), 2, false},
		{"closed after a failed write", largeResp.offset + largeResp.length/3, firstFetch, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			name := filepath.Join(dir, filepath.Base(files[0]))
			written := name + ".open"
			if tt.closed {
				written = name
			}
			if err := os.WriteFile(written, data[:tt.size], 0o644); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			w, err := Open(Options{Dir: dir, Instance: "after"}, nil, zaptest.NewLogger(t), reg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			stop()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(name + ".open"); err == nil {
				t.Fatal("still open")
			}
			st, err := os.Stat(name)
			if tt.want < 0 {
				if err == nil {
					t.Fatalf("kept %d bytes, want the file discarded", st.Size())
				}
				return
			}
			if err != nil || st.Size() != tt.want {
				t.Fatalf("recovered to %v bytes (%v), want %d", st, err, tt.want)
			}
			got, err := specRead(name)
			if err != nil || len(got) != 1+3*tt.fetches {
				t.Fatalf("recovered file: %d records, %v", len(got), err)
			}
			if _, err := os.Stat(name + ".cdxj"); err != nil {
				t.Fatalf("no index: %v", err)
			}
		})
	}
}

// TestNamesSkipExisting: a file name the directory holds already (a
// restart within the same second starts the serial again) is never
// given out again.
func TestNamesSkipExisting(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var serial atomic.Int64
	n := &names{dir: dir, prefix: "trawl", crawl: "c", instance: "i", now: func() time.Time { return at }, serial: &serial}
	for _, taken := range []string{"trawl-c-20260102030405-00001-i.warc.gz", "trawl-c-20260102030405-00002-i.warc.gz.open"} {
		if err := os.WriteFile(filepath.Join(dir, taken), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, name := n.NewWarcfileName(); name != "trawl-c-20260102030405-00003-i.warc" {
		t.Fatalf("name %s, want serial 3 (1 and 2 are taken)", name)
	}
}

// TestIndexPastMemoryBound: with the index lines kept in memory bounded
// to less than one line, every file is read again when it closes (and
// counted so), and its index and listed counts are still the file's; the
// memory counted goes back to 0.
func TestIndexPastMemoryBound(t *testing.T) {
	store := chtest.NewStore(t)
	files := chstore.NewBatchWriter(store, chstore.WarcFiles, chstore.BatchOptions{MaxRows: 1, FlushInterval: 10 * time.Millisecond}, zap.NewNop(), nil)
	fctx, stopFiles := context.WithCancel(t.Context())
	filesDone := make(chan error, 1)
	go func() { filesDone <- files.Run(fctx) }()
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, Instance: "bound-1", MaxFileSize: 16 << 10, MaxIndexBytes: 100}, files, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for i := range 8 {
		body := benchPage(i)
		res := &httpfetch.Response{Status: 200, Start: time.Now(), Exchange: &httpfetch.Exchange{
			Method: "GET", RequestURI: "/p", RequestHost: "bound.test", RequestHeader: http.Header{},
			Proto: "HTTP/1.1", Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}}, Body: body, BodyRead: true,
		}}
		if _, _, err := w.Archive(ctx, request("c1", fmt.Sprintf("http://bound.test/p/%d", i), 0, ""), res); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stopFiles()
	if err := <-filesDone; err != nil {
		t.Fatal(err)
	}
	warcs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(warcs) < 2 {
		t.Fatalf("%d files, want ≥2 (16 KiB each)", len(warcs))
	}
	checkIndexes(t, store, "bound-1", warcs)
	if n := testutil.ToFloat64(w.m.indexReread); int(n) != len(warcs) {
		t.Errorf("files read again to be indexed: %v, want %d", n, len(warcs))
	}
	if n := w.indexBytes.Load(); n != 0 {
		t.Errorf("index lines still counted: %d bytes", n)
	}
}
