package extract

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/htmltok"
)

// The streaming extractor reads the page in one pass of htmltok.Tokenizer
// (x/net/html's tokenizer for a body in memory; Next, TagName, TagAttr,
// Text: no Token, no DOM) and follows the parts of the HTML5 tree
// construction algorithm that decide what the DOM path reports:
// which elements are open (implied end of <head>, void elements, unclosed
// <p>/<li>/<dd>, a new <a> closing an open one, stray end tags ignored,
// scopes), raw text elements (the tree builder parses with scripting
// enabled: <noscript> is raw text), foreign (SVG/MathML) content and its
// integration points, <template>, framesets (also one replacing a body
// that has no content yet), quirks mode (a <table> does not close a <p>),
// an <a> reopened after a block closed it (the DOM clones it: the same
// link again, a DropDuplicate), and text and links foster parented out of
// tables (each open table writes into its own segment, merged after what
// was fostered before it).
//
// Links are collected raw and resolved after the pass, so that the first
// <base href> and the robots meta apply wherever they appear.
//
// The rules are split by file along the tree construction: this file
// holds the pass itself (tokens, text, the segments written, pushing and
// popping elements, anchors); stream_start.go the start tags ("in head",
// "in body", "in frameset", foreign content); stream_table.go the table
// modes and foster parenting; stream_end.go the end tags and the adoption
// agency; stream_scope.go the stack of open elements, its scopes and the
// element categories the rules test.
//
// Known differences from the DOM path, where the tree builder moves content
// in ways a stream does not follow. Except for the last one, none changes
// which URLs are found (FuzzStreamMatchesDOM checks it):
//   - The adoption agency algorithm is followed for <a> (what stays in the
//     link, one more duplicate link per block it is cloned into) but not
//     for other formatting elements: when a misnested </b> (or <i>, …)
//     moves a block out of them, the DOM clones an <a> open between them
//     too (<b><a href=x><div>y</b>: one more DropDuplicate, and the first
//     link's anchor is empty); inline elements between the formatting
//     element and the block stay open in the stream.
//   - An <a> open around a table receives foster parented text in source
//     order.
//   - Documents nested deeper than 512 elements: x/net/html's tree
//     builder rejects them and the DOM path returns an empty result; the
//     stream extracts them as any other page.

// ns is an element's namespace.
type ns uint8

const (
	nsHTML ns = iota
	nsSVG
	nsMath
)

// elem is an open element.
type elem struct {
	a      atom.Atom
	name   string // tag name when a is 0 (for end tag matching)
	ns     ns
	sep    separator // around its visible text
	at     int       // segment the element is written in
	seg    int       // segment its content is written in (a new one for a table)
	skip   bool      // content is not visible text (skipped or foreign)
	anchor int       // index in streamer.anchors + 1, or 0
	// mark is, for a special element opened inside an <a>, the length of
	// the anchor text before it + 1 (0: none), and markAlt whether an img
	// alt was found before it: what stays in the <a> if the adoption
	// agency moves this element out.
	mark    int
	markAlt bool
	id      int  // identity of an <a> (active formatting list) or a <form> (form pointer)
	htmlIP  bool // a MathML annotation-xml that is an HTML integration point
	jsonLD  bool // a <script type="application/ld+json">: its text is a JSON-LD block
}

// segment is visible text and links in document order. Content foster
// parented out of a table goes before the table: each open table writes
// into its own segment, merged into the enclosing one when it closes.
type segment struct {
	w     textWriter
	links []rawLink
}

// rawLink is a link source as found; it is resolved once the whole page
// (its <base href> and robots meta) has been read.
type rawLink struct {
	tag      atom.Atom
	ref      string
	rel      string // normalized
	anchor   string
	codebase string
	hasCB    bool
}

// anchorState collects the anchor text of an open <a>.
type anchorState struct {
	w         textWriter
	alt       string // first non-empty img alt inside
	altDone   bool   // alt is final
	cut       int    // anchor text length + 1 after the adoption agency, or 0
	skip, fgn int    // streamer counts when the <a> opened
	seg, link int    // where its rawLink is
}

// afeEntry is an entry of the list of active formatting elements: a
// marker or an <a> (other formatting elements do not matter here).
type afeEntry struct {
	marker  bool
	id      int
	onStack bool
	hasHref bool
	link    rawLink
}

