package warcdir

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEncodeCrawl: the encoding keeps file-name-safe characters, holds
// no '-' and decodes back; parts it does not make do not decode.
func TestEncodeCrawl(t *testing.T) {
	tests := []struct{ id, want string }{
		{"demo", "demo"},
		{"demo-1", "demo~2d1"},
		{"a.b_c", "a.b_c"},
		{"x/y", "x~2fy"},
		{"ü", "~c3~bc"},
		{"~", "~7e"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got := EncodeCrawl(tt.id)
			if got != tt.want || strings.Contains(got, "-") {
				t.Fatalf("EncodeCrawl(%q) = %q, want %q", tt.id, got, tt.want)
			}
			if back, ok := DecodeCrawl(got); !ok || back != tt.id {
				t.Fatalf("DecodeCrawl(%q) = %q, %v", got, back, ok)
			}
		})
	}
	for _, bad := range []string{"", "a-b", "~", "~2", "~zz", "~2D1", "~61", "a b"} {
		if id, ok := DecodeCrawl(bad); ok {
			t.Errorf("DecodeCrawl(%q) = %q, ok: want refused", bad, id)
		}
	}
}

// TestCrawlOf: a crawl's file, index and their open forms name it; a
// legacy file, another prefix, or anything else does not.
func TestCrawlOf(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	name := Name("trawl", "my-crawl", at, 7, "f-0") + ".gz"
	if name != "trawl-my~2dcrawl-20260102030405-00007-f-0.warc.gz" {
		t.Fatalf("Name = %q", name)
	}
	tests := []struct {
		name, crawl string
		ok, legacy  bool
	}{
		{name, "my-crawl", true, false},
		{name + ".open", "my-crawl", true, false},
		{name + ".cdxj", "my-crawl", true, false},
		{name + ".cdxj.open", "my-crawl", true, false},
		{"trawl-20260102030405-00007-f-0.warc.gz", "", false, true},                            // legacy
		{"trawl-12345678901234-20260102030405-00001-f.warc.gz", "12345678901234", true, false}, // a crawl of digits
		{"trawl-20260102030405-00007-f-0.warc.gz.cdxj", "", false, false},
		{"other-my~2dcrawl-20260102030405-00007-f-0.warc.gz", "", false, false},
		{"trawl-my~2dcrawl-2026-00007-f-0.warc.gz", "", false, false},
		{"trawl-my~2Dcrawl-20260102030405-00007-f-0.warc.gz", "", false, false}, // not EncodeCrawl's
		{".lock", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crawl, ok := CrawlOf("trawl", tt.name)
			if ok != tt.ok || crawl != tt.crawl {
				t.Errorf("CrawlOf = %q, %v; want %q, %v", crawl, ok, tt.crawl, tt.ok)
			}
			if got := Legacy("trawl", tt.name); got != tt.legacy {
				t.Errorf("Legacy = %v, want %v", got, tt.legacy)
			}
		})
	}
}

// TestLock: a second lock of a locked directory fails; it is free again
// once the first is closed.
func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "warc")
	l, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := Lock(dir); err == nil {
		_ = l2.Close()
		t.Fatal("a locked directory locked twice")
	}
	_ = l.Close()
	l2, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	_ = l2.Close()
}

// record is one gzip member holding a WARC record.
func record(t *testing.T, typ string, fields []string, block string) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "WARC/1.1\r\nWARC-Type: %s\r\nWARC-Date: 2026-01-02T03:04:05Z\r\n", typ)
	for i := 0; i+1 < len(fields); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", fields[i], fields[i+1])
	}
	sum := sha1.Sum([]byte(block))
	fmt.Fprintf(&b, "WARC-Block-Digest: sha1:%s\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n",
		base32.StdEncoding.EncodeToString(sum[:]), len(block), block)
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b.Bytes())
	_ = zw.Close()
	return z.Bytes()
}

