// Package rendersniff decides from a fetched page whether it needs a
// browser: whether the text and links a reader sees are in the HTML the
// server sent, or are built by the page's scripts in the browser (an HTML
// shell with an empty app root, which React, Vue, Angular and their kin
// serve when nothing renders on the server).
//
// It is pure: a function of the body and its Content-Type, with no I/O.
// It runs on every HTML page the fetcher gets, so it is one pass over the
// bytes, without allocating, and it stops as soon as the page has shown
// enough text to be a server-rendered page (usually in the first few KB
// of the body). It does not build a DOM and does not use a tokenizer
// (x/net/html's costs about 130 µs and 1 900 allocations on a 22 KiB page,
// the parser's htmltok measured, more than this decision is worth): it
// finds tags, comments and raw text elements the way the HTML tokenizer
// does, closely enough for a count of text and a few attributes.
//
// How it decides, in this order (the first rule that applies gives the
// Verdict and its Reason):
//
//  1. Not HTML (a Content-Type other than text/html or
//     application/xhtml+xml; with none, a body that does not start with
//     '<'): no (ReasonNotHTML).
//  2. The page holds at least MaxText bytes of visible text (bytes that are
//     not white space, in text outside <head>, <script>, <style>,
//     <noscript>, <template> and <title>, entities counted as written):
//     no (ReasonHasText). A server-rendered page, with or without scripts,
//     and a page whose app root already holds its server-rendered text
//     (Next.js, Nuxt or Angular Universal with SSR) end here.
//  3. No executable script (a <script> without a type, or of type module
//     or a JavaScript MIME type; JSON, JSON-LD and templates do not
//     count): no (ReasonNoScripts). Nothing would build the page.
//  4. An app root that is empty: an element with id app, root, __next,
//     __nuxt, ___gatsby, q-app or svelte, an <app-root> element (Angular),
//     or one with an ng-app, ng-version, data-reactroot or data-v-app
//     attribute, holding less than MaxRootText bytes of text ("Loading…"):
//     yes (ReasonAppRoot).
//  5. A <noscript> whose text asks for JavaScript ("You need to enable
//     JavaScript to run this app"): yes (ReasonNoscript). A <noscript>
//     that holds only a tracking pixel or a tag manager's iframe does not
//     count: only its text, outside tags, is read.
//  6. Less than NoText bytes of visible text (and scripts): yes
//     (ReasonNoText).
//  7. Otherwise (a little text, scripts, no marker): no (ReasonLittleText).
//
// Where it is wrong:
//
//   - A server-rendered page whose content scripts extend (comments,
//     "load more", infinite scroll, prices filled in later) has text, so
//     it is not rendered, and what the scripts add is missed. So is a
//     script-built page with enough static text around its app root
//     (a large server-rendered header, footer or cookie notice of
//     MaxText bytes or more).
//   - A short page with an analytics script and almost no text (a bare
//     "Not found", a page that is one image or one video) is rendered
//     for nothing (rule 6).
//   - An app root of another name (a custom id, a framework not listed)
//     with a "Loading, please wait…" longer than NoText is not seen, and
//     the page is not rendered (rule 7).
//   - Text is counted in bytes as written: a page in a script of 3-byte
//     characters reaches MaxText in a third as many characters, and
//     entities count as their source (&amp; is 5 bytes).
//   - Text hidden by CSS counts; text written by document.write does not
//     exist yet, which is right.
//   - An AngularJS template (ng-app on <html> or <body>) holds its labels
//     as text with {{bindings}}: with enough of them, it is taken for a
//     server-rendered page.
package rendersniff

import (
	"bytes"
	"strings"
)

// The limits of the decision, in bytes of visible text (see the package
// documentation).
const (
	// MaxText is the visible text from which a page is server-rendered:
	// about 35 words.
	MaxText = 200
	// NoText is the visible text below which a page with scripts has no
	// text of its own: "Loading…", a lone heading.
	NoText = 32
	// MaxRootText is the text below which an app root is empty: a
	// spinner's label, "Loading…".
	MaxRootText = 64
)

// Reasons, a bounded set: they may label a metric.
const (
	ReasonNotHTML    = "not_html"
	ReasonHasText    = "has_text"
	ReasonNoScripts  = "no_scripts"
	ReasonAppRoot    = "app_root+no_text"
	ReasonNoscript   = "noscript_js+no_text"
	ReasonNoText     = "scripts+no_text"
	ReasonLittleText = "little_text"
)

// Reasons lists every reason a Verdict can give.
var Reasons = []string{
	ReasonNotHTML, ReasonHasText, ReasonNoScripts, ReasonAppRoot,
	ReasonNoscript, ReasonNoText, ReasonLittleText,
}

