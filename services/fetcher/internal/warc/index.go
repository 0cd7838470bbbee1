package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"
)

// member is one gzip member of a WARC file: one record.
type member struct {
	offset, length int64
	record         gowarc.WarcRecord // parsed, digests verified; closed by the caller of scan
}

// errStop ends a scan early without error.
var errStop = errors.New("stop")

// errDamaged marks a closed file that does not read to its end (a write
// failed in the middle of a record).
var errDamaged = errors.New("damaged warc file")

// scan reads the gzip members of the WARC file at path in order, parses
// each as a WARC record, with verify checks its header, Content-Length and
// digests, and calls fn with it. It returns the end of the last good
// member: a member cut short (a crash mid-write) or a record that does not
// parse (verify) ends the scan with bad set to its error. Files this
// process closed are indexed as they are written (liveIndex); the few
// it reads again (past the memory bound) are not verified, files a crash
// left are.
func scan(path string, verify bool, fn func(m member) error) (end int64, bad error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("open warc file: %w", err)
	}
	defer func() { _ = f.Close() }()
	cr := &countReader{r: f}
	br := bufio.NewReaderSize(cr, 256<<10)
	pos := func() int64 { return cr.n - int64(br.Buffered()) }
	zr := new(gzip.Reader)
	var buf bytes.Buffer
	// Blocks are parsed either way: the index takes the status and
	// media type of each HTTP response.
	opts := []gowarc.WarcRecordOption{gowarc.WithSpecViolationPolicy(gowarc.ErrIgnore), gowarc.WithSyntaxErrorPolicy(gowarc.ErrIgnore),
		gowarc.WithUnknownRecordTypePolicy(gowarc.ErrIgnore)}
	if verify {
		opts = []gowarc.WarcRecordOption{gowarc.WithSpecViolationPolicy(gowarc.ErrFail), gowarc.WithSyntaxErrorPolicy(gowarc.ErrFail)}
	}
	gowarcMu.Lock()
	unmarshaler := gowarc.NewUnmarshaler(opts...)
	gowarcMu.Unlock()
	for {
		start := pos()
		if _, err := br.Peek(1); errors.Is(err, io.EOF) {
			return start, nil, nil
		}
		if err := zr.Reset(br); err != nil {
			return start, fmt.Errorf("gzip member at %d: %w", start, err), nil
		}
		zr.Multistream(false)
		buf.Reset()
		if _, err := io.Copy(&buf, zr); err != nil {
			return start, fmt.Errorf("gzip member at %d: %w", start, err), nil
		}
		length := pos() - start
		rec, _, _, err := unmarshaler.Unmarshal(bufio.NewReader(bytes.NewReader(buf.Bytes())))
		if err != nil {
			return start, fmt.Errorf("record at %d: %w", start, err), nil
		}
		if verify {
			if _, err := rec.ValidateDigest(); err != nil {
				_ = rec.Close()
				return start, fmt.Errorf("record at %d: %w", start, err), nil
			}
		}
		err = fn(member{offset: start, length: length, record: rec})
		_ = rec.Close()
		if errors.Is(err, errStop) {
			return pos(), nil, nil
		}
		if err != nil {
			return start, nil, err
		}
	}
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

// fileIndex is what a closed file holds.
type fileIndex struct {
	lines                        []string // CDXJ lines, sorted
	opened                       time.Time
	records, responses, revisits int
	attempts                     []string
}

// indexFile reads the closed WARC file at path and returns its CDXJ lines
// and counts. A file that does not read to its end is an error.
func indexFile(path string, verify bool) (fileIndex, error) {
	var ix fileIndex
	name := filepath.Base(path)
	_, bad, err := scan(path, verify, func(m member) error {
		ix.add(name, m)
		return nil
	})
	if err == nil && bad != nil {
		err = fmt.Errorf("index %s: %w: %w", name, errDamaged, bad)
	}
	if err != nil {
		return ix, err
	}
	slices.Sort(ix.lines)
	return ix, nil
}

// add counts m and indexes it when it is a capture.
func (ix *fileIndex) add(file string, m member) {
	r := m.record
	ix.records++
	date, _ := r.Date()
	switch r.Type() {
	case gowarc.Warcinfo:
		if ix.opened.IsZero() {
			ix.opened = date.Truncate(time.Second)
		}
		return
	case gowarc.Response, gowarc.Resource:
		ix.responses++
	case gowarc.Revisit:
		ix.revisits++
	default:
		return
	}
	if a := r.WarcHeader().Get(attemptField); a != "" {
		ix.attempts = append(ix.attempts, a)
	}
	var status, mt string
	switch b := r.Block().(type) {
	case gowarc.HttpResponseBlock:
		status = fmt.Sprint(b.HttpStatusCode())
		mt = mediaType(b.HttpHeader().Get("Content-Type"))
	case gowarc.ProtocolHeaderBlock: // revisit: the HTTP header only
		status = statusOf(b.ProtocolHeaderBytes())
	}
	if r.Type() == gowarc.Revisit {
		mt = "warc/revisit"
	}
	if r.Type() == gowarc.Resource {
		mt = mediaType(r.WarcHeader().Get(gowarc.ContentType))
	}
	ix.lines = append(ix.lines, cdxLine(file, r.WarcHeader().Get(gowarc.WarcTargetURI), date,
		r.WarcHeader().Get(gowarc.WarcPayloadDigest), status, mt, m.offset, m.length))
}

