package warcdir

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Removal is what RemoveCrawl removed from a directory.
type Removal struct {
	// Files are the crawl's WARC files removed (closed, open, or legacy
	// files that held nothing else), Bytes the bytes they and their
	// indexes took.
	Files int
	Bytes int64
	// Closed names the closed files removed (the rows of warc_files
	// that listed them).
	Closed []string
	// Rewritten are the legacy files that mixed the crawl's records with
	// others', rewritten without them.
	Rewritten []Rewrite
}

// Add adds o's counts and names to r.
func (r *Removal) Add(o Removal) {
	r.Files += o.Files
	r.Bytes += o.Bytes
	r.Closed = append(r.Closed, o.Closed...)
	r.Rewritten = append(r.Rewritten, o.Rewritten...)
}

// RemovedBytes is Bytes plus what the rewrites took out of legacy files.
func (r Removal) RemovedBytes() int64 {
	n := r.Bytes
	for _, w := range r.Rewritten {
		n += w.RemovedBytes
	}
	return n
}

// Rewrite is a legacy file rewritten without a crawl's records: what it
// holds now (for its warc_files row) and what went.
type Rewrite struct {
	File                         string    // its name (unchanged)
	Opened                       time.Time // its warcinfo's date
	Bytes                        int64     // its size now
	Records, Responses, Revisits int       // what it holds now
	RemovedRecords               int
	RemovedBytes                 int64
}

// RemoveCrawl is RemoveCrawls of one crawl.
func RemoveCrawl(dir, prefix, crawlID string) (Removal, error) {
	return RemoveCrawls(dir, prefix, crawlID)
}

// RemoveCrawls removes the crawls' WARC files, their CDXJ indexes and their
// open forms from dir (files named with prefix), and rewrites the legacy
// files of dir that hold records of the crawls without them, in one pass
// over them whatever the number of crawls (a copy written
// beside the file, fsynced, its index removed, renamed over the file,
// and the index written again from the old one's lines: a crash leaves
// either file whole, at worst without an index, which the fetcher's next
// start writes). A legacy file left with no fetch is removed. The caller
// holds dir's lock (Lock) or is the process that does (the fetcher, after
// closing the crawl's open file). Repeating it finds nothing more to do.
//
// No writer adds records to a legacy file, so a crawl is taken out of
// them once per directory: the crawls done are kept in dir/.deleted (one
// id a line), and a later call for them (a fetcher's every start, for
// every crawl deleted so far) reads no legacy file; their own files are
// still looked for.
func RemoveCrawls(dir, prefix string, crawlIDs ...string) (Removal, error) {
	var r Removal
	gone := make(map[string]bool, len(crawlIDs))
	for _, id := range crawlIDs {
		if id == "" {
			return r, errors.New("remove warc files: empty crawl id")
		}
		gone[id] = true
	}
	if len(gone) == 0 {
		return r, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("read warc directory: %w", err)
	}
	ledger, err := readLedger(dir)
	if err != nil {
		return r, err
	}
	rewrite := make(map[string]bool, len(gone)) // the crawls legacy files are read for
	for id := range gone {
		if !ledger[id] {
			rewrite[id] = true
		}
	}
	var legacy []string
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, rewriteSuffix) {
			_ = os.Remove(path) // a rewrite a crash interrupted: the file is whole
			continue
		}
		if Legacy(prefix, name) {
			if len(rewrite) > 0 {
				legacy = append(legacy, name)
			}
			continue
		}
		if id, ok := CrawlOf(prefix, name); !ok || !gone[id] {
			continue
		}
		st, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return r, fmt.Errorf("stat warc file: %w", err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return r, fmt.Errorf("remove warc file: %w", err)
		}
		r.Bytes += st.Size()
		switch {
		case strings.HasSuffix(name, WarcSuffix):
			r.Files++
			r.Closed = append(r.Closed, name)
		case strings.HasSuffix(name, WarcSuffix+OpenSuffix):
			r.Files++
		}
	}
	for _, name := range legacy {
		rw, removed, err := rewriteWithout(filepath.Join(dir, name), rewrite)
		if err != nil {
			return r, fmt.Errorf("rewrite %s without deleted crawls: %w", name, err)
		}
		switch {
		case removed:
			r.Files++
			r.Bytes += rw.RemovedBytes
			r.Closed = append(r.Closed, name)
		case rw.Bytes > 0: // rewritten
			r.Rewritten = append(r.Rewritten, rw)
		}
	}
	if len(rewrite) > 0 {
		if err := writeLedger(dir, ledger, rewrite); err != nil {
			return r, err
		}
	}
	return r, nil
}

