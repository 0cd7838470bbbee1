// Package sitemaps discovers seed URLs from sitemaps: the Sitemap lines of
// a host's robots.txt, its /sitemap.xml and sitemaps given explicitly. It
// parses XML url sets and sitemap indexes (recursing to a bound), gzip and
// plain-text sitemaps. Parsing (this file) is pure; Discoverer fetches.
package sitemaps

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
)

// Entry is one URL listed in a sitemap.
type Entry struct {
	URL     string    // canonical
	Lastmod time.Time // zero when absent or invalid
}

// Invalid is one rejected entry of a sitemap: Pos is the 1-based line of a
// text sitemap or the 1-based entry index of an XML one.
type Invalid struct {
	Pos int
	Raw string
	Err error
}

// Parsed is the content of one sitemap.
type Parsed struct {
	URLs     []Entry  // of a url set or a text sitemap
	Sitemaps []string // of a sitemap index (absolute, not canonicalized)
	Invalid  []Invalid
}

// errNotSitemap reports an XML document that is no sitemap (an HTML page
// served for a missing /sitemap.xml, say).
var errNotSitemap = errors.New("not a sitemap")

// ErrTooLarge reports a (decompressed) sitemap beyond the size cap.
var ErrTooLarge = errors.New("sitemap too large")

// maxRaw caps Invalid.Raw.
const maxRaw = 200

// Decompress returns body, gunzipped when it starts with the gzip magic,
// failing with ErrTooLarge beyond maxBytes.
func Decompress(body []byte, maxBytes int64) ([]byte, error) {
	if len(body) < 2 || body[0] != 0x1f || body[1] != 0x8b {
		return body, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("open gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if int64(len(out)) > maxBytes {
		return nil, ErrTooLarge
	}
	return out, nil
}

// Parse parses a (decompressed) sitemap: XML (urlset or sitemapindex)
// when its first non-space byte is '<', otherwise a text sitemap of one URL
// per line. At most maxEntries entries are kept. base resolves relative
// locations of an index.
func Parse(body []byte, base *url.URL, maxEntries int) (Parsed, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n\uFEFF")
	trimmed = bytes.TrimPrefix(trimmed, []byte("\uFEFF"))
	if len(trimmed) > 0 && trimmed[0] == '<' {
		return parseXML(trimmed, base, maxEntries)
	}
	return parseText(body, maxEntries), nil
}

func parseText(body []byte, maxEntries int) Parsed {
	var p Parsed
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), seeds.MaxLineBytes)
	line := 0
	for sc.Scan() && len(p.URLs) < maxEntries {
		line++
		raw := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\uFEFF"))
		if raw == "" {
			continue
		}
		u, err := seeds.Parse(raw)
		if err != nil {
			p.Invalid = append(p.Invalid, Invalid{Pos: line, Raw: cut(raw), Err: err})
			continue
		}
		p.URLs = append(p.URLs, Entry{URL: u})
	}
	if err := sc.Err(); err != nil {
		p.Invalid = append(p.Invalid, Invalid{Pos: line + 1, Err: err})
	}
	return p
}

func parseXML(body []byte, base *url.URL, maxEntries int) (Parsed, error) {
	var (
		p       Parsed
		root    string
		inEntry bool
		field   string // loc or lastmod while inside one
		loc     strings.Builder
		lastmod strings.Builder
		index   int
	)
	dec := xml.NewDecoder(bytes.NewReader(body))
	dec.Strict = false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if root == "" {
				return p, fmt.Errorf("parse xml: %w", err)
			}
			// Keep what was read before the damage.
			p.Invalid = append(p.Invalid, Invalid{Pos: index + 1, Err: fmt.Errorf("parse xml: %w", err)})
			return p, nil
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case root == "":
				if name != "urlset" && name != "sitemapindex" {
					return p, fmt.Errorf("parse xml: root element %q, want urlset or sitemapindex: %w", t.Name.Local, errNotSitemap)
				}
				root = name
			case (name == "url" && root == "urlset") || (name == "sitemap" && root == "sitemapindex"):
				inEntry = true
				loc.Reset()
				lastmod.Reset()
			case inEntry && (name == "loc" || name == "lastmod"):
				field = name
			}
		case xml.CharData:
			switch field {
			case "loc":
				if loc.Len() < seeds.MaxLineBytes {
					loc.Write(t)
				}
			case "lastmod":
				if lastmod.Len() < 100 {
					lastmod.Write(t)
				}
			}
		case xml.EndElement:
			name := strings.ToLower(t.Name.Local)
			if name == field {
				field = ""
				continue
			}
			if !inEntry || (name != "url" && name != "sitemap") {
				continue
			}
			inEntry = false
			index++
			if len(p.URLs)+len(p.Sitemaps) >= maxEntries {
				return p, nil
			}
			p.add(root, index, strings.TrimSpace(loc.String()), strings.TrimSpace(lastmod.String()), base)
		}
	}
	if root == "" {
		return p, errors.New("parse xml: no root element")
	}
	return p, nil
}

// add records one entry of an index or url set.
func (p *Parsed) add(root string, index int, raw, lastmod string, base *url.URL) {
	if raw == "" {
		p.Invalid = append(p.Invalid, Invalid{Pos: index, Err: errors.New("missing loc")})
		return
	}
	if root == "sitemapindex" {
		u, err := resolve(base, raw)
		if err != nil {
			p.Invalid = append(p.Invalid, Invalid{Pos: index, Raw: cut(raw), Err: err})
			return
		}
		p.Sitemaps = append(p.Sitemaps, u)
		return
	}
	u, err := seeds.Parse(raw)
	if err != nil {
		p.Invalid = append(p.Invalid, Invalid{Pos: index, Raw: cut(raw), Err: err})
		return
	}
	e := Entry{URL: u}
	if lastmod != "" {
		t, err := ParseLastmod(lastmod)
		if err != nil {
			p.Invalid = append(p.Invalid, Invalid{Pos: index, Raw: cut(lastmod), Err: err})
		} else {
			e.Lastmod = t
		}
	}
	p.URLs = append(p.URLs, e)
}

// lastmodLayouts are the W3C datetime forms of the sitemap protocol.
var lastmodLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05",
	"2006-01-02",
	"2006-01",
	"2006",
}

// ParseLastmod parses a W3C datetime (the sitemap protocol's lastmod).
func ParseLastmod(s string) (time.Time, error) {
	for _, l := range lastmodLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid lastmod %q", cut(s))
}

// RobotsSitemaps returns the Sitemap lines of a robots.txt, resolved
// against base (the robots.txt URL); unusable values are returned as
// Invalid with their line number.
func RobotsSitemaps(body []byte, base *url.URL) ([]string, []Invalid) {
	var (
		out []string
		bad []Invalid
	)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), seeds.MaxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		key, value, ok := strings.Cut(text, ":")
		if !ok || !strings.EqualFold(strings.TrimSpace(key), "sitemap") {
			continue
		}
		value = strings.TrimSpace(value)
		u, err := resolve(base, value)
		if err != nil {
			bad = append(bad, Invalid{Pos: line, Raw: cut(value), Err: err})
			continue
		}
		out = append(out, u)
	}
	return out, bad
}

// resolve makes raw an absolute http(s) URL.
func resolve(base *url.URL, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("invalid sitemap url: %w", err)
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid sitemap url %q: want absolute http(s)", cut(raw))
	}
	u.Fragment = ""
	return u.String(), nil
}

func cut(s string) string {
	if len(s) > maxRaw {
		return s[:maxRaw]
	}
	return s
}
