// Package sitemaps discovers seed URLs from sitemaps: the Sitemap lines of
// a host's robots.txt, its /sitemap.xml and sitemaps given explicitly. It
// reads them with libs/sitemap (XML url sets and sitemap indexes, gzip,
// plain text), validates their URLs as seeds and follows indexes to a
// bound. Parse (this file) is pure; Discoverer fetches.
package sitemaps

import (
	"bytes"
	"fmt"
	"net/url"
	"time"

	"github.com/trawl-crawler/trawl/libs/sitemap"
	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
)

// Entry is one URL listed in a sitemap.
type Entry struct {
	URL     string    // canonical
	Lastmod time.Time // zero when absent or invalid
	// Priority is the entry's <priority> when HasPriority (0 to 1, a
	// number outside clamped: sitemap.ParsePriority); absent or no number:
	// HasPriority false, never 0.
	Priority    float32
	HasPriority bool
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

// maxRaw caps Invalid.Raw.
const maxRaw = 200

// Parse parses a fetched sitemap (gzip or not; at most maxBytes after
// gunzip, at most maxEntries entries): the URLs of a url set or text
// sitemap validated as seeds (seeds.Parse) with their lastmod, the
// locations of an index resolved against base. Unusable entries, and where
// a damaged or over-large sitemap stopped, are returned as Invalid; what
// came before is kept. The error is sitemap.ErrNotSitemap for a document
// that is no sitemap, or a sitemap that cannot be read at all.
func Parse(body []byte, base *url.URL, maxEntries int, maxBytes int64) (Parsed, error) {
	res, err := sitemap.Parse(bytes.NewReader(body), maxEntries, maxBytes)
	if err != nil {
		return Parsed{}, err
	}
	var p Parsed
	for _, e := range res.Entries {
		if e.Err != nil {
			p.invalid(e.Pos, e.Loc, e.Err)
			continue
		}
		if res.Kind == sitemap.Index {
			u, err := sitemap.Resolve(base, e.Loc)
			if err != nil {
				p.invalid(e.Pos, e.Loc, err)
				continue
			}
			p.Sitemaps = append(p.Sitemaps, u)
			continue
		}
		u, err := seeds.Parse(e.Loc)
		if err != nil {
			p.invalid(e.Pos, e.Loc, err)
			continue
		}
		entry := Entry{URL: u, Priority: e.Priority, HasPriority: e.HasPriority}
		if e.RawLastmod != "" {
			t, err := sitemap.ParseLastmod(e.RawLastmod)
			if err != nil {
				p.invalid(e.Pos, e.RawLastmod, err)
			}
			entry.Lastmod = t
		}
		p.URLs = append(p.URLs, entry)
	}
	if res.Cut != nil {
		p.invalid(res.CutPos, "", fmt.Errorf("stopped: %w", res.Cut))
	}
	return p, nil
}

func (p *Parsed) invalid(pos int, raw string, err error) {
	if len(raw) > maxRaw {
		raw = raw[:maxRaw]
	}
	p.Invalid = append(p.Invalid, Invalid{Pos: pos, Raw: raw, Err: err})
}