// bodySnapshot is the metadata found before the body opened: a <frameset>
// that replaces the body drops what was found in it.
type bodySnapshot struct {
	desc             string
	hasDesc, hasBase bool
	robotsF, robotsI bool
	base             string
	titleState       uint8
}

type phase uint8

const (
	phBeforeBody phase = iota // initial … after head
	phBody
	phFrameset // in and after frameset
)

// attr indexes the attributes the extractor reads.
type attr uint8

const (
	atHref attr = iota
	atRel
	atSrc
	atTitle
	atAlt
	atBackground
	atCode
	atCodebase
	atName
	atContent
	atHTTPEquiv
	atLang
	atXMLLang
	atType
	atEncoding
	atColor // font breakout: color, face or size
	atProperty
	nAttrs
)

// attrs are the current start tag's attributes. The values are what
// TagAttr returned, views of the body or of the tokenizer's memory that
// are valid until the next Next: they are read while the tag is handled,
// and copied (get, string) where they are kept.
type attrs struct {
	val [nAttrs][]byte
	has [nAttrs]bool
}

func (t *attrs) get(a attr) string { return string(t.val[a]) }

type streamer struct {
	z        *htmltok.Tokenizer
	phase    phase
	stack    []elem
	segs     []*segment
	anchors  []*anchorState
	spare    []*anchorState // closed anchors' states, cleared, for the next <a>s
	afe      []afeEntry
	nextID   int
	skip     int // open elements whose content is not visible text
	fgn      int // open foreign elements
	template int // open <template> elements
	tables   int // open HTML <table> elements
	headOpen bool
	foster   bool // inserting with foster parenting
	bodyIdx  int  // links index in segs[0] where the body element is
	bodyBg   bool // the body element has a background attribute

	title      textWriter
	titleState uint8 // 0 none yet, 1 reading, 2 done
	titleDepth int

	desc        string
	hasDesc     bool
	robotsF     bool
	robotsI     bool
	lang        string
	hasLang     bool
	xmlLang     string
	hasXMLLang  bool
	base        string
	hasBase     bool
	started     bool // a token other than a doctype, comment or white space was read
	framesetOK  bool // a <frameset> would still replace the body
	formPtr     int  // id of the form element pointer's <form>, or 0
	atBody      bodySnapshot
	quirks      bool // quirks mode: a <table> does not close a <p>
	attr        attrs
	selfClosing bool

	sd     structuredSink
	ldText []byte // the text of the open JSON-LD <script>, up to maxJSONLDBlockBytes + 1
}

// scratch is the working memory of a streamer that no result keeps,
// reused by the next page: its stack of open elements, its list of active
// formatting elements, the raw links and the text of the page's root
// segment, the title's bytes and the states of closed anchors. (An <a>
// per link made growing these, and a text buffer sized for the whole
// page, the parser's largest allocations; the result copies out what it
// keeps, at its size.)
type scratch struct {
	stack []elem
	afe   []afeEntry
	links []rawLink
	text  textBuf
	title textBuf
	spare []*anchorState
}

// maxScratch is the most entries of a scratch slice kept for reuse, and
// maxScratchText the most bytes of its text buffer: a page of ten thousand
// links, or a megabyte of text, does not pin its buffers.
const (
	maxScratch     = 1024
	maxScratchText = 256 << 10
)

var scratches = sync.Pool{New: func() any {
	return &scratch{stack: make([]elem, 0, 64), afe: make([]afeEntry, 0, 64)}
}}

// take hands the scratch's buffers to a streamer for the page.
func (s *streamer) take(sc *scratch, maxText int) {
	s.stack, s.afe, s.spare = sc.stack, sc.afe, sc.spare
	s.title.b = sc.title
	s.segs = append(s.segs, &segment{w: textWriter{b: sc.text, max: maxText, newlines: true}, links: sc.links})
	*sc = scratch{}
}

