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
package extract

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

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
	var canonical string
	res.Links, res.Dropped, canonical = links(root, page, opts, res.NoFollow)
	res.Canonical = canonical
	return res
}

// ParseRobotsDirectives reads a robots meta content or X-Robots-Tag value
// ("noindex, nofollow", "none", "all"). Unknown tokens are ignored.
func ParseRobotsDirectives(content string) (nofollow, noindex bool) {
	for _, tok := range strings.FieldsFunc(strings.ToLower(content), func(r rune) bool {
		return r == ',' || unicode.IsSpace(r)
	}) {
		switch tok {
		case "nofollow":
			nofollow = true
		case "noindex":
			noindex = true
		case "none":
			nofollow, noindex = true, true
		}
	}
	return nofollow, noindex
}

func language(root *goquery.Selection) string {
	h := root.Find("html").First()
	lang, ok := h.Attr("lang")
	if !ok || strings.TrimSpace(lang) == "" {
		lang, _ = h.Attr("xml:lang")
	}
	return normLanguage(lang)
}

// normLanguage is a language attribute lower-cased, or "" if it is not a
// plausible language tag.
func normLanguage(lang string) string {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if len(lang) > maxLanguageBytes || strings.IndexFunc(lang, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) >= 0 {
		return ""
	}
	return lang
}

// title is the text of the first HTML <title> (not an SVG one).
func title(root *goquery.Selection) string {
	var t string
	root.Find("title").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if n := s.Get(0); n.Namespace != "" {
			return true
		}
		t = collapse(s.Nodes, maxTitleBytes)
		return false
	})
	return t
}

// metaContent is the collapsed content of the first <meta name=name>.
func metaContent(root *goquery.Selection, name string, limit int) string {
	var out string
	root.Find("meta[name][content]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		n, _ := s.Attr("name")
		if !strings.EqualFold(strings.TrimSpace(n), name) {
			return true
		}
		c, _ := s.Attr("content")
		out = collapseString(c, limit)
		return false
	})
	return out
}

// RefreshURL returns the URL of a meta refresh content ("5; url=next.html",
// "0;URL='x'"), parsed as browsers do; ok is false when there is none.
func RefreshURL(content string) (string, bool) {
	s := strings.TrimLeft(content, " \t\n\f\r")
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return "", false
	}
	s = strings.TrimLeft(s[i:], " \t\n\f\r")
	if s == "" || (s[0] != ';' && s[0] != ',') {
		return "", false
	}
	s = strings.TrimLeft(s[1:], " \t\n\f\r")
	if len(s) >= 3 && strings.EqualFold(s[:3], "url") {
		rest := strings.TrimLeft(s[3:], " \t\n\f\r")
		if strings.HasPrefix(rest, "=") {
			s = strings.TrimLeft(rest[1:], " \t\n\f\r")
		}
	}
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			s = s[:j]
		}
	}
	s = strings.TrimSpace(s)
	return s, s != ""
}

func metaRobots(root *goquery.Selection) (nofollow, noindex bool) {
	root.Find("meta[name][content]").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		if !strings.EqualFold(strings.TrimSpace(name), "robots") {
			return
		}
		content, _ := s.Attr("content")
		f, i := ParseRobotsDirectives(content)
		nofollow, noindex = nofollow || f, noindex || i
	})
	return nofollow, noindex
}

// baseURL is the document's base URL: the first <base href>, resolved
// against the page URL, or the page URL.
func baseURL(root *goquery.Selection, page string) string {
	href, ok := root.Find("base[href]").First().Attr("href")
	if !ok {
		return page
	}
	b, err := urlcanon.Resolve(page, href)
	if err != nil {
		return page
	}
	return b
}

// linkSources are the elements that carry links, in one selector group so
// that cascadia matches them in document order.
const linkSources = "a[href], area[href], frame[src], iframe[src], link[href], body[background], applet[code], meta[http-equiv][content]"