// member is one gzip member (one record) of a WARC file.
type member struct {
	offset, length int64
	typ            string // WARC-Type
	crawl          string // the crawl of its Trawl-Attempt field, "" when none
	record         []byte // the whole record, for warcinfo only
}

// attemptField names the attempt of a capture record: "<crawl> …".
const attemptField = "Trawl-Attempt"

// readMembers reads the gzip members of the WARC file at path: a member
// that does not read whole is an error (a closed file is whole).
func readMembers(path string) ([]member, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open warc file: %w", err)
	}
	defer func() { _ = f.Close() }()
	cr := &countReader{r: f}
	br := bufio.NewReaderSize(cr, 256<<10)
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	zr := new(gzip.Reader)
	var out []member
	for {
		start := pos()
		if _, err := br.Peek(1); errors.Is(err, io.EOF) {
			return out, nil
		}
		if err := zr.Reset(br); err != nil {
			return nil, fmt.Errorf("gzip member at %d: %w", start, err)
		}
		zr.Multistream(false)
		m, err := readRecord(zr)
		if err != nil {
			return nil, fmt.Errorf("record at %d: %w", start, err)
		}
		m.offset, m.length = start, pos()-start
		out = append(out, m)
	}
}

// readRecord reads one record's header (and a warcinfo's whole record)
// and discards the rest of the member.
func readRecord(zr io.Reader) (member, error) {
	var m member
	var head bytes.Buffer
	rr := bufio.NewReader(io.TeeReader(zr, &head))
	line, err := rr.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "WARC/") {
		return m, fmt.Errorf("not a warc record: %q", line)
	}
	for {
		line, err := rr.ReadString('\n')
		if err != nil {
			return m, fmt.Errorf("read warc header: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch {
		case strings.EqualFold(k, "WARC-Type"):
			m.typ = v
		case strings.EqualFold(k, attemptField):
			m.crawl, _, _ = strings.Cut(v, " ")
		}
	}
	if m.typ == "warcinfo" {
		if _, err := io.Copy(io.Discard, rr); err != nil {
			return m, fmt.Errorf("read warcinfo: %w", err)
		}
		m.record = head.Bytes()
		return m, nil
	}
	if _, err := io.Copy(io.Discard, rr); err != nil {
		return m, fmt.Errorf("read warc record: %w", err)
	}
	return m, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// capture reports whether a record of type typ is a capture (what the
// index lists and warc_files counts).
func capture(typ string) bool { return typ == "response" || typ == "resource" || typ == "revisit" }

// rewriteWithout rewrites the legacy file at path without the crawls'
// (gone)
// fetches: the records of one fetch (request, capture, metadata, written
// together and ended by the metadata record) go together, by the crawl of
// their capture's attempt; the warcinfo record loses the crawl's
// specification. gone reports that nothing of another crawl was left and
// the file (and its index) was removed instead.
func rewriteWithout(path string, gone map[string]bool) (rw Rewrite, removed bool, err error) {
	rw.File = filepath.Base(path)
	ms, err := readMembers(path)
	if err != nil {
		return rw, false, err
	}
	drop := make([]bool, len(ms))
	start := 0 // first record of the current fetch
	for i, m := range ms {
		switch {
		case m.typ == "warcinfo":
			start = i + 1
		case m.typ == "metadata" || i == len(ms)-1:
			crawl := ""
			for _, x := range ms[start : i+1] {
				if x.crawl != "" {
					crawl = x.crawl
				}
			}
			for j := start; j <= i; j++ {
				drop[j] = gone[crawl]
			}
			start = i + 1
		}
	}
	kept := 0
	for i, m := range ms {
		if drop[i] {
			rw.RemovedRecords++
			continue
		}
		if capture(m.typ) {
			kept++
		}
	}
	infos := make([][]byte, len(ms)) // rebuilt warcinfo records, by member
	for i, m := range ms {
		if m.typ == "warcinfo" {
			if rec, changed := withoutSpec(m.record, gone); changed {
				infos[i] = rec
			}
		}
	}
	changedInfo := false
	for _, b := range infos {
		changedInfo = changedInfo || b != nil
	}
	if rw.RemovedRecords == 0 && !changedInfo {
		return rw, false, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return rw, false, fmt.Errorf("stat warc file: %w", err)
	}
	if kept == 0 {
		ix, _ := os.Stat(path + IndexSuffix)
		if err := os.Remove(path + IndexSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return rw, false, fmt.Errorf("remove warc index: %w", err)
		}
		if err := os.Remove(path); err != nil {
			return rw, false, fmt.Errorf("remove warc file: %w", err)
		}
		rw.RemovedBytes = st.Size()
		if ix != nil {
			rw.RemovedBytes += ix.Size()
		}
		return rw, true, nil
	}
	moved, err := copyKept(path, ms, drop, infos, &rw)
	if err != nil {
		return rw, false, err
	}
	rw.RemovedBytes = st.Size() - rw.Bytes
	// The index goes first: a crash before the rename leaves the old file
	// without an index (written again by the fetcher's next start), never
	// an index that points into another file.
	lines, ierr := os.ReadFile(path + IndexSuffix)
	if ierr != nil && !errors.Is(ierr, os.ErrNotExist) {
		return rw, false, fmt.Errorf("read warc index: %w", ierr)
	}
	if err := os.Remove(path + IndexSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return rw, false, fmt.Errorf("remove warc index: %w", err)
	}
	if err := os.Rename(path+rewriteSuffix, path); err != nil {
		return rw, false, fmt.Errorf("rename rewritten warc file: %w", err)
	}
	if ierr == nil {
		if err := writeIndex(path+IndexSuffix, reindex(lines, moved)); err != nil {
			return rw, false, err
		}
	}
	return rw, false, nil
}

// copyKept writes the members of ms not dropped to path+rewriteSuffix
// (a rebuilt warcinfo where infos has one), fsynced, counts them into
// rw, and returns where each kept member moved (old offset → new).
func copyKept(path string, ms []member, drop []bool, infos [][]byte, rw *Rewrite) (map[int64]int64, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open warc file: %w", err)
	}
	defer func() { _ = src.Close() }()
	dst, err := os.OpenFile(path+rewriteSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create rewritten warc file: %w", err)
	}
	moved := make(map[int64]int64, len(ms))
	var off int64
	err = func() error {
		bw := bufio.NewWriterSize(dst, 256<<10)
		for i, m := range ms {
			if drop[i] {
				continue
			}
			moved[m.offset] = off
			rw.Records++
			switch m.typ {
			case "response", "resource":
				rw.Responses++
			case "revisit":
				rw.Revisits++
			}
			if m.typ == "warcinfo" && rw.Opened.IsZero() {
				rw.Opened = recordDate(m.record)
			}
			if infos[i] != nil {
				var gz bytes.Buffer
				zw := gzip.NewWriter(&gz)
				_, _ = zw.Write(infos[i]) // writes to memory do not fail
				_ = zw.Close()
				if _, err := bw.Write(gz.Bytes()); err != nil {
					return err
				}
				off += int64(gz.Len())
				continue
			}
			if _, err := io.Copy(bw, io.NewSectionReader(src, m.offset, m.length)); err != nil {
				return err
			}
			off += m.length
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		return dst.Sync()
	}()
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path + rewriteSuffix)
		return nil, fmt.Errorf("write rewritten warc file: %w", err)
	}
	rw.Bytes = off
	return moved, nil
}

