// Package sitemap reads sitemaps (sitemaps.org): XML <urlset>, XML
// <sitemapindex>, either of them or a plain-text list gzip-compressed, and
// the Sitemap lines of a robots.txt.
//
// It parses and does not judge URLs: an entry's location comes back as
// written, for the caller to resolve, canonicalize and validate its own way.
// Parse is pure and bounded: it streams its input, stops after a
// caller-given number of entries and bytes (after gunzip), and keeps what a
// damaged document listed before the damage, saying where it stopped.
package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits of the sitemaps protocol for one sitemap.
const (
	MaxEntries = 50000    // entries
	MaxBytes   = 50 << 20 // bytes, uncompressed
)

// MaxLocBytes is the longest location read: a text line or a <loc>,
// surrounding white space included. A longer one is an entry with
// ErrTooLong.
const MaxLocBytes = 64 << 10

// maxLastmodBytes bounds a <lastmod>: a W3C datetime is at most 35 bytes.
const maxLastmodBytes = 64

// maxPriorityBytes bounds a <priority>: "0.5" is 3 bytes; longer is
// invalid.
const maxPriorityBytes = 32

// Kind is what a sitemap lists.
type Kind int

// Kinds of sitemap. A text sitemap is a URLSet.
const (
	URLSet Kind = iota + 1 // pages
	Index                  // other sitemaps
)