// followedRels are the <link rel> values whose target is a page to crawl.
var followedRels = []string{"next", "prev", "previous", "alternate", "canonical"}

// links extracts the page's outlinks (none under nofollow, but the
// canonical link is still returned).
func links(root *goquery.Selection, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	base := baseURL(root, page)
	if opts.Results != nil {
		return resultLinks(root, base, page, opts, nofollow)
	}
	var raw []rawLink
	root.Find(linkSources).Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		if n.Namespace != "" || inert(n) { // inside SVG/MathML or <template>
			return
		}
		switch n.DataAtom {
		case atom.A, atom.Area:
			ref, _ := s.Attr("href")
			rel, _ := s.Attr("rel")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, rel: normRel(rel), anchor: anchorText(s, n)})
		case atom.Frame, atom.Iframe:
			ref, _ := s.Attr("src")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, anchor: anchorText(s, n)})
		case atom.Link:
			ref, _ := s.Attr("href")
			rel, _ := s.Attr("rel")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, rel: normRel(rel)})
		case atom.Body:
			ref, _ := s.Attr("background")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref})
		case atom.Applet:
			code, _ := s.Attr("code")
			cb, hasCB := s.Attr("codebase")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: code, codebase: cb, hasCB: hasCB})
		case atom.Meta:
			equiv, _ := s.Attr("http-equiv")
			if !strings.EqualFold(strings.TrimSpace(equiv), "refresh") {
				return
			}
			content, _ := s.Attr("content")
			if ref, ok := RefreshURL(content); ok {
				raw = append(raw, rawLink{tag: n.DataAtom, ref: ref})
			}
		}
	})
	return resolveLinks(raw, base, page, opts, nofollow)
}

// resultLinks extracts the links of a search engine result page: those of
// the elements Options.Results matches.
func resultLinks(root *goquery.Selection, base, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	resolver, err := urlcanon.NewResolver(base)
	if err != nil {
		return nil, map[string]int{DropInvalid: 1}, ""
	}
	resolver.WithCache(opts.Resolved)
	k := newLinkSink(page, opts.MaxOutlinks, 0)
	root.FindMatcher(opts.Results).Each(func(_ int, s *goquery.Selection) {
		if goquery.NodeName(s) != "a" {
			s = s.Find("a[href]").First()
		}
		n := s.Get(0)
		if n == nil || n.Namespace != "" {
			return
		}
		ref, ok := s.Attr("href")
		if !ok {
			return
		}
		rel, _ := s.Attr("rel")
		if nofollow {
			k.drop(DropNoFollow)
			return
		}
		if k.add(resolver, ref, Link{Rel: normRel(rel), Tag: "a"}) {
			k.out[len(k.out)-1].Anchor = anchorText(s, n)
		}
	})
	return k.links(), k.dropped, ""
}

// resolveLinks applies the link rules to a page's raw links, in document
// order, against base (the resolved <base href>, or the page URL): which
// rel values are followed, nofollow, the canonical link (returned even
// under nofollow), applet codebases; both parsing paths collect rawLinks
// and share these rules.
func resolveLinks(raw []rawLink, base, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	resolver, err := urlcanon.NewResolver(base)
	if err != nil {
		// the base is the canonical page URL or a canonical <base href>
		return nil, map[string]int{DropInvalid: 1}, ""
	}
	resolver.WithCache(opts.Resolved)
	k := newLinkSink(page, opts.MaxOutlinks, len(raw))
	var canonical string
	for _, l := range raw {
		switch l.tag {
		case atom.A, atom.Area:
			if nofollow || hasToken(l.rel, "nofollow") {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: l.rel, Tag: l.tag.String(), Anchor: l.anchor})
		case atom.Frame, atom.Iframe:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Tag: l.tag.String(), Anchor: l.anchor})
		case atom.Link:
			if hasToken(l.rel, "canonical") && canonical == "" {
				if u, err := resolver.Resolve(l.ref); err == nil {
					canonical = u
				}
			}
			if hasToken(l.rel, "stylesheet") || !slices.ContainsFunc(followedRels, func(r string) bool { return hasToken(l.rel, r) }) {
				continue
			}
			if nofollow || hasToken(l.rel, "nofollow") {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: l.rel, Tag: "link"})
		case atom.Body:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Tag: "body"})
		case atom.Applet:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			r := resolver
			if l.hasCB {
				var err error
				if r, err = codebaseResolver(resolver, l.codebase, opts.Resolved); err != nil {
					k.drop(DropInvalid)
					continue
				}
			}
			k.add(r, l.ref, Link{Tag: "applet"})
		case atom.Meta:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: "refresh", Tag: "meta"})
		}
	}
	return k.links(), k.dropped, canonical
}