// withoutSpec returns the warcinfo record rec without the specifications
// of the crawls (gone: an "isPartOf: <crawl>" line and the "crawl-spec:"
// line after it), its Content-Length and block digest made again; changed is
// false when it names no such crawl.
func withoutSpec(rec []byte, gone map[string]bool) (out []byte, changed bool) {
	head, block, ok := bytes.Cut(rec, []byte("\r\n\r\n"))
	if !ok {
		return nil, false
	}
	block = bytes.TrimSuffix(block, []byte("\r\n\r\n"))
	lines := strings.SplitAfter(string(block), "\r\n")
	var nb strings.Builder
	for i := 0; i < len(lines); i++ {
		if id, ok := strings.CutPrefix(strings.TrimRight(lines[i], "\r\n"), "isPartOf: "); ok && gone[id] {
			changed = true
			if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "crawl-spec:") {
				i++
			}
			continue
		}
		nb.WriteString(lines[i])
	}
	if !changed {
		return nil, false
	}
	sum := sha1.Sum([]byte(nb.String()))
	var b bytes.Buffer
	for _, line := range strings.Split(string(head), "\r\n") {
		k, _, _ := strings.Cut(line, ":")
		switch {
		case strings.EqualFold(k, "Content-Length"):
			line = "Content-Length: " + strconv.Itoa(nb.Len())
		case strings.EqualFold(k, "WARC-Block-Digest"):
			line = "WARC-Block-Digest: sha1:" + base32.StdEncoding.EncodeToString(sum[:])
		}
		b.WriteString(line)
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(nb.String())
	b.WriteString("\r\n\r\n")
	return b.Bytes(), true
}