// Verdict is NeedsRender's answer: whether the page needs a browser, and
// the rule that decided (one of Reasons), for logs and metrics.
type Verdict struct {
	Render bool
	Reason string
}

// NeedsRender tells whether the page needs a browser to show its text and
// links, from its body and Content-Type header (see the package
// documentation for the rules). It reads body without keeping or changing
// it, allocates nothing, and is safe for concurrent use.
func NeedsRender(body []byte, contentType string) Verdict {
	if !isHTML(body, contentType) {
		return Verdict{Reason: ReasonNotHTML}
	}
	s := scanner{limit: MaxText}
	if s.scan(body) {
		return Verdict{Reason: ReasonHasText}
	}
	switch {
	case s.scripts == 0:
		return Verdict{Reason: ReasonNoScripts}
	case s.emptyRoot:
		return Verdict{Render: true, Reason: ReasonAppRoot}
	case s.noscriptJS:
		return Verdict{Render: true, Reason: ReasonNoscript}
	case s.text < NoText:
		return Verdict{Render: true, Reason: ReasonNoText}
	}
	return Verdict{Reason: ReasonLittleText}
}

// isHTML tells whether contentType names HTML or, when it is empty, body
// starts (after white space and a byte order mark) with '<'.
func isHTML(body []byte, contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	ct = strings.TrimSpace(ct)
	if ct == "" {
		b := bytes.TrimPrefix(bytes.TrimLeft(body, " \t\r\n\f"), []byte("\xef\xbb\xbf"))
		b = bytes.TrimLeft(b, " \t\r\n\f")
		return len(b) > 0 && b[0] == '<'
	}
	return strings.EqualFold(ct, "text/html") || strings.EqualFold(ct, "application/xhtml+xml")
}

// scanner holds what one pass over a page has seen.
type scanner struct {
	limit      int  // the text at which the scan stops: MaxText
	text       int  // visible text bytes
	scripts    int  // executable scripts
	inHead     bool // between <head> and its end
	template   int  // depth of <template> elements
	emptyRoot  bool // an app root closed (or the page ended) nearly empty
	noscriptJS bool // a <noscript> asks for JavaScript

	// The app root open, if any: its tag name (a slice of the body), the
	// depth of elements of that name inside it, its text.
	root     []byte
	rootNest int
	rootText int
}

// scan reads body, and reports true as soon as it has seen s.limit bytes
// of visible text (the rest is not read).
func (s *scanner) scan(body []byte) bool {
	i := 0
	for i < len(body) {
		lt := bytes.IndexByte(body[i:], '<')
		if lt < 0 {
			return s.addText(body[i:])
		}
		if s.addText(body[i : i+lt]) {
			return true
		}
		i += lt
		next := i + 1
		var c byte
		if next < len(body) {
			c = body[next]
		}
		switch {
		case c == '!':
			i = skipMarkup(body, i)
		case c == '?':
			i = skipTo(body, i, '>')
		case c == '/' && next+1 < len(body) && isLetter(body[next+1]):
			name, end := tagName(body, next+1)
			s.endTag(name)
			i = skipTo(body, end, '>')
		case c == '/':
			i = skipTo(body, i, '>') // "</>" or "</ …>": a bogus comment
		case isLetter(c):
			var raw string
			if i, raw = s.startTag(body, next); raw != "" {
				if i = s.rawText(body, i, raw); i < 0 {
					return true
				}
			}
		default:
			if s.addText(body[i : i+1]) { // a '<' that opens nothing is text
				return true
			}
			i++
		}
	}
	s.closeRoot()
	return false
}

// addText counts the visible bytes of a text and reports whether the page
// now holds s.limit of them.
func (s *scanner) addText(b []byte) bool {
	if s.inHead || s.template > 0 || len(b) == 0 {
		return false
	}
	n := 0
	for _, c := range b {
		if !isSpace(c) {
			n++
		}
	}
	s.text += n
	if s.root != nil {
		s.rootText += n
	}
	return s.text >= s.limit
}

