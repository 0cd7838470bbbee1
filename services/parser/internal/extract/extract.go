// Package extract turns an HTML page into what the crawler keeps of it: its
// outlinks (resolved and canonical), its title, its visible text and its
// language. It is a pure function of the page URL and body: no I/O, no
// clock, no shared state, safe for concurrent use.
//
// Ordinary pages are read in one streaming pass of golang.org/x/net/html's
// Tokenizer, without building a DOM; the extractor follows the parts of the
// HTML5 tree construction algorithm that decide the result (stream.go says
// which, and where the result differs from a DOM's). Search result pages (Options.Results) and detail
// selectors (Options.Detail) need a DOM: they are parsed by goquery, over
// x/net/html's tree builder. Either way parsing is lenient: malformed
// markup yields a best-effort result, never a panic; an empty body yields
// an empty result.
//
// Files: extract.go (Options, Link, Result, the drop reasons, Extract and
// extractDOM, the DOM path), extract_meta.go (robots directives, language,
// title, description, meta refresh), extract_structured.go (JSON-LD,
// OpenGraph and Twitter card properties), extract_microdata.go (microdata
// items), extract_links.go (the links of a DOM:
// base URL, link sources, search result links, anchor text),
// extract_resolve.go (the link rules both paths share: resolution, rel
// values followed, canonical, nofollow, dedup and cap in linkSink),
// extract_text.go (visible text: the whitespace-collapsing textWriter and
// the DOM walk), stream.go (the streaming pass) and its parts
// stream_start.go, stream_table.go, stream_end.go and stream_scope.go.
package extract

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Defaults of Options.
const (
	DefaultMaxOutlinks  = 1000
	DefaultMaxTextBytes = 1 << 20
)

// Caps on metadata, so one page cannot blow up a record.
const (
	maxTitleBytes    = 1024
	maxAnchorBytes   = 512
	maxLanguageBytes = 35 // longest practical BCP 47 tag
	maxDescBytes     = 2048
)

// Reasons a link is dropped, the label values of the parser's
// links_dropped_total metric (a fixed, bounded set).
const (
	DropInvalid   = "invalid"   // not resolvable to a URL
	DropScheme    = "scheme"    // javascript:, mailto:, data:, … (not http, https or ftp)
	DropTooLong   = "too_long"  // longer than urlcanon.MaxLength
	DropNoFollow  = "nofollow"  // rel="nofollow" on the link
	DropSelf      = "self"      // resolves to the page itself (fragment-only, empty href)
	DropDuplicate = "duplicate" // already linked from this page
	DropOverCap   = "over_cap"  // beyond Options.MaxOutlinks
)

// Options tunes Extract. Zero fields take their defaults.
type Options struct {
	MaxOutlinks  int // links kept per page (default DefaultMaxOutlinks)
	MaxTextBytes int // visible text kept, cut on a UTF-8 boundary (default DefaultMaxTextBytes)

	// Results, when set, marks the page as a search engine result page:
	// only the links of the elements it matches (an <a href> itself or the
	// first one inside) are extracted, and <link>, frames, refresh and
	// other link sources are ignored. Compile with cascadia.Compile.
	Results goquery.Matcher
	// NoFollow is set when the response said nofollow (X-Robots-Tag): no
	// link is kept, every one is counted as DropNoFollow.
	NoFollow bool
	// Detail, when set, is matched against the page: Result.Detail reports
	// whether any element matches (a detail page of the crawl).
	Detail goquery.Matcher
	// Resolved, optional, remembers link resolutions across pages (the
	// links a site repeats on every page); shared, safe for concurrent use.
	Resolved *urlcanon.ResolveCache
}