// release gives the streamer's buffers back, cleared (their entries hold
// strings of the page), unless one grew past what is worth keeping.
func (s *streamer) release(sc *scratch) {
	root := s.segs[0]
	if cap(s.stack) <= maxScratch && cap(s.afe) <= maxScratch && cap(root.links) <= maxScratch &&
		cap(root.w.b.buf) <= maxScratchText && cap(s.title.b.buf) <= maxScratchText {
		sc.stack, sc.afe, sc.links = s.stack[:0], s.afe[:0], root.links[:0]
		clear(sc.stack[:cap(sc.stack)])
		clear(sc.afe[:cap(sc.afe)])
		clear(sc.links[:cap(sc.links)])
		sc.text, sc.title = root.w.b, s.title.b
		sc.text.reset()
		sc.title.reset()
		sc.spare = s.spare[:min(len(s.spare), maxSpare)]
		scratches.Put(sc)
	}
	s.stack, s.afe, s.spare, root.links = nil, nil, nil, nil
}

// maxSpare is the most closed anchors' states kept for the next page.
const maxSpare = 64

// extractStream is Extract for ordinary pages (no Results, no Detail).
func extractStream(page string, body []byte, opts Options) Result {
	s := streamer{z: htmltok.New(body), quirks: true, framesetOK: true}
	sc := scratches.Get().(*scratch)
	s.take(sc, opts.MaxTextBytes)
	defer s.release(sc)
	s.title.max = maxTitleBytes
	s.push(elem{a: atom.Html})
	s.run()
	for len(s.stack) > 0 {
		s.pop()
	}
	root := s.segs[0]

	var res Result
	res.Title = s.title.b.copyString()
	res.Description = s.desc
	res.NoFollow, res.NoIndex = s.robotsF || opts.NoFollow, s.robotsI
	res.Text, res.TextTruncated = root.w.b.copyString(), root.w.truncated
	lang := s.lang
	if !s.hasLang || strings.TrimSpace(lang) == "" {
		lang = s.xmlLang
	}
	res.Language = normLanguage(lang)
	res.Links, res.Dropped, res.Canonical = s.resolve(root.links, page, opts, res.NoFollow)
	s.sd.microdata(page, body)
	s.sd.result(&res)
	return res
}

// resolve turns the raw links into Links against the document's base.
func (s *streamer) resolve(raw []rawLink, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	base := page
	if s.hasBase {
		if b, err := urlcanon.Resolve(page, s.base); err == nil {
			base = b
		}
	}
	return resolveLinks(raw, base, page, opts, nofollow)
}

func (s *streamer) run() {
	z := s.z
	for {
		z.AllowCDATA(s.top().ns != nsHTML)
		switch tt := z.Next(); tt {
		case html.ErrorToken:
			return
		case html.DoctypeToken:
			if !s.started {
				s.quirks = doctypeQuirks(z.Text())
			}
		case html.TextToken:
			t := z.Text()
			s.started = s.started || !isWhitespace(t)
			s.text(t)
		case html.StartTagToken, html.SelfClosingTagToken:
			s.started = true
			name, _ := z.TagName()
			s.selfClosing = tt == html.SelfClosingTagToken
			s.startTag(atom.Lookup(name), name)
		case html.EndTagToken:
			s.started = true
			name, _ := z.TagName()
			s.endTag(atom.Lookup(name), name)
		}
	}
}

func (s *streamer) top() *elem { return &s.stack[len(s.stack)-1] }

// readAttrs reads the current tag's attributes that the extractor uses.
func (s *streamer) readAttrs() {
	t := &s.attr
	*t = attrs{}
	for more := true; more; {
		var k, v []byte
		k, v, more = s.z.TagAttr()
		if k == nil {
			return
		}
		var a attr
		switch string(k) {
		case "href":
			a = atHref
		case "rel":
			a = atRel
		case "src":
			a = atSrc
		case "title":
			a = atTitle
		case "alt":
			a = atAlt
		case "background":
			a = atBackground
		case "code":
			a = atCode
		case "codebase":
			a = atCodebase
		case "name":
			a = atName
		case "content":
			a = atContent
		case "http-equiv":
			a = atHTTPEquiv
		case "lang":
			a = atLang
		case "xml:lang":
			a = atXMLLang
		case "type":
			a = atType
		case "encoding":
			a = atEncoding
		case "color", "face", "size":
			a = atColor
		case "property":
			a = atProperty
		default:
			continue
		}
		if !t.has[a] {
			t.val[a], t.has[a] = v, true
		}
	}
}

