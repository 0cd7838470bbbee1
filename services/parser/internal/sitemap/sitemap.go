// Package sitemap parses sitemaps (sitemaps.org): XML <urlset>, XML
// <sitemapindex>, either gzip-compressed, and plain text (one URL a line).
// It is pure and bounded: at most MaxEntries entries and MaxBytes of
// decompressed input are read.
package sitemap

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Limits of the sitemaps protocol.
const (
	MaxEntries = 50000
	MaxBytes   = 50 << 20
)

// Kind is what a sitemap lists.
type Kind int

// Kinds of sitemap.
const (
	URLSet Kind = iota + 1 // pages
	Index                  // other sitemaps
)

// Entry is one listed URL (as written: the caller resolves and
// canonicalizes it).
type Entry struct {
	URL     string
	LastMod time.Time // zero when absent or unparseable
}

// ErrNotSitemap is returned for a body that is no sitemap.
var ErrNotSitemap = errors.New("not a sitemap")

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

// Parse reads a sitemap body (gzip is detected by its magic number). The
// truncated result reports that MaxEntries was reached.
func Parse(body []byte) (kind Kind, entries []Entry, truncated bool, err error) {
	var r io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, nil, false, fmt.Errorf("open gzip sitemap: %w", err)
		}
		defer zr.Close()
		r = zr
	}
	br := bufio.NewReader(io.LimitReader(r, MaxBytes))
	head, _ := br.Peek(512)
	if bytes.HasPrefix(bytes.TrimLeft(head, "\xef\xbb\xbf \t\r\n"), []byte("<")) {
		return parseXML(br)
	}
	entries, truncated, err = parseText(br)
	return URLSet, entries, truncated, err
}

func parseText(r io.Reader) ([]Entry, bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	var out []Entry
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !strings.Contains(line, "://") {
			return nil, false, fmt.Errorf("parse text sitemap line %q: %w", truncate(line), ErrNotSitemap)
		}
		if len(out) == MaxEntries {
			return out, true, nil
		}
		out = append(out, Entry{URL: line})
	}
	if err := sc.Err(); err != nil {
		return out, false, fmt.Errorf("read text sitemap: %w", err)
	}
	return out, false, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

func parseXML(r io.Reader) (Kind, []Entry, bool, error) {
	dec := xml.NewDecoder(r)
	dec.Strict = false
	dec.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var (
		kind    Kind
		out     []Entry
		cur     *Entry
		field   string
		text    strings.Builder
		started bool
		depth   int // of the current element; the root is 1
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			if started {
				return kind, out, false, nil // keep what a cut-off sitemap listed
			}
			return 0, nil, false, fmt.Errorf("parse xml sitemap: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			name := strings.ToLower(t.Name.Local)
			if !started {
				switch name {
				case "urlset":
					kind = URLSet
				case "sitemapindex":
					kind = Index
				default:
					return 0, nil, false, fmt.Errorf("root element <%s>: %w", name, ErrNotSitemap)
				}
				started = true
				continue
			}
			switch {
			case depth == 2 && (name == "url" || name == "sitemap"):
				cur = &Entry{}
			case depth == 3 && (name == "loc" || name == "lastmod"):
				if cur != nil {
					field = name
					text.Reset()
				}
			}
		case xml.CharData:
			if field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			depth--
			name := strings.ToLower(t.Name.Local)
			switch {
			case cur != nil && depth == 2 && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					cur.URL = v
				} else {
					cur.LastMod = parseLastMod(v)
				}
				field = ""
			case cur != nil && depth == 1:
				if cur.URL != "" {
					if len(out) == MaxEntries {
						return kind, out, true, nil
					}
					out = append(out, *cur)
				}
				cur = nil
			}
		}
	}
	if !started {
		return 0, nil, false, fmt.Errorf("empty xml: %w", ErrNotSitemap)
	}
	return kind, out, false, nil
}

// parseLastMod reads a W3C datetime (any of its precisions).
func parseLastMod(v string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