// cdxLine is the CDXJ line of a capture of uri at date, its record the
// length bytes at offset of file.
func cdxLine(file, uri string, date time.Time, digest, status, mime string, offset, length int64) string {
	key := surt(uri)
	b := make([]byte, 0, len(key)+2*len(uri)+len(file)+len(digest)+len(mime)+120)
	b = append(append(b, key...), ' ')
	b = append(date.UTC().AppendFormat(b, "20060102150405"), ` {"url":`...)
	b = appendJSONString(b, uri)
	if mime != "" {
		b = appendJSONString(append(b, `,"mime":`...), mime)
	}
	if status != "" {
		b = appendJSONString(append(b, `,"status":`...), status)
	}
	if digest != "" {
		b = appendJSONString(append(b, `,"digest":`...), digest)
	}
	b = strconv.AppendInt(append(b, `,"length":`...), length, 10)
	b = strconv.AppendInt(append(b, `,"offset":`...), offset, 10)
	b = appendJSONString(append(b, `,"filename":`...), file)
	return string(append(b, '}'))
}

// appendJSONString appends s to b as encoding/json writes it (HTML
// characters escaped): printable ASCII by itself ('"', '\\', '<', '>'
// and '&' escaped: URLs have queries), a string with a control character
// or a byte past ASCII through json.Marshal (invalid UTF-8 made U+FFFD,
// U+2028 escaped). cdxLine writes the line json.Marshal wrote of a
// cdxEntry (TestCDXLine) without its reflection.
func appendJSONString(b []byte, s string) []byte {
	mark := len(b)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c < 0x20 || c >= 0x80:
			js, _ := json.Marshal(s)
			return append(b[:mark], js...)
		case c == '"' || c == '\\':
			b = append(append(b, s[start:i]...), '\\', c)
		case c == '<' || c == '>' || c == '&':
			b = append(append(b, s[start:i]...), '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		default:
			continue
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// liveIndex is the index of an open file, made as its records are
// written (the CDXJ line of each capture is known then), so that the file
// is not read again when it closes. Its lines count against
// Writer.indexBytes: a file whose lines would take it past
// Options.MaxIndexBytes drops them and is read again when it closes, as
// a file a write failed in is (cut after its last whole fetch) and as
// files a crash left are (recoverDir).
type liveIndex struct {
	file    string // base name, as gowarc reports it
	ix      fileIndex
	bytes   int64 // of ix.lines, counted in Writer.indexBytes
	dropped bool
}

// cdxEntry is the JSON block of a CDXJ line (the fields pywb and OutbackCDX
// read), as cdxLine writes it.
type cdxEntry struct {
	URL      string `json:"url"`
	Mime     string `json:"mime,omitempty"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   int64  `json:"length"`
	Offset   int64  `json:"offset"`
	Filename string `json:"filename"`
}

// statusOf is the status code of an HTTP status line ("HTTP/1.1 304 Not
// Modified" → "304"), "" when it is none.
func statusOf(header []byte) string {
	line, _, _ := bytes.Cut(header, []byte("\r\n"))
	_, rest, ok := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	if !ok || len(code) != 3 {
		return ""
	}
	return string(code)
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

// surt is the SURT sort key of a URL as CDX indexes write it: scheme
// dropped, host lower-cased without "www." and reversed with commas, a
// non-default port kept, then ")" and the path and query lower-cased:
// "http://www.Example.com/A?b" → "com,example)/a?b".
func surt(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return strings.ToLower(raw)
	}
	host := strings.TrimPrefix(strings.ToLower(u.Hostname()), "www.")
	parts := strings.Split(host, ".")
	slices.Reverse(parts)
	key := strings.Join(parts, ",")
	if p := u.Port(); p != "" && !(u.Scheme == "http" && p == "80") && !(u.Scheme == "https" && p == "443") &&
		!(u.Scheme == "ftp" && p == "21") {
		key += ":" + p
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return key + ")" + strings.ToLower(path)
}

// writeIndex writes the CDXJ lines to path (through a temporary file, so
// a reader never sees half an index).
func writeIndex(path string, lines []string) error {
	tmp := path + openSuffix
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write warc index: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename warc index: %w", err)
	}
	return nil
}