// needsAttrs are the HTML elements whose attributes matter.
func needsAttrs(a atom.Atom) bool {
	switch a {
	case atom.A, atom.Area, atom.Frame, atom.Iframe, atom.Link, atom.Body, atom.Applet, atom.Meta,
		atom.Html, atom.Base, atom.Img, atom.Image, atom.Font, atom.AnnotationXml, atom.Input, atom.Script:
		return true
	}
	return false
}

// text handles a text token.
func (s *streamer) text(b []byte) {
	top := s.top()
	if s.phase == phFrameset {
		return
	}
	if top.ns != nsHTML && !textIntegrationPoint(top) && !htmlIntegrationPoint(top) {
		if len(bytes.Trim(b, " \t\n\f\r\x00")) > 0 {
			s.framesetOK = false
		}
		return // foreign text is never visible
	}
	if top.ns == nsHTML && rawText(top.a) {
		if top.jsonLD && len(s.ldText) <= maxJSONLDBlockBytes {
			s.ldText = append(s.ldText, b[:min(len(b), maxJSONLDBlockBytes+1-len(s.ldText))]...)
		}
		s.write(top.seg, b)
		return
	}
	if s.phase == phBeforeBody && s.template == 0 {
		if isWhitespace(b) {
			return
		}
		s.impliedBody()
	}
	if bytes.IndexByte(b, 0) >= 0 {
		b = bytes.ReplaceAll(b, []byte{0}, nil)
		if len(b) == 0 {
			return
		}
	}
	if s.tables > 0 && tableish(s.top().a) && s.top().ns == nsHTML {
		if isWhitespace(b) {
			s.write(s.top().seg, b)
			return
		}
		s.foster = true
		s.reconstruct()
		s.write(s.insertionSeg(), b)
		s.foster = false
		return
	}
	s.reconstruct()
	s.write(s.top().seg, b)
	if !isWhitespace(b) {
		s.framesetOK = false
	}
}

// write appends text to a segment and to the open anchors that see it.
func (s *streamer) write(seg int, b []byte) {
	// The view is used only during the calls: writers copy what they keep.
	str := unsafe.String(unsafe.SliceData(b), len(b))
	if s.titleState == 1 && len(s.stack)-1 == s.titleDepth {
		s.title.text(str)
		return
	}
	for _, a := range s.anchors {
		if a.skip == s.skip && a.fgn == s.fgn {
			a.w.text(str)
		}
	}
	if s.skip == 0 && s.fgn == 0 && !s.segs[0].w.truncated {
		s.segs[seg].w.text(str)
	}
}

// sepAll adds a separator for an element at the current depth.
func (s *streamer) sepAll(seg int, sp separator) {
	for _, a := range s.anchors {
		if a.skip == s.skip && a.fgn == s.fgn {
			a.w.sep(sp)
		}
	}
	if seg >= 0 && s.skip == 0 && s.fgn == 0 {
		s.segs[seg].w.sep(sp)
	}
}

// insertionSeg is the segment new content goes to: the current node's, or
// with foster parenting in a table context the one before the table.
func (s *streamer) insertionSeg() int {
	top := s.top()
	if s.foster && top.ns == nsHTML && tableish(top.a) {
		for i := len(s.stack) - 1; i >= 0; i-- {
			if e := &s.stack[i]; e.a == atom.Table && e.ns == nsHTML {
				return e.at
			}
		}
	}
	return top.seg
}