// fetch is the three records of a fetch of crawl.
func fetch(t *testing.T, crawl, u string) [][]byte {
	return [][]byte{
		record(t, "request", []string{"WARC-Target-URI", u}, "GET / HTTP/1.1\r\n\r\n"),
		record(t, "response", []string{"WARC-Target-URI", u, "Trawl-Attempt", crawl + " 1 0 0"}, "HTTP/1.1 200 OK\r\n\r\n"+u),
		record(t, "metadata", []string{"WARC-Target-URI", u}, "crawl-id: "+crawl+"\r\n"),
	}
}

// writeFile writes the members to dir/name with a CDXJ index of its
// responses, and returns the members' offsets.
func writeFile(t *testing.T, dir, name string, members [][]byte) []int64 {
	t.Helper()
	var b bytes.Buffer
	var offs []int64
	var index []string
	for _, m := range members {
		offs = append(offs, int64(b.Len()))
		if bytes.Contains(gunzip(t, m), []byte("WARC-Type: response")) {
			index = append(index, fmt.Sprintf(`key %d {"url":"u","length":%d,"offset":%d,"filename":%q}`, len(index), len(m), b.Len(), name))
		}
		b.Write(m)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+IndexSuffix), []byte(strings.Join(index, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return offs
}

func gunzip(t *testing.T, m []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(m))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestRemoveCrawl: the crawl's closed, open and index files go, another
// crawl's stay; a legacy file of both crawls is rewritten with the other
// crawl's fetches only (its warcinfo without the crawl's spec, its
// digest and length made again, its index pointing at the moved
// records); a legacy file of the crawl alone is removed; a second call
// removes nothing.
func TestRemoveCrawl(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mine := Name("trawl", "gone-1", at, 1, "f0") + ".gz"
	other := Name("trawl", "kept", at, 2, "f0") + ".gz"
	writeFile(t, dir, mine, append([][]byte{record(t, "warcinfo", nil, "isPartOf: gone-1\r\n")}, fetch(t, "gone-1", "http://a/")...))
	writeFile(t, dir, other, append([][]byte{record(t, "warcinfo", nil, "isPartOf: kept\r\n")}, fetch(t, "kept", "http://b/")...))
	open := Name("trawl", "gone-1", at, 3, "f0") + ".gz.open"
	if err := os.WriteFile(filepath.Join(dir, open), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := record(t, "warcinfo", nil, "software: x\r\nisPartOf: kept\r\ncrawl-spec: {\"crawlId\":\"kept\"}\r\nisPartOf: gone-1\r\ncrawl-spec: {\"crawlId\":\"gone-1\"}\r\n")
	members := [][]byte{info}
	members = append(members, fetch(t, "kept", "http://k1/")...)
	members = append(members, fetch(t, "gone-1", "http://g1/")...)
	members = append(members, fetch(t, "kept", "http://k2/")...)
	legacy := "trawl-20250101000000-00001-f0.warc.gz"
	writeFile(t, dir, legacy, members)
	legacyOnly := "trawl-20250101000000-00002-f0.warc.gz"
	writeFile(t, dir, legacyOnly, append([][]byte{record(t, "warcinfo", nil, "isPartOf: gone-1\r\n")}, fetch(t, "gone-1", "http://g2/")...))
	untouched := "trawl-20250101000000-00003-f0.warc.gz"
	writeFile(t, dir, untouched, append([][]byte{record(t, "warcinfo", nil, "isPartOf: kept\r\n")}, fetch(t, "kept", "http://k3/")...))
	before, _ := os.ReadFile(filepath.Join(dir, untouched))

	r, err := RemoveCrawl(dir, "trawl", "gone-1")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(r.Closed)
	if r.Files != 3 || !slices.Equal(r.Closed, []string{legacyOnly, mine}) || len(r.Rewritten) != 1 || r.Bytes == 0 {
		t.Fatalf("removal %+v: want 3 files (closed, open, legacy of the crawl alone), one rewritten", r)
	}
	var left []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{ledgerName, legacy, legacy + IndexSuffix, untouched, untouched + IndexSuffix, other, other + IndexSuffix}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, untouched)); !bytes.Equal(before, after) {
		t.Error("a legacy file without the crawl was changed")
	}

	// The rewritten file: warcinfo + the two fetches of "kept".
	rw := r.Rewritten[0]
	if rw.File != legacy || rw.Records != 7 || rw.Responses != 2 || rw.RemovedRecords != 3 || rw.RemovedBytes <= 0 {
		t.Fatalf("rewrite %+v", rw)
	}
	ms, err := readMembers(filepath.Join(dir, legacy))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(dir, legacy))
	if len(ms) != 7 || rw.Bytes != st.Size() {
		t.Fatalf("%d records, %d bytes on disk; rewrite says %d bytes", len(ms), st.Size(), rw.Bytes)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, legacy))
	for i, m := range ms {
		rec := gunzip(t, raw[m.offset:m.offset+m.length])
		if bytes.Contains(rec, []byte("gone-1")) {
			t.Errorf("record %d still names the deleted crawl:\n%s", i, rec)
		}
		if i == 0 {
			head, block, _ := bytes.Cut(rec, []byte("\r\n\r\n"))
			block = bytes.TrimSuffix(block, []byte("\r\n\r\n"))
			sum := sha1.Sum(block)
			head = append(head, "\r\n"...)
			if !bytes.Contains(head, []byte(fmt.Sprintf("Content-Length: %d\r\n", len(block)))) ||
				!bytes.Contains(head, []byte("sha1:"+base32.StdEncoding.EncodeToString(sum[:]))) ||
				!bytes.Contains(block, []byte(`crawl-spec: {"crawlId":"kept"}`)) {
				t.Errorf("warcinfo not made again:\n%s", rec)
			}
		}
	}
	index, _ := os.ReadFile(filepath.Join(dir, legacy+IndexSuffix))
	lines := strings.Split(strings.TrimSpace(string(index)), "\n")
	if len(lines) != 2 {
		t.Fatalf("index %q: want the two kept responses", index)
	}
	for _, l := range lines {
		var off, length int64
		i := strings.Index(l, `"offset":`)
		j := strings.Index(l, `"length":`)
		_, _ = fmt.Sscanf(l[i:], `"offset":%d`, &off)
		_, _ = fmt.Sscanf(l[j:], `"length":%d`, &length)
		rec := gunzip(t, raw[off:off+length])
		if !bytes.Contains(rec, []byte("WARC-Type: response")) || !bytes.Contains(rec, []byte("Trawl-Attempt: kept")) {
			t.Errorf("index line %q points at\n%s", l, rec)
		}
	}

	again, err := RemoveCrawl(dir, "trawl", "gone-1")
	if err != nil || again.Files != 0 || len(again.Rewritten) != 0 || again.Bytes != 0 {
		t.Fatalf("second removal %+v, %v: want nothing", again, err)
	}
}

