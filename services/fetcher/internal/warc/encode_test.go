package warc

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// TestEncodeBadValues: header values with line breaks (a URL, an ETag
// echoed in a header would be the way in) do not make header lines of
// their own: the record reads with gowarc's strict reader, every digest
// valid, with one WARC-Type and the URL's line break made a space; an
// empty block and an empty HTTP body are valid records too.
func TestEncodeBadValues(t *testing.T) {
	e := newEncoder()
	recs := []*record{
		{typ: "response", uri: "http://bad.test/a\r\nWARC-Type: resource", date: warcDate(time.Now()), id: e.newID(),
			contentType: httpResponseType, parts: [][]byte{[]byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"), nil},
			payloadDigest: emptyDigest, fields: []field{{"WARC-IP-Address", "127.0.0.1\n"}}},
		{typ: "metadata", uri: "http://bad.test/b", date: warcDate(time.Now()), id: e.newID(), contentType: warcFieldsType},
		{typ: "request", uri: "http://bad.test/c", date: warcDate(time.Now()), id: e.newID(), contentType: httpRequestType,
			parts: [][]byte{[]byte("GET /c HTTP/1.1\r\nHost: bad.test\r\n\r\n")}, payloadDigest: emptyDigest},
	}
	ids := []string{recs[0].id, recs[1].id, recs[2].id}
	for _, r := range recs {
		if _, err := e.member(r, ids, "<urn:uuid:00000000-0000-4000-8000-000000000000>"); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.warc.gz")
	if err := os.WriteFile(path, e.out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	n := readStrict(t, path, func(n int, h *gowarc.WarcFields) {
		if got := h.GetAll(gowarc.WarcType); len(got) != 1 || got[0] != recs[n].typ {
			t.Errorf("record %d: WARC-Type %q, want %q", n, got, recs[n].typ)
		}
		if got := h.GetAll(gowarc.WarcConcurrentTo); len(got) != 2 {
			t.Errorf("record %d: WARC-Concurrent-To %q, want the 2 others", n, got)
		}
		if n == 0 && (h.Get(gowarc.WarcTargetURI) != "http://bad.test/a  WARC-Type: resource" || h.Get(gowarc.WarcIPAddress) != "127.0.0.1") {
			t.Errorf("line breaks kept: URI %q, IP %q", h.Get(gowarc.WarcTargetURI), h.Get(gowarc.WarcIPAddress))
		}
	})
	if n != len(recs) {
		t.Fatalf("read %d records, wrote %d", n, len(recs))
	}
	if d := e.digest(); d != emptyDigest {
		t.Errorf("digest of nothing %s, emptyDigest %s", d, emptyDigest)
	}
}

// TestRecordIDs: record ids are version 4 UUID URNs, all different.
func TestRecordIDs(t *testing.T) {
	re := regexp.MustCompile(`^<urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}>$`)
	e, e2 := newEncoder(), newEncoder()
	seen := map[string]bool{}
	for range 10000 {
		for _, id := range []string{e.newID(), e2.newID()} {
			if !re.MatchString(id) || seen[id] {
				t.Fatalf("id %q: malformed or seen before", id)
			}
			seen[id] = true
		}
	}
}

// TestFailedWrite: a write that fails closes the file (counted, the fetch
// not archived); the file keeps its fetches before, read back to be
// indexed; the next fetch goes to a new file, indexed as written.
func TestFailedWrite(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(Options{Dir: dir, Instance: "fail-1"}, nil, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	archive := func(i int) (string, error) {
		res := &httpfetch.Response{Status: 200, Start: time.Now(), Exchange: &httpfetch.Exchange{
			Method: "GET", RequestURI: "/p", RequestHost: "fail.test", RequestHeader: http.Header{},
			Proto: "HTTP/1.1", Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}}, Body: benchPage(i), BodyRead: true,
		}}
		file, _, err := w.Archive(ctx, request("c1", fmt.Sprintf("http://fail.test/p/%d", i), 0, ""), res)
		return file, err
	}
	first, err := archive(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := archive(1); err != nil {
		t.Fatal(err)
	}
	// The file's descriptor made read-only: the next write fails.
	gowarcMu.Lock()
	cf := w.crawls["c1"]
	ro, err := os.Open(cf.path)
	if err != nil {
		gowarcMu.Unlock()
		t.Fatal(err)
	}
	_ = cf.f.Close()
	cf.f = ro
	gowarcMu.Unlock()
	if _, err := archive(2); err == nil {
		t.Fatal("archive to a read-only file: no error")
	}
	second, err := archive(3)
	if err != nil {
		t.Fatal(err)
	}
	if second == first {
		t.Errorf("the fetch after the failed write went to %s again", first)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(w.m.errors); n != 1 {
		t.Errorf("write errors: %v, want 1", n)
	}
	if n := testutil.ToFloat64(w.m.indexReread); n != 1 {
		t.Errorf("files read again to be indexed: %v, want 1 (the one the write failed in)", n)
	}
	warcs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(warcs) != 2 {
		t.Fatalf("files %v, want 2", warcs)
	}
	checkIndexes(t, nil, "", warcs)
	idx, err := os.ReadFile(filepath.Join(dir, first+indexSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(idx), "\n"); lines != 2 || strings.Contains(string(idx), "/p/2") {
		t.Errorf("index of the file the write failed in:\n%s\nwant fetches 0 and 1", idx)
	}
}

// BenchmarkEncode: one fetch's three records encoded (digests, headers,
// gzip members), without the file.
func BenchmarkEncode(b *testing.B) {
	w := &Writer{enc: newEncoder(), digests: newMemory[revisitTarget](-1), opts: Options{Instance: "bench"}}
	res := &httpfetch.Response{Status: 200, Start: time.Now(), Exchange: &httpfetch.Exchange{
		Method: "GET", RequestURI: "/p", RequestHost: "bench.test", RequestHeader: http.Header{"User-Agent": {"trawl/0.1"}},
		Proto: "HTTP/1.1", Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}}, Body: benchPage(1), BodyRead: true,
	}}
	req := request("c1", "http://bench.test/p", 0, "")
	b.ReportAllocs()
	for range b.N {
		w.enc.out.Reset()
		bt := w.build(req, res)
		ids := []string{bt.recs[0].id, bt.recs[1].id, bt.recs[2].id}
		for _, r := range bt.recs {
			if _, err := w.enc.member(r, ids, ""); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// TestMemberCompression: a record under storedBelow is stored in its
// member (a little larger than the record), a page's is compressed (to
// less than half) unless the server compressed it (coded); all read back
// as written.
func TestMemberCompression(t *testing.T) {
	e := newEncoder()
	page := benchPage(3)
	for _, c := range []struct {
		block         []byte
		coded, stored bool
	}{{[]byte("crawl-id: c1\r\nattempt: 0\r\n"), false, true}, {page, false, false}, {page, true, true}} {
		e.out.Reset()
		r := &record{typ: "metadata", uri: "http://m.test/", date: warcDate(time.Now()), id: e.newID(), contentType: warcFieldsType,
			parts: [][]byte{c.block}, coded: c.coded}
		n, err := e.member(r, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		raw := len(e.hdr) + len(c.block) + 4
		if stored := n > int64(raw); stored != c.stored || (!stored && n > int64(raw/2)) {
			t.Errorf("record of %d bytes: member of %d bytes, want stored %v", raw, n, c.stored)
		}
		zr, err := gzip.NewReader(bytes.NewReader(e.out.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.HasSuffix(got, append(c.block, "\r\n\r\n"...)) || len(got) != raw {
			t.Errorf("member reads back %d bytes (%v), want the %d of the record", len(got), err, raw)
		}
	}
}

// TestCompressedCoding: which Content-Encoding values make a response's
// member stored (the payload compressed already).
func TestCompressedCoding(t *testing.T) {
	for ce, want := range map[string]bool{
		"gzip": true, " GZIP ": true, "x-gzip": true, "br": true, "zstd": true, "deflate": true, "identity, br": true,
		"": false, "identity": false, "gzip, identity": false, "aes128gcm": false, ",": false, "gzip;q=1": false,
	} {
		if got := compressedCoding(ce); got != want {
			t.Errorf("compressedCoding(%q) = %v, want %v", ce, got, want)
		}
	}
}

// TestStoredBlocks: stored DEFLATE blocks written by the encoder inflate
// to the bytes given, across the parts and across the 65535-byte limit of
// a block.
func TestStoredBlocks(t *testing.T) {
	e := newEncoder()
	data := bytes.Repeat([]byte("0123456789abcdef"), 200000/16)
	for _, n := range []int{0, 1, 65534, 65535, 65536, 2 * 65535, 200000} {
		for _, cut := range [][2]int{{0, 0}, {n / 3, 2 * n / 3}, {n, n}} {
			e.out.Reset()
			b := data[:n]
			e.store(n, b[:cut[0]], [][]byte{b[cut[0]:cut[1]], nil}, b[cut[1]:])
			got, err := io.ReadAll(flate.NewReader(bytes.NewReader(e.out.Bytes())))
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%d bytes cut at %v: inflate to %d bytes (%v)", n, cut, len(got), err)
			}
			if blocks := max(1, (n+maxStored-1)/maxStored); e.out.Len() != n+5*blocks {
				t.Errorf("%d bytes: %d stored, want %d blocks of 5 bytes of header", n, e.out.Len(), blocks)
			}
		}
	}
}

// TestMembersRead: the members of records stored (a server-compressed
// payload past a block's 65535 bytes) and compressed (DEFLATE level 1
// and Huffman-only: a page to less than 70 % and 45 % of its size),
// framed by the encoder, read with gowarc's strict reader, every digest
// valid, and with compress/gzip member by member; a resource record,
// whose block digest is its payload digest, too.
func TestMembersRead(t *testing.T) {
	for level, most := range map[int]float64{gzipLevel: 0.45, huffmanLevel: 0.7} {
		t.Run(fmt.Sprint("level=", level), func(t *testing.T) { testMembersRead(t, newEncoderLevel(level), most) })
	}
}

func testMembersRead(t *testing.T, e *encoder, most float64) {
	big := make([]byte, 150000)
	for i := range big {
		big[i] = byte(i * 7919 >> 3)
	}
	hdr := []byte("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n")
	recs := []*record{
		{typ: "response", uri: "http://m.test/coded", contentType: httpResponseType, parts: [][]byte{hdr, big},
			payloadDigest: e.digest(big), coded: true},
		{typ: "response", uri: "http://m.test/page", contentType: httpResponseType,
			parts: [][]byte{[]byte("HTTP/1.1 200 OK\r\n\r\n"), benchPage(5)}, payloadDigest: e.digest(benchPage(5))},
		{typ: "resource", uri: "ftp://m.test/f", contentType: "text/plain", parts: [][]byte{benchPage(6)},
			payloadDigest: e.digest(benchPage(6)), blockIsPayload: true},
	}
	var ends []int
	for _, r := range recs {
		r.date, r.id = warcDate(time.Now()), e.newID()
		if _, err := e.member(r, nil, ""); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, e.out.Len())
	}
	start := 0
	for i, end := range ends {
		zr, err := gzip.NewReader(bytes.NewReader(e.out.Bytes()[start:end]))
		if err != nil {
			t.Fatal(err)
		}
		zr.Multistream(false)
		got, err := io.ReadAll(zr)
		if err != nil || !bytes.HasSuffix(got, append(bytes.Join(recs[i].parts, nil), "\r\n\r\n"...)) {
			t.Errorf("member %d: %d bytes read (%v)", i, len(got), err)
		}
		if i > 0 && float64(end-start) > most*float64(len(got)) {
			t.Errorf("member %d: %d bytes of %d, want at most %.0f %%", i, end-start, len(got), 100*most)
		}
		start = end
	}
	path := filepath.Join(t.TempDir(), "m.warc.gz")
	if err := os.WriteFile(path, e.out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := readStrict(t, path, nil); n != len(recs) {
		t.Errorf("read %d records, wrote %d", n, len(recs))
	}
}

// TestCDXLine: cdxLine writes the line json.Marshal wrote of a cdxEntry,
// for URLs with queries, quotes, control characters, non-ASCII and
// invalid UTF-8, empty fields omitted.
func TestCDXLine(t *testing.T) {
	date := time.Date(2026, 11, 25, 10, 0, 0, 123, time.UTC)
	for _, uri := range []string{"http://www.Example.com/A?b=1&c=<2>", `http://q.test/"x"\y`, "http://q.test/a\tb\x01\x7f",
		"http://é.test/ü?x=\u2028", "http://q.test/\xff\xfe", "", "ftp://f.test:2121/p"} {
		for _, f := range [][3]string{{"text/html", "200", "sha1:AAAA"}, {"", "", ""}} {
			got := cdxLine("f.warc.gz", uri, date, f[2], f[1], f[0], 1234, 567)
			js, err := json.Marshal(cdxEntry{URL: uri, Mime: f[0], Status: f[1], Digest: f[2], Length: 567, Offset: 1234, Filename: "f.warc.gz"})
			if err != nil {
				t.Fatal(err)
			}
			if want := surt(uri) + " 20261125100000 " + string(js); got != want {
				t.Errorf("cdxLine\n got %s\nwant %s", got, want)
			}
		}
	}
}

// TestAppendHeader: appendHeader writes what http.Header.Write writes:
// keys sorted, invalid names dropped, values' line breaks made spaces and
// trimmed, several values of a key each on a line.
func TestAppendHeader(t *testing.T) {
	for _, h := range []http.Header{{}, {"Content-Type": {"text/html"}, "A": {"1", " 2 "}, "set-cookie": {"x=1\r\nInjected: y", ""}},
		{"Bad Name": {"v"}, "Bad:Name": {"v"}, "": {"v"}, "X-Ok": {"\tv\n"}, "É": {"v"}, "Z": {"ü"}}} {
		var want bytes.Buffer
		if err := h.Write(&want); err != nil {
			t.Fatal(err)
		}
		if got := appendHeader([]byte("x"), h); string(got) != "x"+want.String() {
			t.Errorf("appendHeader(%q)\n got %q\nwant %q", h, got[1:], want.String())
		}
	}
}

// readStrict reads the WARC file at path with gowarc, spec violations and
// syntax errors fatal, checks every record's block and payload digests,
// hands each record's header to fn (when not nil) with its index, and
// returns how many records it read.
func readStrict(t *testing.T, path string, fn func(n int, h *gowarc.WarcFields)) int {
	t.Helper()
	rd, err := gowarc.NewWarcFileReader(path, 0, gowarc.WithSpecViolationPolicy(gowarc.ErrFail), gowarc.WithSyntaxErrorPolicy(gowarc.ErrFail))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rd.Close() }()
	n := 0
	for rec, err := range rd.Records() {
		if err != nil {
			t.Fatalf("gowarc, record %d: %v", n, err)
		}
		if _, err := rec.WarcRecord.ValidateDigest(); err != nil {
			t.Errorf("gowarc digest, record %d: %v", n, err)
		}
		if fn != nil {
			fn(n, rec.WarcRecord.WarcHeader())
		}
		_ = rec.Close()
		n++
	}
	return n
}