// push opens an element (its attributes read into s.attr when it uses
// them) and records what it contributes.
func (s *streamer) push(e elem) {
	if len(s.stack) > 0 {
		e.at = s.insertionSeg()
	}
	e.seg = e.at
	if e.ns == nsHTML {
		switch {
		case skipped[e.a]:
			e.skip = true
		case blocks[e.a]:
			e.sep = sepLine
		case cells[e.a]:
			e.sep = sepSpace
		}
	} else {
		e.skip = true
	}
	if n := len(s.anchors); n > 0 && special(&e) {
		e.mark, e.markAlt = s.anchors[n-1].w.b.Len()+1, s.anchors[n-1].alt != ""
	}
	if e.sep != sepNone {
		seg := e.at
		if e.a == atom.Table {
			seg = -1 // anchors only: the segment gets it when the table is merged
		}
		s.sepAll(seg, e.sep)
	}
	if e.ns == nsHTML {
		s.inserted(&e)
	}
	if e.skip {
		s.skip++
	}
	if e.ns != nsHTML {
		s.fgn++
	}
	if e.ns == nsHTML {
		switch e.a {
		case atom.Template:
			s.template++
		case atom.Table:
			s.tables++
			s.segs = append(s.segs, &segment{w: textWriter{max: math.MaxInt, newlines: true}})
			e.seg = len(s.segs) - 1
		case atom.Title:
			if s.titleState == 0 {
				s.titleState, s.titleDepth = 1, len(s.stack)
			}
		case atom.Script:
			// <template> content is inert: no structured data.
			e.jsonLD = s.template == 0 && s.attr.has[atType] && isJSONLDType(s.attr.val[atType])
			s.ldText = s.ldText[:0]
		}
	}
	s.stack = append(s.stack, e)
}

// void inserts an element that has no content.
func (s *streamer) void(e elem) {
	s.push(e)
	s.pop()
}

// inserted records the metadata and link of an HTML element being inserted.
func (s *streamer) inserted(e *elem) {
	t := &s.attr
	switch e.a {
	case atom.Base:
		if t.has[atHref] && !s.hasBase {
			s.base, s.hasBase = t.get(atHref), true
		}
		return
	case atom.Meta:
		if t.has[atContent] {
			if t.has[atProperty] {
				s.sd.property(string(t.val[atProperty]), string(t.val[atContent]))
			}
			if t.has[atName] {
				s.sd.property(string(t.val[atName]), string(t.val[atContent]))
			}
		}
		if t.has[atName] && t.has[atContent] {
			name := strings.TrimSpace(string(t.val[atName]))
			switch {
			case strings.EqualFold(name, "description"):
				if !s.hasDesc {
					s.desc, s.hasDesc = collapseString(string(t.val[atContent]), maxDescBytes), true
				}
			case strings.EqualFold(name, "robots"):
				f, i := ParseRobotsDirectives(string(t.val[atContent]))
				s.robotsF, s.robotsI = s.robotsF || f, s.robotsI || i
			}
		}
	case atom.Img:
		if t.has[atAlt] {
			for _, a := range s.anchors {
				if a.alt == "" && !a.altDone {
					a.alt = collapseString(string(t.val[atAlt]), maxAnchorBytes)
				}
			}
		}
		return
	}
	if e.a == atom.A {
		// Every <a> is an active formatting element, with a link or not.
		s.nextID++
		e.id = s.nextID
		entry := afeEntry{id: e.id, onStack: true, hasHref: t.has[atHref]}
		if entry.hasHref {
			entry.link = rawLink{tag: e.a, ref: t.get(atHref), rel: normRel(string(t.val[atRel]))}
		}
		s.afe = append(s.afe, entry)
	}
	if s.template > 0 {
		return // <template> content is inert
	}
	var l rawLink
	switch e.a {
	case atom.A, atom.Area:
		if !t.has[atHref] {
			return
		}
		l = rawLink{tag: e.a, ref: t.get(atHref), rel: normRel(string(t.val[atRel]))}
		if e.a == atom.Area {
			l.anchor = collapseString(string(t.val[atAlt]), maxAnchorBytes)
		}
	case atom.Frame, atom.Iframe:
		if !t.has[atSrc] {
			return
		}
		l = rawLink{tag: e.a, ref: t.get(atSrc), anchor: collapseString(string(t.val[atTitle]), maxAnchorBytes)}
	case atom.Link:
		if !t.has[atHref] {
			return
		}
		l = rawLink{tag: e.a, ref: t.get(atHref), rel: normRel(string(t.val[atRel]))}
	case atom.Body:
		s.bodyIdx = len(s.segs[0].links)
		s.atBody = bodySnapshot{desc: s.desc, hasDesc: s.hasDesc, hasBase: s.hasBase, robotsF: s.robotsF, robotsI: s.robotsI,
			base: s.base, titleState: s.titleState}
		if !t.has[atBackground] {
			return
		}
		s.bodyBg = true
		l = rawLink{tag: e.a, ref: t.get(atBackground)}
	case atom.Applet:
		if !t.has[atCode] {
			return
		}
		l = rawLink{tag: e.a, ref: t.get(atCode), codebase: t.get(atCodebase), hasCB: t.has[atCodebase]}
	case atom.Meta:
		if !t.has[atHTTPEquiv] || !t.has[atContent] || !strings.EqualFold(strings.TrimSpace(string(t.val[atHTTPEquiv])), "refresh") {
			return
		}
		ref, ok := RefreshURL(string(t.val[atContent]))
		if !ok {
			return
		}
		l = rawLink{tag: e.a, ref: ref}
	default:
		return
	}
	seg := s.segs[e.at]
	seg.links = append(seg.links, l)
	if e.a == atom.A {
		s.anchors = append(s.anchors, s.newAnchor(anchorState{
			w: textWriter{max: maxAnchorBytes}, skip: s.skip, fgn: s.fgn, seg: e.at, link: len(seg.links) - 1,
		}))
		e.anchor = len(s.anchors)
	}
}