func (k Kind) String() string {
	switch k {
	case URLSet:
		return "urlset"
	case Index:
		return "sitemapindex"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Errors of a whole document, returned by Parse.
var (
	// ErrNotSitemap: the document is something else (an HTML page served
	// for a missing /sitemap.xml, an RSS feed, prose).
	ErrNotSitemap = errors.New("not a sitemap")
	// ErrTooLarge: the document goes on beyond the byte cap (after
	// gunzip). Parse reports it as Result.Cut, or as its error when only
	// white space came before the cap.
	ErrTooLarge = errors.New("sitemap too large")
)

// Errors of one entry (Entry.Err).
var (
	// ErrNoLoc: an XML entry without a <loc>, or with an empty one.
	ErrNoLoc = errors.New("missing loc")
	// ErrNotURL: a line of a text sitemap that is no absolute URL (it has
	// no "://").
	ErrNotURL = errors.New("not an absolute url")
	// ErrTooLong: a location longer than MaxLocBytes.
	ErrTooLong = errors.New("location too long")
)

// Entry is one entry of a sitemap: a <url> of a url set, a <sitemap> of an
// index, a line of a text sitemap or a Sitemap line of a robots.txt.
type Entry struct {
	// Pos is where the entry stands: the 1-based line of a text sitemap or
	// a robots.txt, the 1-based index among the entries of an XML one.
	Pos int
	// Loc is the location as written, surrounding white space trimmed (cut
	// to MaxLocBytes with ErrTooLong). RobotsSitemaps resolves it.
	Loc string
	// RawLastmod is the <lastmod> as written, trimmed; "" when absent.
	RawLastmod string
	// Lastmod is RawLastmod parsed (UTC); zero when absent or invalid
	// (ParseLastmod says why).
	Lastmod time.Time
	// Priority is the <priority> of a url set's entry when HasPriority
	// (ParsePriority: 0 to 1, a number outside clamped). HasPriority is
	// false when the entry has none or it is no number: absent is not 0
	// (the protocol's default is 0.5).
	Priority    float32
	HasPriority bool
	// Err, when not nil, says why the entry is unusable: ErrNoLoc,
	// ErrNotURL, ErrTooLong (RobotsSitemaps: why the line is no sitemap
	// URL). Unusable entries are kept to be reported.
	Err error
}

// Result is what Parse read of one sitemap.
type Result struct {
	Kind Kind
	// Entries in document order, usable or not; at most the maxEntries
	// given to Parse.
	Entries []Entry
	// Truncated reports that the document lists more entries than
	// maxEntries; the rest was not read.
	Truncated bool
	// Cut, when not nil, is why the document could not be read to its end:
	// ErrTooLarge, broken XML, a damaged gzip stream. Entries hold what the
	// document listed before; CutPos is where it happened (the line or the
	// entry index being read, as Entry.Pos).
	Cut    error
	CutPos int
}

// Is reports whether a fetched resource should be parsed as a sitemap: an
// XML media type, or a path whose last segment starts with "sitemap" and
// ends in .xml, .xml.gz or .txt (whatever the media type).
func Is(mediaType, path string) bool {
	last := strings.ToLower(path[strings.LastIndexByte(path, '/')+1:])
	if strings.HasPrefix(last, "sitemap") &&
		(strings.HasSuffix(last, ".xml") || strings.HasSuffix(last, ".xml.gz") || strings.HasSuffix(last, ".txt")) {
		return true
	}
	switch mediaType {
	case "application/xml", "text/xml":
		return true
	}
	return false
}

// Parse reads one sitemap from r: gzip-compressed when it starts with the
// gzip magic number; XML when its first byte after white space and byte
// order marks is '<', else a text sitemap (one URL a line, blank lines and
// # comments skipped). It reads at most maxEntries entries and maxBytes
// bytes after gunzip (see Result.Truncated and Result.Cut).
//
// The error is about the whole document: ErrNotSitemap for an XML root
// other than <urlset> or <sitemapindex>, for XML without a root and for
// text none of whose lines is a URL; a broken gzip header; a read error
// (ErrTooLarge included) before the first byte that is not white space;
// broken XML before the root. An empty document is an empty url set.
func Parse(r io.Reader, maxEntries int, maxBytes int64) (Result, error) {
	maxEntries = max(maxEntries, 0)
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return Result{}, fmt.Errorf("open gzip sitemap: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReader(zr)
	}
	br = bufio.NewReader(&capReader{r: br, max: max(maxBytes, 0)})
	lines := skipSpace(br)
	first, err := br.Peek(1)
	switch {
	case len(first) == 0 && err != io.EOF:
		return Result{}, fmt.Errorf("read sitemap: %w", err)
	case len(first) == 1 && first[0] == '<':
		return parseXML(br, maxEntries)
	}
	return parseText(br, lines+1, maxEntries)
}

// capReader reads at most max bytes of r; reading more fails with
// ErrTooLarge.
type capReader struct {
	r        io.Reader
	n, max   int64
	tooLarge bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.tooLarge {
		return 0, c.err()
	}
	if room := c.max + 1 - c.n; int64(len(p)) > room { // one byte more tells if there is more
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.tooLarge = true
		return n - int(c.n-c.max), c.err()
	}
	return n, err
}

func (c *capReader) err() error { return fmt.Errorf("over %d bytes: %w", c.max, ErrTooLarge) }

// skipSpace consumes the white space and byte order marks before a
// document and returns how many lines it consumed.
func skipSpace(br *bufio.Reader) int {
	lines := 0
	for {
		b, _ := br.Peek(len(bom))
		n := 1
		switch {
		case len(b) == 0:
			return lines
		case b[0] == '\n':
			lines++
		case b[0] == ' ' || b[0] == '\t' || b[0] == '\r':
		case bytes.HasPrefix(b, []byte(bom)):
			n = len(bom)
		default:
			return lines
		}
		_, _ = br.Discard(n)
	}
}

const bom = "\uFEFF"

// parseText reads a text sitemap whose first line (after skipSpace) is
// line.
func parseText(br *bufio.Reader, line, maxEntries int) (Result, error) {
	res := Result{Kind: URLSet}
	urls := 0
	for ; ; line++ {
		text, tooLong, err := readLine(br, MaxLocBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			res.Cut, res.CutPos = fmt.Errorf("read text sitemap: %w", err), line
			break // the line is incomplete
		}
		text = strings.TrimSpace(strings.TrimPrefix(text, bom))
		if text != "" && !strings.HasPrefix(text, "#") {
			if len(res.Entries) == maxEntries {
				res.Truncated = true
				break
			}
			e := Entry{Pos: line, Loc: text}
			switch {
			case !strings.Contains(text, "://"):
				e.Err = ErrNotURL
			case tooLong:
				e.Err, urls = ErrTooLong, urls+1
			default:
				urls++
			}
			res.Entries = append(res.Entries, e)
		}
		if errors.Is(err, io.EOF) {
			break
		}
	}
	if urls == 0 && len(res.Entries) > 0 {
		return Result{}, fmt.Errorf("text line %d %q: %w", res.Entries[0].Pos, short(res.Entries[0].Loc), ErrNotSitemap)
	}
	return res, nil
}

// readLine reads one line, its line ending dropped. A line longer than
// limit bytes is consumed to its end and returned cut to limit, with
// tooLong. err is the reader's: io.EOF comes with the last line (which may
// not be empty); with any other error the line is incomplete.
func readLine(br *bufio.Reader, limit int) (line string, tooLong bool, err error) {
	var (
		b []byte
		n int // bytes consumed
	)
	for {
		var chunk []byte
		chunk, err = br.ReadSlice('\n')
		n += len(chunk)
		if room := limit + 2 - len(b); room > 0 { // +2: a CRLF ending
			b = append(b, chunk[:min(room, len(chunk))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	if n == len(b) { // whole: drop the ending (else b is over the limit)
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	}
	if len(b) > limit {
		return string(b[:limit]), true, err
	}
	return string(b), false, err
}

// parseXML reads an XML url set or sitemap index. An entry is a <url> or a
// <sitemap> child of the root; its <loc> and <lastmod> are its own
// children (so an <image:loc> deeper down is not its location).
func parseXML(r io.Reader, maxEntries int) (Result, error) {
	dec := xml.NewDecoder(r)
	dec.Strict = false
	// Sitemap locations are ASCII: read any declared charset as it is.
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var (
		res   Result
		cur   *Entry
		field string // "loc", "lastmod" or "priority" while inside one of cur
		text  strings.Builder
		long  bool // the field's text went beyond its cap
		depth int  // of the current element; the root is 1
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if res.Kind == 0 {
				return Result{}, fmt.Errorf("parse xml sitemap: %w", err)
			}
			res.Cut, res.CutPos = fmt.Errorf("parse xml sitemap: %w", err), len(res.Entries)+1
			return res, nil
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			name := strings.ToLower(t.Name.Local)
			switch {
			case res.Kind == 0:
				switch name {
				case "urlset":
					res.Kind = URLSet
				case "sitemapindex":
					res.Kind = Index
				default:
					return Result{}, fmt.Errorf("root element <%s>: %w", short(t.Name.Local), ErrNotSitemap)
				}
			case depth == 2 && (name == "url" || name == "sitemap"):
				cur = &Entry{}
			case depth == 3 && cur != nil && (name == "loc" || name == "lastmod" || name == "priority" && res.Kind == URLSet):
				field, long = name, false
				text.Reset()
			}
		case xml.CharData:
			if field == "" {
				continue
			}
			limit := MaxLocBytes
			switch field {
			case "lastmod":
				limit = maxLastmodBytes + 1 // longer is invalid: see ParseLastmod
			case "priority":
				limit = maxPriorityBytes + 1 // longer is invalid: see ParsePriority
			}
			if room := limit - text.Len(); len(t) > room {
				t, long = t[:room], true
			}
			text.Write(t)
		case xml.EndElement:
			depth--
			switch {
			case cur != nil && depth == 2 && strings.ToLower(t.Name.Local) == field:
				v := strings.TrimSpace(text.String())
				switch field {
				case "loc":
					cur.Loc, cur.Err = v, nil
					if long {
						cur.Err = ErrTooLong
					}
				case "lastmod":
					cur.RawLastmod = v
					cur.Lastmod, _ = ParseLastmod(v)
				case "priority":
					p, err := ParsePriority(v)
					cur.Priority, cur.HasPriority = p, err == nil
				}
				field = ""
			case cur != nil && depth == 1:
				if len(res.Entries) == maxEntries {
					res.Truncated = true
					return res, nil
				}
				cur.Pos = len(res.Entries) + 1
				if cur.Loc == "" && cur.Err == nil {
					cur.Err = ErrNoLoc
				}
				res.Entries = append(res.Entries, *cur)
				cur, field = nil, ""
			}
		}
	}
	if res.Kind == 0 {
		return Result{}, fmt.Errorf("xml without a root element: %w", ErrNotSitemap)
	}
	return res, nil
}

// lastmodLayouts are the W3C datetime forms of the sitemap protocol, from
// the most precise, plus a date and time without a time zone (read as UTC)
// that sites write.
var lastmodLayouts = []string{
	time.RFC3339Nano,         // 2006-01-02T15:04:05.999999999Z07:00, and without fraction
	"2006-01-02T15:04Z07:00", // hours and minutes
	"2006-01-02T15:04:05",    // no time zone
	"2006-01-02",
	"2006-01",
	"2006",
}

// ParseLastmod parses a <lastmod>: a W3C datetime of any precision. The
// time is returned in UTC.
func ParseLastmod(s string) (time.Time, error) {
	if len(s) <= maxLastmodBytes {
		for _, l := range lastmodLayouts {
			if t, err := time.Parse(l, s); err == nil {
				return t.UTC(), nil
			}
		}
	}
	return time.Time{}, fmt.Errorf("invalid lastmod %q", short(s))
}

// ParsePriority parses a <priority>: a decimal number, 0.0 to 1.0 by the
// protocol. A number below 0 or above 1 is clamped (a site that writes 2
// means "high", one that writes -1 "low"); what is no finite number ("high",
// "", NaN, Inf, longer than 32 bytes) is an error, and the entry has no
// priority.
func ParsePriority(s string) (float32, error) {
	if len(s) <= maxPriorityBytes {
		if f, err := strconv.ParseFloat(s, 32); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return float32(min(max(f, 0), 1)), nil
		}
	}
	return 0, fmt.Errorf("invalid priority %q", short(s))
}

// short cuts s for an error message.
func short(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}