// codebaseResolver resolves an applet's code against its codebase, a
// directory.
func codebaseResolver(r *urlcanon.Resolver, codebase string, cache *urlcanon.ResolveCache) (*urlcanon.Resolver, error) {
	abs, err := r.Resolve(codebase)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(abs, "/") {
		abs += "/"
	}
	cr, err := urlcanon.NewResolver(abs)
	if err != nil {
		return nil, err
	}
	cr.WithCache(cache)
	return cr, nil
}

// linkSink keeps a page's links: resolved, deduplicated, capped, with the
// drops counted.
type linkSink struct {
	max     int
	pageKey string
	seen    map[string]struct{} // dedup keys of the links kept
	out     []Link
	dropped map[string]int
}

// newLinkSink returns a sink for the links of page, sized for about
// expect of them (a hint: the raw links found, at most limit).
func newLinkSink(page string, limit, expect int) *linkSink {
	if limit > 0 {
		expect = min(expect, limit)
	}
	return &linkSink{max: limit, pageKey: urlcanon.Key(page), seen: make(map[string]struct{}, expect), out: make([]Link, 0, expect)}
}

// links returns the links kept: nil when none was.
func (k *linkSink) links() []Link {
	if len(k.out) == 0 {
		return nil
	}
	return k.out
}

func (k *linkSink) drop(reason string) {
	if k.dropped == nil {
		k.dropped = make(map[string]int)
	}
	k.dropped[reason]++
}

// add resolves ref and keeps l with that URL unless it is dropped; it
// reports whether l was kept.
func (k *linkSink) add(r *urlcanon.Resolver, ref string, l Link) bool {
	u, err := r.Resolve(ref)
	switch {
	case errors.Is(err, urlcanon.ErrScheme):
		k.drop(DropScheme)
		return false
	case errors.Is(err, urlcanon.ErrTooLong):
		k.drop(DropTooLong)
		return false
	case err != nil:
		k.drop(DropInvalid)
		return false
	}
	// One resource, one link: spellings are compared by dedup key
	// ("/p?" and "/p" are one link; the first spelling is kept).
	key := urlcanon.Key(u)
	if key == k.pageKey {
		k.drop(DropSelf)
		return false
	}
	if _, dup := k.seen[key]; dup {
		k.drop(DropDuplicate)
		return false
	}
	k.seen[key] = struct{}{}
	if len(k.out) >= k.max {
		k.drop(DropOverCap)
		return false
	}
	l.URL = u
	k.out = append(k.out, l)
	return true
}

func normRel(rel string) string {
	return strings.Join(strings.Fields(strings.ToLower(rel)), " ")
}

// inert reports whether n is inside content that is not part of the
// rendered document (<template> contents).
func inert(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.DataAtom == atom.Template {
			return true
		}
	}
	return false
}