// recordDate is the WARC-Date of a record's header (zero when none).
func recordDate(rec []byte) time.Time {
	head, _, _ := bytes.Cut(rec, []byte("\r\n\r\n"))
	for _, line := range strings.Split(string(head), "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if strings.EqualFold(k, "WARC-Date") {
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			if err == nil {
				return t.UTC().Truncate(time.Second)
			}
		}
	}
	return time.Time{}
}

// reindex returns the lines of a CDXJ index whose records were kept,
// their offsets moved; the order (sorted by key) is kept.
func reindex(index []byte, moved map[int64]int64) []string {
	var out []string
	for _, line := range strings.Split(string(index), "\n") {
		i := strings.IndexByte(line, '{')
		if i < 0 {
			continue
		}
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line[i:]), &e); err != nil {
			continue
		}
		old, err := strconv.ParseInt(string(e["offset"]), 10, 64)
		if err != nil {
			continue
		}
		now, ok := moved[old]
		if !ok {
			continue // a record of the deleted crawl
		}
		e["offset"] = json.RawMessage(strconv.FormatInt(now, 10))
		js, _ := json.Marshal(e) // RawMessages of a decoded object marshal
		out = append(out, line[:i]+string(js))
	}
	return out
}

// writeIndex writes the CDXJ lines to path through a temporary file.
func writeIndex(path string, lines []string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	tmp := path + OpenSuffix
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write warc index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename warc index: %w", err)
	}
	return nil
}

// ledgerName is the file of a directory's crawls taken out of its legacy
// files.
const ledgerName = ".deleted"

// readLedger returns the crawls taken out of dir's legacy files.
func readLedger(dir string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, ledgerName))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read deleted crawls: %w", err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" {
			out[line] = true
		}
	}
	return out, nil
}

// writeLedger adds the crawls done to dir's ledger (through a temporary
// file: a crash leaves the old one, and the crawls are done again).
func writeLedger(dir string, ledger, done map[string]bool) error {
	var ids []string
	for id := range ledger {
		ids = append(ids, id)
	}
	for id := range done {
		if !ledger[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	path := filepath.Join(dir, ledgerName)
	if err := os.WriteFile(path+OpenSuffix, []byte(strings.Join(ids, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("write deleted crawls: %w", err)
	}
	if err := os.Rename(path+OpenSuffix, path); err != nil {
		return fmt.Errorf("write deleted crawls: %w", err)
	}
	return nil
}