// TestRemoveCrawlBad: an empty crawl id is refused, a missing directory
// holds nothing, a damaged legacy file is an error naming it and is left
// as it was, and a rewrite a crash left is removed.
func TestRemoveCrawlBad(t *testing.T) {
	if _, err := RemoveCrawl(t.TempDir(), "trawl", ""); err == nil {
		t.Error("empty crawl id accepted")
	}
	if r, err := RemoveCrawl(filepath.Join(t.TempDir(), "none"), "trawl", "c"); err != nil || r.Files != 0 {
		t.Errorf("missing directory: %+v, %v", r, err)
	}
	dir := t.TempDir()
	damaged := "trawl-20250101000000-00001-f0.warc.gz"
	full := append(record(t, "warcinfo", nil, "isPartOf: c\r\n"), fetch(t, "c", "http://a/")[1][:20]...)
	if err := os.WriteFile(filepath.Join(dir, damaged), full, 0o644); err != nil {
		t.Fatal(err)
	}
	stale := damaged + rewriteSuffix
	if err := os.WriteFile(filepath.Join(dir, stale), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := RemoveCrawl(dir, "trawl", "c")
	if err == nil || !strings.Contains(err.Error(), damaged) {
		t.Fatalf("damaged legacy file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, damaged)); !bytes.Equal(b, full) {
		t.Error("damaged file changed")
	}
	if _, err := os.Stat(filepath.Join(dir, stale)); !os.IsNotExist(err) {
		t.Error("a stale rewrite was left")
	}
}

// TestRemoveCrawls: several crawls go in one pass: a legacy file of
// three crawls keeps the third's fetches only, and each crawl's own files
// go.
func TestRemoveCrawls(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, c := range []string{"a", "b", "c"} {
		writeFile(t, dir, Name("trawl", c, at, int64(i+1), "f0")+".gz", append([][]byte{record(t, "warcinfo", nil, "isPartOf: "+c+"\r\n")}, fetch(t, c, "http://"+c+"/")...))
	}
	members := [][]byte{record(t, "warcinfo", nil, "isPartOf: a\r\ncrawl-spec: {}\r\nisPartOf: b\r\ncrawl-spec: {}\r\nisPartOf: c\r\ncrawl-spec: {}\r\n")}
	for _, c := range []string{"a", "c", "b", "a"} {
		members = append(members, fetch(t, c, "http://"+c+"/x")...)
	}
	legacy := "trawl-20250101000000-00001-f0.warc.gz"
	writeFile(t, dir, legacy, members)
	r, err := RemoveCrawls(dir, "trawl", "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 2 || len(r.Rewritten) != 1 || r.Rewritten[0].RemovedRecords != 9 || r.Rewritten[0].Records != 4 {
		t.Fatalf("removal %+v", r)
	}
	ms, err := readMembers(filepath.Join(dir, legacy))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, legacy))
	for _, m := range ms {
		rec := gunzip(t, raw[m.offset:m.offset+m.length])
		if bytes.Contains(rec, []byte("isPartOf: a")) || bytes.Contains(rec, []byte("isPartOf: b")) || m.crawl == "a" || m.crawl == "b" {
			t.Errorf("a record of a deleted crawl left:\n%s", rec)
		}
	}
	if _, err := RemoveCrawls(dir, "trawl", "c", ""); err == nil {
		t.Error("an empty crawl id among others accepted")
	}
	if r, err := RemoveCrawls(dir, "trawl"); err != nil || r.Files != 0 {
		t.Errorf("no crawl: %+v, %v", r, err)
	}
}