func (o Options) withDefaults() Options {
	if o.MaxOutlinks <= 0 {
		o.MaxOutlinks = DefaultMaxOutlinks
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	return o
}

// Link is one outlink of a page.
type Link struct {
	URL    string `json:"url"`              // absolute and canonical (urlcanon)
	Anchor string `json:"anchor,omitempty"` // link text (or alt text), whitespace collapsed
	Rel    string `json:"rel,omitempty"`    // rel attribute, lower-cased, whitespace collapsed ("refresh" for a meta refresh)
	Tag    string `json:"tag"`              // element the link came from: a, area, frame, iframe, link, body, applet, meta
}

// Result is what Extract keeps of a page.
type Result struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"` // <meta name=description>, whitespace collapsed
	Canonical   string `json:"canonical,omitempty"`   // <link rel=canonical href>, resolved and canonical
	Text        string `json:"text"`                  // visible text: words separated by single spaces, blocks by single newlines
	Language    string `json:"language"`              // <html lang>, lower-cased
	Links       []Link `json:"links"`                 // in document order, deduplicated, at most MaxOutlinks

	NoFollow      bool `json:"nofollow"`         // meta robots nofollow/none or Options.NoFollow: Links is empty
	NoIndex       bool `json:"noindex"`          // meta robots noindex/none: store no document
	TextTruncated bool `json:"text_truncated"`   // Text was cut at MaxTextBytes
	Detail        bool `json:"detail,omitempty"` // Options.Detail matched the page

	// Dropped counts the links not kept, by reason (Drop* constants).
	Dropped map[string]int `json:"dropped,omitempty"`

	// Structured data (extract_structured.go), within MaxStructuredBytes.
	JSONLD            []string   `json:"json_ld,omitempty"`            // JSON-LD items, each compact JSON, in document order
	OpenGraph         []Property `json:"opengraph,omitempty"`          // og:*, twitter:*, … in document order, the first value of each key
	Microdata         []string   `json:"microdata,omitempty"`          // microdata top-level items, each compact JSON, in document order
	StructuredErrors  int        `json:"structured_errors,omitempty"`  // JSON-LD blocks that are not JSON objects or arrays
	StructuredError   string     `json:"structured_error,omitempty"`   // the first one's error
	StructuredDropped int        `json:"structured_dropped,omitempty"` // items, blocks and properties not kept: over the cap
}

// ErrPageURL is returned when the page URL itself is not a crawlable URL:
// links could not be resolved against it.
var ErrPageURL = errors.New("invalid page url")

// Extract parses body (UTF-8 HTML) fetched from pageURL. The only error is
// an invalid pageURL (ErrPageURL); malformed HTML is never an error.
func Extract(pageURL string, body []byte, opts Options) (Result, error) {
	opts = opts.withDefaults()
	page, err := urlcanon.Canonicalize(pageURL)
	if err != nil {
		return Result{}, fmt.Errorf("canonicalize %w: %w", ErrPageURL, err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return Result{}, nil
	}
	if opts.Results == nil && opts.Detail == nil {
		return extractStream(page, body, opts), nil
	}
	return extractDOM(page, body, opts), nil
}

// extractDOM is Extract through a goquery DOM, which search result pages
// and Detail selectors need.
func extractDOM(page string, body []byte, opts Options) Result {
	var res Result
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		// x/net/html only fails on reader errors, which a bytes.Reader
		// never returns; keep the empty result rather than fail the page.
		return res
	}
	root := doc.Selection

	res.Language = language(root)
	res.Title = title(root)
	res.Description = metaContent(root, "description", maxDescBytes)
	res.NoFollow, res.NoIndex = metaRobots(root)
	res.NoFollow = res.NoFollow || opts.NoFollow
	res.Text, res.TextTruncated = visibleText(doc.Nodes, opts.MaxTextBytes, len(body)/2)
	if opts.Detail != nil {
		res.Detail = root.FindMatcher(opts.Detail).Length() > 0
	}
	var sd structuredSink
	structuredDOM(root, &sd)
	sd.microdata(page, body)
	sd.result(&res)
	var canonical string
	res.Links, res.Dropped, canonical = links(root, page, opts, res.NoFollow)
	res.Canonical = canonical
	return res
}