// anchorText is the text a link is known by: the text of an <a> (or the alt
// text of its first image), the alt of an <area>, the title of a frame.
func anchorText(s *goquery.Selection, n *html.Node) string {
	switch n.DataAtom {
	case atom.A:
		if a := collapse(s.Nodes, maxAnchorBytes); a != "" {
			return a
		}
		return imageAlt(s)
	case atom.Area:
		alt, _ := s.Attr("alt")
		return collapseString(alt, maxAnchorBytes)
	default:
		t, _ := s.Attr("title")
		return collapseString(t, maxAnchorBytes)
	}
}

func hasToken(list, tok string) bool {
	for _, t := range strings.Fields(list) {
		if t == tok {
			return true
		}
	}
	return false
}

func imageAlt(s *goquery.Selection) string {
	var alt string
	s.Find("img[alt]").EachWithBreak(func(_ int, img *goquery.Selection) bool {
		a, _ := img.Attr("alt")
		alt = collapseString(a, maxAnchorBytes)
		return alt == ""
	})
	return alt
}

// skipped are the elements whose content is not visible text.
var skipped = map[atom.Atom]bool{
	atom.Head:     true,
	atom.Script:   true,
	atom.Style:    true,
	atom.Noscript: true,
	atom.Noframes: true,
	atom.Template: true,
	atom.Iframe:   true, // its content is raw fallback text
	atom.Object:   true,
	atom.Title:    true,
}

// blocks are the elements that start a new line of text.
var blocks = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true,
	atom.Body: true, atom.Br: true, atom.Caption: true, atom.Center: true,
	atom.Dd: true, atom.Details: true, atom.Dialog: true, atom.Dir: true,
	atom.Div: true, atom.Dl: true, atom.Dt: true, atom.Fieldset: true,
	atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.Frameset: true, atom.H1: true, atom.H2: true, atom.H3: true,
	atom.H4: true, atom.H5: true, atom.H6: true, atom.Header: true,
	atom.Hgroup: true, atom.Hr: true, atom.Html: true, atom.Legend: true,
	atom.Li: true, atom.Main: true, atom.Menu: true, atom.Nav: true,
	atom.Ol: true, atom.Option: true, atom.P: true, atom.Pre: true,
	atom.Section: true, atom.Summary: true, atom.Table: true, atom.Tbody: true,
	atom.Tfoot: true, atom.Thead: true, atom.Tr: true, atom.Ul: true,
	atom.Textarea: true, atom.Select: true,
}

// cells are the elements separated from their neighbours by a space.
var cells = map[atom.Atom]bool{atom.Td: true, atom.Th: true, atom.Img: true, atom.Input: true, atom.Button: true}

// separator is what goes between two words.
type separator uint8

const (
	sepNone separator = iota
	sepSpace
	sepLine
)

// textBuf is the bytes a textWriter appended. String returns them without
// a copy, as strings.Builder does: a writer whose buffer is reused (the
// streamer's, kept across pages) takes a copy instead (copyString).
type textBuf struct{ buf []byte }

func (b *textBuf) Len() int             { return len(b.buf) }
func (b *textBuf) grow(n int)           { b.buf = slices.Grow(b.buf, n) }
func (b *textBuf) writeByte(c byte)     { b.buf = append(b.buf, c) }
func (b *textBuf) writeString(s string) { b.buf = append(b.buf, s...) }
func (b *textBuf) String() string       { return unsafe.String(unsafe.SliceData(b.buf), len(b.buf)) }
func (b *textBuf) copyString() string   { return string(b.buf) }
func (b *textBuf) reset()               { b.buf = b.buf[:0] }

// textWriter collapses whitespace while text is appended, up to a byte cap.
type textWriter struct {
	b         textBuf
	max       int
	pending   separator
	lead      separator // the separator pending before the first word (not written)
	newlines  bool      // block separators become newlines (else spaces)
	truncated bool
}

func (w *textWriter) sep(s separator) {
	if s > w.pending {
		w.pending = s
	}
}