// startTag reads the start tag whose name begins at body[at], notes what
// matters in it, and returns the index after its '>' and, when raw text
// follows (a script, style, noscript, …, which rawText reads), the
// element's lower-case name.
func (s *scanner) startTag(body []byte, at int) (int, string) {
	name, i := tagName(body, at)
	var (
		isRoot   = equalFoldBytes(name, "app-root")
		isScript = equalFoldBytes(name, "script")
		typ      []byte
		hasType  bool
	)
	for {
		for i < len(body) && (isSpace(body[i]) || body[i] == '/') {
			i++
		}
		if i >= len(body) {
			break
		}
		if body[i] == '>' {
			i++
			break
		}
		// An attribute: its name (a first '=' belongs to it), then
		// maybe '=' and a value, quoted or not.
		ns := i
		i++
		for i < len(body) && class[body[i]]&endsAttrName == 0 {
			i++
		}
		key := body[ns:i]
		for i < len(body) && isSpace(body[i]) {
			i++
		}
		var val []byte
		if i < len(body) && body[i] == '=' {
			i++
			for i < len(body) && isSpace(body[i]) {
				i++
			}
			if i < len(body) && (body[i] == '"' || body[i] == '\'') {
				q := body[i]
				end := bytes.IndexByte(body[i+1:], q)
				if end < 0 {
					return len(body), ""
				}
				val = body[i+1 : i+1+end]
				i += end + 2
			} else {
				vs := i
				for i < len(body) && class[body[i]]&endsValue == 0 {
					i++
				}
				val = body[vs:i]
			}
		}
		switch len(key) { // most attributes are none of these: compare lengths first
		case 2:
			isRoot = isRoot || equalFoldBytes(key, "id") && isRootID(val)
		case 4:
			if isScript && equalFoldBytes(key, "type") {
				typ, hasType = val, true
			}
		case 6, 10, 14:
			isRoot = isRoot || equalFoldBytes(key, "ng-app") || equalFoldBytes(key, "ng-version") ||
				equalFoldBytes(key, "data-v-app") || equalFoldBytes(key, "data-reactroot")
		}
	}
	s.element(name, isRoot && !isVoid(name))
	if isScript && (!hasType || executable(typ)) {
		s.scripts++
	}
	return i, rawElement(name)
}

// element notes a start tag: the head's start and end, templates, and
// the app root.
func (s *scanner) element(name []byte, isRoot bool) {
	switch {
	case len(name) == 4 && equalFoldBytes(name, "head"):
		s.inHead = true
	case len(name) == 4 && equalFoldBytes(name, "body"):
		s.inHead = false
	case len(name) == 8 && equalFoldBytes(name, "template"):
		s.template++
	case s.inHead && !inHead(name):
		s.inHead = false // an element of the body ends the head, as in a browser
	}
	switch {
	case s.root != nil && sameFold(name, s.root):
		s.rootNest++
	case s.root == nil && isRoot:
		s.root, s.rootNest, s.rootText = name, 1, 0
	}
}

// endTag notes an end tag.
func (s *scanner) endTag(name []byte) {
	switch {
	case len(name) == 4 && equalFoldBytes(name, "head"):
		s.inHead = false
	case len(name) == 8 && equalFoldBytes(name, "template"):
		if s.template > 0 {
			s.template--
		}
	}
	if s.root != nil && sameFold(name, s.root) {
		if s.rootNest--; s.rootNest == 0 {
			s.closeRoot()
		}
	}
}

// closeRoot ends the app root open, if any.
func (s *scanner) closeRoot() {
	if s.root == nil {
		return
	}
	if s.rootText < MaxRootText {
		s.emptyRoot = true
	}
	s.root = nil
}

// rawText reads the content of the raw text element kind (script,
// style, noscript, title, textarea, …) that starts at body[at], up to its
// end tag, notes what it holds, and returns the index of that end tag, or
// -1 when the page has shown s.limit bytes of text.
func (s *scanner) rawText(body []byte, at int, kind string) int {
	end := closingTag(body, at, kind)
	content := body[at:end]
	switch kind {
	case "noscript":
		s.noscriptJS = s.noscriptJS || asksForJS(content)
	case "textarea", "xmp", "plaintext":
		if s.addText(content) {
			return -1
		}
	}
	return end
}

// closingTag returns the index of the "</kind" that closes a raw text
// element whose content starts at body[at] ("</script>" in any case,
// followed by white space, '/' or '>'), or len(body).
func closingTag(body []byte, at int, kind string) int {
	if kind == "plaintext" {
		return len(body)
	}
	for i := at; i < len(body); {
		lt := bytes.IndexByte(body[i:], '<')
		if lt < 0 {
			break
		}
		i += lt
		j := i + 2 + len(kind)
		if j <= len(body) && body[i+1] == '/' && equalFoldBytes(body[i+2:j], kind) &&
			(j == len(body) || isSpace(body[j]) || body[j] == '/' || body[j] == '>') {
			return i
		}
		i++
	}
	return len(body)
}