// pop closes the current element.
func (s *streamer) pop() {
	e := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	s.closed(&e)
}

// remove takes the element at i out of the stack, leaving the ones above
// it open (adoption agency with a block inside: see the file comment).
func (s *streamer) remove(i int) {
	e := s.stack[i]
	s.stack = slices.Delete(s.stack, i, i+1)
	if i < len(s.stack) {
		// Its content ends with the element that was open in it: that
		// one's end separator is its end separator too.
		s.stack[i].sep = max(s.stack[i].sep, e.sep)
		e.sep = sepNone
	}
	s.closed(&e)
}

// pushForm opens a <form> and points the form element pointer at it.
func (s *streamer) pushForm() {
	s.nextID++
	s.push(elem{a: atom.Form, id: s.nextID})
	if s.template == 0 {
		s.formPtr = s.nextID
	}
}

func (s *streamer) closed(e *elem) {
	if e.skip {
		s.skip--
	}
	if e.ns != nsHTML {
		s.fgn--
		return
	}
	if e.jsonLD {
		s.sd.jsonLD(s.ldText)
		s.ldText = s.ldText[:0]
	}
	switch e.a {
	case atom.Template:
		s.template--
	case atom.Title:
		if s.titleState == 1 && len(s.stack) == s.titleDepth {
			s.titleState = 2
		}
	case atom.A:
		if e.anchor > 0 {
			s.finishAnchor(e.anchor - 1)
		}
		for i := range s.afe {
			if s.afe[i].id == e.id && !s.afe[i].marker {
				s.afe[i].onStack = false
			}
		}
	case atom.Table:
		s.tables--
		s.mergeTable(e)
		return
	}
	if e.sep != sepNone {
		s.sepAll(e.at, e.sep)
	}
}

// newAnchor returns st in the state of a closed anchor when there is one
// (its text buffer reused), else in a new one.
func (s *streamer) newAnchor(st anchorState) *anchorState {
	n := len(s.spare)
	if n == 0 {
		return &st
	}
	a := s.spare[n-1]
	s.spare = s.spare[:n-1]
	buf := a.w.b
	*a = st
	a.w.b = buf
	return a
}

func (s *streamer) finishAnchor(i int) {
	a := s.anchors[i]
	anchor := a.w.b.copyString()
	if a.cut > 0 {
		anchor = anchor[:a.cut-1]
	}
	if anchor == "" {
		anchor = a.alt
	}
	s.segs[a.seg].links[a.link].anchor = anchor
	s.anchors = slices.Delete(s.anchors, i, i+1)
	a.w.b.reset()
	*a = anchorState{w: textWriter{b: a.w.b}}
	s.spare = append(s.spare, a)
	for j := range s.stack {
		if s.stack[j].anchor > i+1 {
			s.stack[j].anchor--
		}
	}
}

// impliedBody opens the body element that the page's content implies.
func (s *streamer) impliedBody() {
	s.closeHead()
	s.attr = attrs{}
	s.push(elem{a: atom.Body})
	s.phase = phBody
}

func (s *streamer) closeHead() {
	if s.headOpen {
		for len(s.stack) > 1 && s.top().a != atom.Head {
			s.pop()
		}
		if len(s.stack) > 1 {
			s.pop()
		}
		s.headOpen = false
	}
}