// word appends one whitespace-free word, preceded by the pending separator.
func (w *textWriter) word(s string) {
	if w.truncated {
		return
	}
	if w.b.Len() == 0 {
		w.lead = w.pending
	}
	if w.b.Len() > 0 && w.pending != sepNone {
		c := byte(' ')
		if w.pending == sepLine && w.newlines {
			c = '\n'
		}
		if w.b.Len()+1 >= w.max {
			w.truncated = true
			return
		}
		w.b.writeByte(c)
	}
	w.pending = sepNone
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if room := w.max - w.b.Len(); len(s) > room {
		w.b.writeString(cutUTF8(s, room))
		w.truncated = true
		return
	}
	w.b.writeString(s)
}

// asciiSpace is unicode.IsSpace for the ASCII range.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// text appends s with its whitespace runs collapsed. Runs of words already
// separated by single ASCII spaces are written at once; ASCII bytes are
// classified by table, and only other runes go through unicode.IsSpace.
func (w *textWriter) text(s string) {
	i := 0
	for i < len(s) && !w.truncated {
		space, n := spaceAt(s, i)
		if space {
			w.sep(sepSpace)
			i += n
			continue
		}
		// A run: words joined by single spaces, up to other whitespace.
		j := i + n
		for j < len(s) {
			space, n := spaceAt(s, j)
			if space {
				if s[j] != ' ' || j+1 >= len(s) {
					break
				}
				if next, _ := spaceAt(s, j+1); next {
					break
				}
			}
			j += n
		}
		w.run(s[i:j])
		i = j
	}
}

// spaceAt reports whether the rune at s[i] is white space, and its size.
func spaceAt(s string, i int) (bool, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiSpace[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return unicode.IsSpace(r), n
}

// run appends words joined by single spaces; a run that does not fit is
// written word by word, so that the cut falls as word would put it.
func (w *textWriter) run(s string) {
	sep := 0
	if w.b.Len() > 0 && w.pending != sepNone {
		sep = 1
	}
	if w.b.Len()+sep+len(s) >= w.max {
		for {
			i := strings.IndexByte(s, ' ')
			if i < 0 {
				w.word(s)
				return
			}
			w.word(s[:i])
			w.sep(sepSpace)
			s = s[i+1:]
		}
	}
	w.word(s)
}

// walk appends the visible text under n.
func (w *textWriter) walk(n *html.Node) {
	for ; n != nil && !w.truncated; n = n.NextSibling {
		switch n.Type {
		case html.TextNode:
			w.text(n.Data)
		case html.ElementNode:
			if n.Namespace != "" || skipped[n.DataAtom] { // SVG, MathML and invisible elements
				continue
			}
			s := sepNone
			if blocks[n.DataAtom] {
				s = sepLine
			} else if cells[n.DataAtom] {
				s = sepSpace
			}
			w.sep(s)
			w.walk(n.FirstChild)
			w.sep(s)
		case html.DocumentNode:
			w.walk(n.FirstChild)
		}
	}
}

// visibleText is the text under nodes; hint sizes the buffer (half the
// body is typical of text-heavy pages and saves the builder's regrowth).
func visibleText(nodes []*html.Node, limit, hint int) (string, bool) {
	w := textWriter{max: limit, newlines: true}
	w.b.grow(min(limit, hint))
	for _, n := range nodes {
		w.walk(n)
	}
	return w.b.String(), w.truncated
}

// collapse is the text content of nodes on one line (script and style
// excluded), whitespace collapsed, at most limit bytes.
func collapse(nodes []*html.Node, limit int) string {
	w := textWriter{max: limit}
	for _, n := range nodes {
		if n.Type == html.ElementNode && n.DataAtom == atom.Title {
			// title is skipped by walk; its content is plain text.
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.TextNode {
					w.text(c.Data)
				}
			}
			continue
		}
		w.walk(n.FirstChild)
	}
	return w.b.String()
}

func collapseString(s string, limit int) string {
	w := textWriter{max: limit}
	w.text(s)
	return w.b.String()
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