// asksForJS tells whether the text of a noscript's content, outside its
// tags, mentions JavaScript.
func asksForJS(content []byte) bool {
	for len(content) > 0 {
		lt := bytes.IndexByte(content, '<')
		if lt < 0 {
			lt = len(content)
		}
		if containsFold(content[:lt], "javascript") || containsFold(content[:lt], "enable js") {
			return true
		}
		content = content[lt:]
		gt := bytes.IndexByte(content, '>')
		if gt < 0 {
			break
		}
		content = content[gt+1:]
	}
	return false
}

// skipMarkup skips the comment, doctype or CDATA section that begins with
// "<!" at body[at] and returns the index after it.
func skipMarkup(body []byte, at int) int {
	if bytes.HasPrefix(body[at:], []byte("<!--")) {
		// "<!-->" and "<!--->" are empty comments.
		end := bytes.Index(body[at+2:], []byte("-->"))
		if end < 0 {
			return len(body)
		}
		return at + 2 + end + 3
	}
	return skipTo(body, at, '>')
}

// skipTo returns the index after the first c at or after body[at], or
// len(body).
func skipTo(body []byte, at int, c byte) int {
	end := bytes.IndexByte(body[at:], c)
	if end < 0 {
		return len(body)
	}
	return at + end + 1
}

// tagName returns the tag name that begins at body[at] and the index after
// it.
func tagName(body []byte, at int) ([]byte, int) {
	i := at
	for i < len(body) && class[body[i]]&endsTagName == 0 {
		i++
	}
	return body[at:i], i
}

// rawElement returns the lower-case name of name when its content is raw
// text, as the HTML tokenizer reads it, and "" otherwise.
func rawElement(name []byte) string {
	if len(name) < 3 || len(name) > 9 {
		return ""
	}
	switch lower(name[0]) {
	case 's', 'n', 't', 'i', 'x', 'p':
	default:
		return ""
	}
	for _, r := range [...]string{"script", "style", "noscript", "title", "textarea", "iframe", "xmp", "noembed", "noframes", "plaintext"} {
		if equalFoldBytes(name, r) {
			return r
		}
	}
	return ""
}

// inHead tells whether an element may stay in the <head>.
func inHead(name []byte) bool {
	for _, h := range [...]string{"meta", "link", "title", "script", "style", "base", "noscript", "template"} {
		if equalFoldBytes(name, h) {
			return true
		}
	}
	return false
}

// isVoid tells whether an element has no content and no end tag.
func isVoid(name []byte) bool {
	for _, v := range [...]string{"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"} {
		if equalFoldBytes(name, v) {
			return true
		}
	}
	return false
}

// isRootID tells whether an id is one frameworks mount their app on.
// Ids are case-sensitive.
func isRootID(id []byte) bool {
	for _, r := range [...]string{"app", "root", "__next", "__nuxt", "___gatsby", "q-app", "svelte"} {
		if string(id) == r {
			return true
		}
	}
	return false
}

// executable tells whether a script of type typ runs: a JavaScript MIME
// type, module, or "" (the default); not JSON, JSON-LD, templates, import
// maps.
func executable(typ []byte) bool {
	t := bytes.TrimSpace(typ)
	return len(t) == 0 || equalFoldBytes(t, "module") ||
		containsFold(t, "javascript") || containsFold(t, "ecmascript") ||
		equalFoldBytes(t, "text/babel") || equalFoldBytes(t, "text/jsx")
}

// The classes of bytes that end a token in a tag, looked up in class.
const (
	space        = 1 << iota // HTML white space
	endsTagName              // white space, '/', '>'
	endsAttrName             // white space, '/', '>', '='
	endsValue                // an unquoted value: white space, '>'
)

// class holds the classes of each byte: one load instead of a chain of
// comparisons in the loops over the bytes of a tag.
var class = func() (c [256]uint8) {
	for _, b := range []byte(" \t\n\r\f") {
		c[b] = space | endsTagName | endsAttrName | endsValue
	}
	c['/'] = endsTagName | endsAttrName
	c['>'] = endsTagName | endsAttrName | endsValue
	c['='] = endsAttrName
	return c
}()

func isSpace(c byte) bool {
	return class[c]&space != 0
}

func isLetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equalFoldBytes tells whether b equals the lower-case ASCII s, ignoring
// ASCII case.
func equalFoldBytes(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lower(b[i]) != s[i] {
			return false
		}
	}
	return true
}

// sameFold tells whether a and b are equal, ignoring ASCII case.
func sameFold(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

// containsFold tells whether b contains the lower-case ASCII s, ignoring
// ASCII case.
func containsFold(b []byte, s string) bool {
	for i := 0; i+len(s) <= len(b); i++ {
		if lower(b[i]) == s[0] && equalFoldBytes(b[i:i+len(s)], s) {
			return true
		}
	}
	return false
}