// TestLedger: a crawl taken out of a directory's legacy files is not
// looked for in them again (no writer adds to them), while a file of its
// own that appeared since still goes; a crawl not in the ledger is.
func TestLedger(t *testing.T) {
	dir := t.TempDir()
	legacy := "trawl-20250101000000-00001-f0.warc.gz"
	writeFile(t, dir, legacy, append(append([][]byte{record(t, "warcinfo", nil, "software: x\r\n")}, fetch(t, "k", "http://k/")...), fetch(t, "x", "http://x/")...))
	if r, err := RemoveCrawl(dir, "trawl", "x"); err != nil || len(r.Rewritten) != 1 {
		t.Fatalf("first removal: %+v, %v", r, err)
	}
	// A legacy file holding x's records again (by hand: none is written)
	// is not read for x any more ...
	writeFile(t, dir, "trawl-20250101000000-00002-f0.warc.gz", append([][]byte{record(t, "warcinfo", nil, "software: x\r\n")}, fetch(t, "x", "http://x/2")...))
	own := Name("trawl", "x", time.Now(), 9, "f0") + ".gz"
	writeFile(t, dir, own, fetch(t, "x", "http://x/3"))
	r, err := RemoveCrawl(dir, "trawl", "x")
	if err != nil || r.Files != 1 || len(r.Rewritten) != 0 || !slices.Equal(r.Closed, []string{own}) {
		t.Fatalf("second removal: %+v, %v; want x's own new file only", r, err)
	}
	// ... while another crawl is.
	if r, err := RemoveCrawls(dir, "trawl", "x", "k"); err != nil || len(r.Rewritten) != 0 || r.Files != 1 {
		t.Fatalf("removal of k: %+v, %v; want the first legacy file (k's alone now) removed", r, err)
	}
	ledger, err := readLedger(dir)
	if err != nil || !ledger["x"] || !ledger["k"] || len(ledger) != 2 {
		t.Errorf("ledger %v, %v", ledger, err)
	}
}
