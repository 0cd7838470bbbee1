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
		atom.Html, atom.Base, atom.Img, atom.Image, atom.Font, atom.AnnotationXml, atom.Input:
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

// mergeTable appends a closed table's segment to the segment the table is
// in, after what was foster parented there.
func (s *streamer) mergeTable(e *elem) {
	child := s.segs[e.seg]
	s.segs = s.segs[:e.seg]
	parent := s.segs[e.at]
	parent.links = append(parent.links, child.links...)
	s.sepAll(-1, sepLine)
	if s.skip != 0 || s.fgn != 0 {
		return
	}
	pw := &parent.w
	pw.sep(sepLine)
	pw.sep(child.w.lead)
	text := child.w.b.String()
	for len(text) > 0 && !pw.truncated {
		i := strings.IndexAny(text, " \n")
		if i < 0 {
			pw.word(text)
			break
		}
		if i > 0 {
			pw.word(text[:i])
		}
		if text[i] == '\n' {
			pw.sep(sepLine)
		} else {
			pw.sep(sepSpace)
		}
		text = text[i+1:]
	}
	pw.sep(child.w.pending)
	pw.sep(sepLine)
	if child.w.truncated {
		pw.truncated = true
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

// startTag handles a start tag token.
func (s *streamer) startTag(a atom.Atom, name []byte) {
	if needsAttrs(a) {
		s.readAttrs()
	} else {
		s.attr = attrs{}
	}
	top := s.top()
	if top.ns != nsHTML && !htmlStartInForeign(top, a) {
		if breakout(a) || a == atom.Font && s.attr.has[atColor] {
			for len(s.stack) > 1 && s.top().ns != nsHTML && !htmlIntegrationPoint(s.top()) && !textIntegrationPoint(s.top()) {
				s.pop()
			}
		} else {
			if a == atom.Base && s.attr.has[atHref] && !s.hasBase {
				// cascadia's base[href] matches foreign elements too.
				s.base, s.hasBase = s.attr.get(atHref), true
			}
			s.foreign(a, name, top.ns)
			return
		}
	}
	switch s.phase {
	case phFrameset:
		s.framesetStart(a)
		return
	case phBeforeBody:
		if s.template > 0 {
			break
		}
		switch a {
		case atom.Html:
			s.mergeHTML()
			return
		case atom.Head:
			if !s.headOpen && len(s.stack) == 1 {
				s.push(elem{a: atom.Head})
				s.headOpen = true
			}
			return
		case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta, atom.Noframes, atom.Script,
			atom.Style, atom.Template, atom.Title, atom.Noscript:
			s.inHead(a)
			return
		case atom.Body:
			s.closeHead()
			s.push(elem{a: atom.Body})
			s.phase = phBody
			s.framesetOK = false
			return
		case atom.Frameset:
			s.closeHead()
			s.push(elem{a: atom.Frameset})
			s.phase = phFrameset
			return
		}
		a2 := s.attr
		s.impliedBody()
		s.attr = a2
	}
	if s.tables > 0 {
		switch s.tableMode() {
		case atom.Table, atom.Tbody, atom.Tr:
			s.tableStart(a, name)
			return
		case atom.Td, atom.Caption:
			switch a {
			case atom.Caption, atom.Col, atom.Colgroup, atom.Tbody, atom.Td, atom.Tfoot, atom.Th, atom.Thead, atom.Tr:
				if s.closeCell() {
					s.startTag(a, name)
				}
				return
			}
		}
	}
	switch a {
	case atom.Body, atom.Pre, atom.Listing, atom.Li, atom.Dd, atom.Dt, atom.Button, atom.Applet, atom.Marquee,
		atom.Object, atom.Table, atom.Area, atom.Br, atom.Embed, atom.Img, atom.Keygen, atom.Wbr, atom.Image,
		atom.Hr, atom.Textarea, atom.Xmp, atom.Iframe, atom.Select:
		s.framesetOK = false
	case atom.Input:
		if !s.attr.has[atType] || !strings.EqualFold(string(s.attr.val[atType]), "hidden") {
			s.framesetOK = false
		}
	}
	s.bodyStart(a, name)
}

// foreign opens an element in foreign content.
func (s *streamer) foreign(a atom.Atom, name []byte, n ns) {
	s.z.NextIsNotRawText()
	e := elem{a: a, ns: n}
	if a == 0 {
		e.name = string(name)
	}
	if a == atom.AnnotationXml {
		enc := string(s.attr.val[atEncoding])
		if s.attr.has[atEncoding] && (strings.EqualFold(enc, "text/html") || strings.EqualFold(enc, "application/xhtml+xml")) {
			e.htmlIP = true
		}
	}
	s.push(e)
	if s.selfClosing {
		s.pop()
	}
}

// inHead handles the elements processed by the "in head" rules.
func (s *streamer) inHead(a atom.Atom) {
	switch a {
	case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta:
		s.void(elem{a: a})
	case atom.Template:
		s.push(elem{a: a})
		s.afe = append(s.afe, afeEntry{marker: true})
		s.framesetOK = false
	default: // raw text elements
		s.push(elem{a: a})
	}
}

func (s *streamer) mergeHTML() {
	if s.template > 0 {
		return
	}
	t := &s.attr
	if t.has[atLang] && !s.hasLang {
		s.lang, s.hasLang = t.get(atLang), true
	}
	if t.has[atXMLLang] && !s.hasXMLLang {
		s.xmlLang, s.hasXMLLang = t.get(atXMLLang), true
	}
}

func (s *streamer) framesetStart(a atom.Atom) {
	framesets := 0
	for _, e := range s.stack {
		if e.a == atom.Frameset {
			framesets++
		}
	}
	switch a {
	case atom.Html:
		s.mergeHTML()
	case atom.Frameset:
		if framesets > 0 {
			s.push(elem{a: a})
		}
	case atom.Frame:
		if framesets > 0 {
			s.void(elem{a: a})
		}
	case atom.Noframes:
		s.push(elem{a: a})
	}
}

// bodyStart handles a start tag with the "in body" rules.
func (s *streamer) bodyStart(a atom.Atom, name []byte) {
	e := elem{a: a}
	if a == 0 {
		e.name = string(name)
	}
	switch a {
	case atom.Html:
		s.mergeHTML()
	case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta, atom.Noframes, atom.Script, atom.Style, atom.Template, atom.Title:
		s.inHead(a)
	case atom.Body:
		if s.template == 0 && len(s.stack) >= 2 && s.stack[1].a == atom.Body && !s.bodyBg && s.attr.has[atBackground] {
			s.bodyBg = true
			l := rawLink{tag: atom.Body, ref: s.attr.get(atBackground)}
			s.segs[0].links = slices.Insert(s.segs[0].links, s.bodyIdx, l)
			s.shiftAnchors(s.bodyIdx)
		}
	case atom.Frameset:
		if !s.framesetOK || len(s.stack) < 2 || s.stack[1].a != atom.Body {
			return
		}
		// The frameset replaces the body and what was in it.
		s.popTo(1)
		s.segs[0].links = s.segs[0].links[:s.bodyIdx]
		b := s.atBody
		s.desc, s.hasDesc, s.hasBase, s.robotsF, s.robotsI, s.base = b.desc, b.hasDesc, b.hasBase, b.robotsF, b.robotsI, b.base
		if b.titleState == 0 {
			s.titleState, s.title = 0, textWriter{max: maxTitleBytes}
		}
		s.afe = s.afe[:0]
		s.push(elem{a: atom.Frameset})
		s.phase = phFrameset
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Center, atom.Details, atom.Dialog, atom.Dir,
		atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header, atom.Hgroup,
		atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.P, atom.Search, atom.Section, atom.Summary, atom.Ul,
		atom.Pre, atom.Listing, atom.Plaintext:
		s.popUntil(scopeButton, atom.P)
		s.push(e)
	case atom.Form:
		if s.formPtr != 0 && s.template == 0 {
			return
		}
		s.popUntil(scopeButton, atom.P)
		s.pushForm()
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		s.popUntil(scopeButton, atom.P)
		if isHeading(s.top()) {
			s.pop()
		}
		s.push(e)
	case atom.Li, atom.Dd, atom.Dt:
		for i := len(s.stack) - 1; i >= 0; i-- {
			n := &s.stack[i]
			if n.ns == nsHTML && (n.a == a || a != atom.Li && (n.a == atom.Dd || n.a == atom.Dt)) {
				s.popTo(i)
				break
			}
			if n.ns == nsHTML && (n.a == atom.Address || n.a == atom.Div || n.a == atom.P) {
				continue
			}
			if special(n) {
				break
			}
		}
		s.popUntil(scopeButton, atom.P)
		s.push(e)
	case atom.Button:
		if s.inScope(scopeDefault, atom.Button) >= 0 {
			s.impliedEndTags(0)
			s.popUntil(scopeDefault, atom.Button)
		}
		s.reconstruct()
		s.push(e)
	case atom.A:
		if i := s.lastAFE(); i >= 0 {
			id := s.afe[i].id
			s.formattingEnd(atom.A, nil)
			if i := slices.IndexFunc(s.afe, func(e afeEntry) bool { return !e.marker && e.id == id }); i >= 0 {
				s.afe = slices.Delete(s.afe, i, i+1)
			}
			if j := s.stackIndex(id); j >= 0 {
				s.remove(j)
			}
		}
		s.reconstruct()
		s.push(e)
	case atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.S, atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U:
		s.reconstruct()
		s.push(e)
	case atom.Nobr:
		s.reconstruct()
		if s.inScope(scopeDefault, atom.Nobr) >= 0 {
			s.formattingEnd(atom.Nobr, nil)
			s.reconstruct()
		}
		s.push(e)
	case atom.Applet, atom.Marquee, atom.Object:
		s.reconstruct()
		s.push(e)
		s.afe = append(s.afe, afeEntry{marker: true})
	case atom.Table:
		if !s.quirks {
			s.popUntil(scopeButton, atom.P)
		}
		s.push(e)
	case atom.Area, atom.Br, atom.Embed, atom.Img, atom.Keygen, atom.Wbr, atom.Image:
		if a == atom.Image {
			e.a = atom.Img
		}
		s.reconstruct()
		s.void(e)
	case atom.Input:
		s.popUntil(scopeDefault, atom.Select)
		s.reconstruct()
		s.void(e)
	case atom.Param, atom.Source, atom.Track:
		s.void(e)
	case atom.Hr:
		if s.inScope(scopeButton, atom.P) >= 0 {
			s.impliedEndTags(atom.P)
			s.popUntil(scopeDefault, atom.P)
		}
		if s.inScope(scopeDefault, atom.Select) >= 0 {
			s.impliedEndTags(0)
		}
		s.void(e)
	case atom.Textarea, atom.Iframe, atom.Noembed, atom.Noscript:
		s.push(e)
	case atom.Xmp:
		s.popUntil(scopeButton, atom.P)
		s.reconstruct()
		s.push(e)
	case atom.Select:
		if s.inScope(scopeDefault, atom.Select) >= 0 {
			s.popUntil(scopeDefault, atom.Select)
			return
		}
		s.popUntil(scopeButton, atom.P)
		s.reconstruct()
		s.push(e)
	case atom.Option, atom.Optgroup:
		if s.inScope(scopeDefault, atom.Select) >= 0 {
			s.impliedEndTags(atom.Optgroup)
		} else if s.top().a == atom.Option {
			s.pop()
		}
		s.reconstruct()
		s.push(e)
	case atom.Rb, atom.Rtc:
		if s.inScope(scopeDefault, atom.Ruby) >= 0 {
			s.impliedEndTags(0)
		}
		s.push(e)
	case atom.Rp, atom.Rt:
		if s.inScope(scopeDefault, atom.Ruby) >= 0 {
			s.impliedEndTags(atom.Rtc)
		}
		s.push(e)
	case atom.Math, atom.Svg:
		s.reconstruct()
		n := nsSVG
		if a == atom.Math {
			n = nsMath
		}
		s.foreign(a, name, n)
	case atom.Caption, atom.Col, atom.Colgroup, atom.Frame, atom.Head, atom.Tbody, atom.Td, atom.Tfoot, atom.Th, atom.Thead, atom.Tr:
		// Ignored outside tables and framesets.
	default:
		s.reconstruct()
		s.push(e)
	}
}

// tableMode is the innermost table part open: Td (a cell), Caption, Tr,
// Tbody (or thead, tfoot), Table; 0 when content is not in a table.
func (s *streamer) tableMode() atom.Atom {
	for i := len(s.stack) - 1; i >= 0; i-- {
		e := &s.stack[i]
		if e.ns != nsHTML {
			continue
		}
		switch e.a {
		case atom.Td, atom.Th:
			return atom.Td
		case atom.Caption:
			return atom.Caption
		case atom.Tr:
			return atom.Tr
		case atom.Tbody, atom.Thead, atom.Tfoot:
			return atom.Tbody
		case atom.Table:
			return atom.Table
		case atom.Template, atom.Html:
			return 0
		}
	}
	return 0
}

// tableStart handles a start tag in a table, table body or row.
func (s *streamer) tableStart(a atom.Atom, name []byte) {
	switch a {
	case atom.Caption, atom.Colgroup, atom.Col, atom.Tbody, atom.Thead, atom.Tfoot:
		s.clearTo(atom.Table)
		switch a {
		case atom.Caption:
			s.push(elem{a: a})
			s.afe = append(s.afe, afeEntry{marker: true})
		case atom.Tbody, atom.Thead, atom.Tfoot:
			s.push(elem{a: a})
		}
	case atom.Tr:
		if s.tableMode() == atom.Table {
			s.clearTo(atom.Table)
			s.push(elem{a: atom.Tbody})
		} else {
			s.clearTo(atom.Tbody)
		}
		s.push(elem{a: a})
	case atom.Td, atom.Th:
		switch s.tableMode() {
		case atom.Table:
			s.clearTo(atom.Table)
			s.push(elem{a: atom.Tbody})
			s.push(elem{a: atom.Tr})
		case atom.Tbody:
			s.clearTo(atom.Tbody)
			s.push(elem{a: atom.Tr})
		default:
			s.clearTo(atom.Tr)
		}
		s.push(elem{a: a})
		s.afe = append(s.afe, afeEntry{marker: true})
	case atom.Table:
		if i := s.inScope(scopeTable, atom.Table); i >= 0 {
			s.popTo(i)
			s.startTag(a, name)
		}
	case atom.Style, atom.Script, atom.Template:
		s.inHead(a)
	case atom.Input:
		if strings.EqualFold(string(s.attr.val[atType]), "hidden") && s.attr.has[atType] {
			s.void(elem{a: a})
			return
		}
		s.foster = true
		s.bodyStart(a, name)
		s.foster = false
	case atom.Form:
		if s.formPtr == 0 && s.template == 0 {
			s.pushForm()
			s.pop()
		}
	default:
		s.foster = true
		s.bodyStart(a, name)
		s.foster = false
	}
}

// clearTo pops up to the innermost table (a == Table), table body
// (Tbody) or row (Tr).
func (s *streamer) clearTo(a atom.Atom) {
	for len(s.stack) > 1 {
		t := s.top()
		if t.ns == nsHTML {
			switch t.a {
			case atom.Html, atom.Template:
				return
			case atom.Table:
				if a == atom.Table {
					return
				}
			case atom.Tbody, atom.Thead, atom.Tfoot:
				if a == atom.Tbody {
					return
				}
			case atom.Tr:
				if a == atom.Tr {
					return
				}
			}
		}
		s.pop()
	}
}

// closeCell closes the open cell or caption; false if there is none in
// table scope.
func (s *streamer) closeCell() bool {
	i := s.inScope(scopeTable, atom.Td, atom.Th, atom.Caption)
	if i < 0 {
		return false
	}
	s.impliedEndTags(0)
	s.popTo(i)
	s.clearAFE()
	return true
}

// endTag handles an end tag token.
func (s *streamer) endTag(a atom.Atom, name []byte) {
	if top := s.top(); top.ns != nsHTML {
		for i := len(s.stack) - 1; i > 0; i-- {
			e := &s.stack[i]
			if e.ns == nsHTML {
				break
			}
			if e.a == a && (a != 0 || strings.EqualFold(e.name, string(name))) {
				s.popTo(i)
				return
			}
			if s.stack[i-1].ns == nsHTML {
				break
			}
		}
	}
	switch s.phase {
	case phFrameset:
		switch a {
		case atom.Frameset:
			if len(s.stack) > 1 && s.top().a == atom.Frameset {
				s.pop()
			}
		case atom.Noframes:
			if s.top().a == atom.Noframes {
				s.pop()
			}
		}
		return
	case phBeforeBody:
		if s.template > 0 {
			break
		}
		switch a {
		case atom.Head:
			s.closeHead()
			return
		case atom.Template:
			return
		case atom.Body, atom.Html, atom.Br:
			s.impliedBody()
		default:
			if t := s.top(); t.ns == nsHTML && rawText(t.a) && t.a == a {
				s.pop()
			}
			return
		}
	}
	if s.tables > 0 {
		switch mode := s.tableMode(); mode {
		case atom.Table, atom.Tbody, atom.Tr:
			switch a {
			case atom.Table:
				if i := s.inScope(scopeTable, atom.Table); i >= 0 {
					s.popTo(i)
				}
				return
			case atom.Tr:
				if i := s.inScope(scopeTable, atom.Tr); i >= 0 {
					s.popTo(i)
				}
				return
			case atom.Tbody, atom.Thead, atom.Tfoot:
				if i := s.inScope(scopeTable, a); i >= 0 {
					s.popTo(i)
				}
				return
			case atom.Body, atom.Caption, atom.Col, atom.Colgroup, atom.Html, atom.Td, atom.Th:
				return
			}
		case atom.Td, atom.Caption:
			switch a {
			case atom.Td, atom.Th, atom.Caption:
				if (a == atom.Caption) != (mode == atom.Caption) {
					return
				}
				if i := s.inScope(scopeTable, a); i >= 0 {
					s.impliedEndTags(0)
					s.popTo(i)
					s.clearAFE()
				}
				return
			case atom.Table, atom.Tbody, atom.Tfoot, atom.Thead, atom.Tr:
				if s.inScope(scopeTable, a) >= 0 && s.closeCell() {
					s.endTag(a, name)
				}
				return
			case atom.Body, atom.Col, atom.Colgroup, atom.Html:
				return
			}
		}
	}
	s.bodyEnd(a, name)
}

// bodyEnd handles an end tag with the "in body" rules.
func (s *streamer) bodyEnd(a atom.Atom, name []byte) {
	switch a {
	case atom.Body, atom.Html:
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Button, atom.Center, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Header, atom.Hgroup,
		atom.Listing, atom.Main, atom.Menu, atom.Nav, atom.Ol, atom.Pre, atom.Search, atom.Section, atom.Select,
		atom.Summary, atom.Ul:
		if s.inScope(scopeDefault, a) < 0 {
			return
		}
		s.impliedEndTags(0)
		s.popUntil(scopeDefault, a)
	case atom.Form:
		if s.template > 0 {
			if s.inScope(scopeDefault, a) >= 0 {
				s.impliedEndTags(0)
				s.popUntil(scopeDefault, a)
			}
			return
		}
		node := s.formPtr
		s.formPtr = 0
		i := s.inScope(scopeDefault, atom.Form)
		if node == 0 || i < 0 || s.stack[i].id != node {
			return
		}
		s.impliedEndTags(0)
		// The form is removed, the elements left open in it stay open.
		s.remove(s.inScope(scopeDefault, atom.Form))
	case atom.P:
		if s.inScope(scopeButton, atom.P) < 0 {
			s.attr = attrs{}
			s.bodyStart(atom.P, nil)
		}
		s.popUntil(scopeButton, atom.P)
	case atom.Li:
		s.popUntil(scopeListItem, atom.Li)
	case atom.Dd, atom.Dt:
		s.popUntil(scopeDefault, a)
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		s.popUntil(scopeDefault, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6)
	case atom.A, atom.B, atom.Big, atom.Code, atom.Em, atom.Font, atom.I, atom.Nobr, atom.S, atom.Small, atom.Strike, atom.Strong, atom.Tt, atom.U:
		s.formattingEnd(a, name)
	case atom.Applet, atom.Marquee, atom.Object:
		if s.popUntil(scopeDefault, a) {
			s.clearAFE()
		}
	case atom.Br:
		s.attr = attrs{}
		s.selfClosing = false
		s.bodyStart(atom.Br, nil)
	case atom.Template:
		for i := len(s.stack) - 1; i > 0; i-- {
			if e := &s.stack[i]; e.a == atom.Template && e.ns == nsHTML {
				s.impliedEndTags(0)
				s.popTo(i)
				s.clearAFE()
				return
			}
		}
	default:
		s.endOther(a, name)
	}
}

// endOther is the "any other end tag" rule.
func (s *streamer) endOther(a atom.Atom, name []byte) {
	for i := len(s.stack) - 1; i >= 0; i-- {
		e := &s.stack[i]
		if e.ns == nsHTML && e.a == a && (a != 0 || e.name == string(name)) {
			s.popTo(i)
			return
		}
		if special(e) {
			return
		}
	}
}

// formattingEnd is the adoption agency algorithm, simplified: an <a> (the
// only formatting element tracked) or another formatting element is
// closed, and the elements above it with it, except blocks (see the file
// comment).
func (s *streamer) formattingEnd(a atom.Atom, name []byte) {
	if t := s.top(); t.ns == nsHTML && t.a == a && a != atom.A {
		s.pop()
		return
	}
	var fe int // index in the stack
	if a == atom.A {
		i := s.lastAFE()
		if i < 0 {
			s.endOther(a, name)
			return
		}
		fe = s.stackIndex(s.afe[i].id)
		if fe < 0 {
			s.afe = slices.Delete(s.afe, i, i+1)
			return
		}
		if s.inScope(scopeDefault, atom.A) < 0 {
			return
		}
		s.afe = slices.Delete(s.afe, i, i+1)
	} else {
		fe = -1
		for i := len(s.stack) - 1; i > 0; i-- {
			e := &s.stack[i]
			if e.ns == nsHTML && e.a == a {
				fe = i
				break
			}
			if e.ns == nsHTML && scopeMarker(e.a) {
				break
			}
		}
		if fe < 0 {
			s.endOther(a, name)
			return
		}
		if s.inScope(scopeDefault, a) < 0 {
			return
		}
	}
	// With blocks above it, the algorithm moves what is above the last
	// block into clones of the formatting element and closes them; the
	// blocks stay open. An <a> keeps what came before the first block,
	// and each clone (one per block, at most 8) is the same link again.
	if a == atom.A {
		s.adoptAnchor(fe)
	}
	for i := len(s.stack) - 1; i > fe; i-- {
		if special(&s.stack[i]) {
			if i+1 < len(s.stack) {
				s.popTo(i + 1)
			}
			s.remove(fe)
			return
		}
	}
	s.popTo(fe)
}

// adoptAnchor applies to the <a> at fe what the adoption agency does to it
// when blocks were opened inside it.
func (s *streamer) adoptAnchor(fe int) {
	first, blocks := -1, 0
	for i := fe + 1; i < len(s.stack); i++ {
		if special(&s.stack[i]) {
			if first < 0 {
				first = i
			}
			blocks++
		}
	}
	e := &s.stack[fe]
	if blocks == 0 || e.anchor == 0 {
		return
	}
	as := s.anchors[e.anchor-1]
	if fb := &s.stack[first]; fb.mark > 0 {
		as.cut = fb.mark
		if !fb.markAlt {
			as.alt, as.altDone = "", true
		}
	}
	l := s.segs[as.seg].links[as.link]
	seg := s.segs[s.stack[first].at]
	for range min(blocks, 8) {
		seg.links = append(seg.links, l)
	}
}

// reconstruct reopens an <a> that a block closed before it ended: the
// DOM clones it (the clone is the same link again).
func (s *streamer) reconstruct() {
	n := len(s.afe)
	if n == 0 || s.afe[n-1].marker || s.afe[n-1].onStack {
		return
	}
	entry := s.afe[n-1]
	s.afe = s.afe[:n-1]
	saved := s.attr
	s.attr = attrs{}
	if entry.hasHref {
		s.attr.has[atHref], s.attr.val[atHref] = true, []byte(entry.link.ref)
		s.attr.has[atRel], s.attr.val[atRel] = true, []byte(entry.link.rel)
	}
	s.push(elem{a: atom.A})
	s.attr = saved
}

func (s *streamer) clearAFE() {
	for len(s.afe) > 0 {
		e := s.afe[len(s.afe)-1]
		s.afe = s.afe[:len(s.afe)-1]
		if e.marker {
			return
		}
	}
}

// lastAFE is the index of the <a> in the active formatting list after the
// last marker, or -1.
func (s *streamer) lastAFE() int {
	if n := len(s.afe); n > 0 && !s.afe[n-1].marker {
		return n - 1
	}
	return -1
}

func (s *streamer) stackIndex(id int) int {
	for i := len(s.stack) - 1; i > 0; i-- {
		if s.stack[i].id == id && s.stack[i].a == atom.A {
			return i
		}
	}
	return -1
}

func (s *streamer) shiftAnchors(from int) {
	for _, a := range s.anchors {
		if a.seg == 0 && a.link >= from {
			a.link++
		}
	}
}

// popTo pops the elements from the top down to the one at i, included.
func (s *streamer) popTo(i int) {
	for len(s.stack) > max(i, 1) {
		s.pop()
	}
}

type scope uint8

const (
	scopeDefault scope = iota
	scopeListItem
	scopeButton
	scopeTable
)

// inScope is the index of the innermost element named by one of as in the
// scope, or -1.
func (s *streamer) inScope(sc scope, as ...atom.Atom) int {
	for i := len(s.stack) - 1; i >= 0; i-- {
		e := &s.stack[i]
		if e.ns == nsHTML {
			if slices.Contains(as, e.a) {
				return i
			}
			switch sc {
			case scopeListItem:
				if e.a == atom.Ol || e.a == atom.Ul {
					return -1
				}
			case scopeButton:
				if e.a == atom.Button {
					return -1
				}
			case scopeTable:
				if e.a == atom.Html || e.a == atom.Table || e.a == atom.Template {
					return -1
				}
				continue
			}
			if scopeMarker(e.a) || e.a == atom.Select {
				return -1
			}
		} else if sc != scopeTable && foreignScopeStop(e) {
			return -1
		}
	}
	return -1
}

// popUntil pops up to the innermost element named by one of as if it is
// in scope; it reports whether it was.
func (s *streamer) popUntil(sc scope, as ...atom.Atom) bool {
	i := s.inScope(sc, as...)
	if i < 0 {
		return false
	}
	s.popTo(i)
	return true
}

// impliedEndTags pops the elements whose end tag is implied, except.
func (s *streamer) impliedEndTags(except atom.Atom) {
	for len(s.stack) > 1 {
		t := s.top()
		if t.ns != nsHTML || t.a == except {
			return
		}
		switch t.a {
		case atom.Dd, atom.Dt, atom.Li, atom.Optgroup, atom.Option, atom.P, atom.Rb, atom.Rp, atom.Rt, atom.Rtc:
			s.pop()
		default:
			return
		}
	}
}

func scopeMarker(a atom.Atom) bool {
	switch a {
	case atom.Applet, atom.Caption, atom.Html, atom.Table, atom.Td, atom.Th, atom.Marquee, atom.Object, atom.Template:
		return true
	}
	return false
}

func foreignScopeStop(e *elem) bool {
	switch e.ns {
	case nsMath:
		return textIntegrationPoint(e) || e.a == atom.AnnotationXml
	case nsSVG:
		return e.a == atom.Desc || e.a == atom.ForeignObject || e.a == atom.Foreignobject || e.a == atom.Title
	}
	return false
}

func isHeading(e *elem) bool {
	switch e.a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return e.ns == nsHTML
	}
	return false
}

func tableish(a atom.Atom) bool {
	switch a {
	case atom.Table, atom.Tbody, atom.Tfoot, atom.Thead, atom.Tr:
		return true
	}
	return false
}

// rawText are the elements whose content the tokenizer reads as text.
func rawText(a atom.Atom) bool {
	switch a {
	case atom.Iframe, atom.Noembed, atom.Noframes, atom.Noscript, atom.Plaintext, atom.Script, atom.Style,
		atom.Textarea, atom.Title, atom.Xmp:
		return true
	}
	return false
}

func textIntegrationPoint(e *elem) bool {
	if e.ns != nsMath {
		return false
	}
	switch e.a {
	case atom.Mi, atom.Mo, atom.Mn, atom.Ms, atom.Mtext:
		return true
	}
	return false
}

func htmlIntegrationPoint(e *elem) bool {
	switch e.ns {
	case nsMath:
		return e.a == atom.AnnotationXml && e.htmlIP
	case nsSVG:
		return e.a == atom.Desc || e.a == atom.ForeignObject || e.a == atom.Foreignobject || e.a == atom.Title
	}
	return false
}

// htmlStartInForeign reports whether a start tag in foreign content is
// processed by the HTML rules (integration points).
func htmlStartInForeign(top *elem, a atom.Atom) bool {
	if textIntegrationPoint(top) && a != atom.Mglyph && a != atom.Malignmark {
		return true
	}
	if top.ns == nsMath && top.a == atom.AnnotationXml && a == atom.Svg {
		return true
	}
	return htmlIntegrationPoint(top)
}

func breakout(a atom.Atom) bool {
	switch a {
	case atom.B, atom.Big, atom.Blockquote, atom.Body, atom.Br, atom.Center, atom.Code, atom.Dd, atom.Div, atom.Dl,
		atom.Dt, atom.Em, atom.Embed, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6, atom.Head, atom.Hr,
		atom.I, atom.Img, atom.Li, atom.Listing, atom.Menu, atom.Meta, atom.Nobr, atom.Ol, atom.P, atom.Pre,
		atom.Ruby, atom.S, atom.Small, atom.Span, atom.Strong, atom.Strike, atom.Sub, atom.Sup, atom.Table,
		atom.Tt, atom.U, atom.Ul, atom.Var:
		return true
	}
	return false
}

// special are the elements of the "special" category.
func special(e *elem) bool {
	if e.ns != nsHTML {
		return foreignScopeStop(e)
	}
	switch e.a {
	case atom.Address, atom.Applet, atom.Area, atom.Article, atom.Aside, atom.Base, atom.Basefont, atom.Bgsound,
		atom.Blockquote, atom.Body, atom.Br, atom.Button, atom.Caption, atom.Center, atom.Col, atom.Colgroup,
		atom.Dd, atom.Details, atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Embed, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.Frame, atom.Frameset, atom.H1, atom.H2, atom.H3, atom.H4,
		atom.H5, atom.H6, atom.Head, atom.Header, atom.Hgroup, atom.Hr, atom.Html, atom.Iframe, atom.Img,
		atom.Input, atom.Keygen, atom.Li, atom.Link, atom.Listing, atom.Main, atom.Marquee, atom.Menu, atom.Meta,
		atom.Nav, atom.Noembed, atom.Noframes, atom.Noscript, atom.Object, atom.Ol, atom.P, atom.Param,
		atom.Plaintext, atom.Pre, atom.Script, atom.Search, atom.Section, atom.Select, atom.Source, atom.Style,
		atom.Summary, atom.Table, atom.Tbody, atom.Td, atom.Template, atom.Textarea, atom.Tfoot, atom.Th,
		atom.Thead, atom.Title, atom.Tr, atom.Track, atom.Ul, atom.Wbr, atom.Xmp:
		return true
	}
	return false
}

// doctypeQuirks reports whether a doctype puts the document in quirks
// mode. "<!DOCTYPE html>" does not; the other doctypes (legacy public
// identifiers, a long list) are left to the tree builder itself, on a
// probe document.
func doctypeQuirks(doctype []byte) bool {
	if string(doctype) == "html" {
		return false
	}
	probe := "<!DOCTYPE " + string(doctype) + "><p><table>"
	doc, err := html.Parse(strings.NewReader(probe))
	if err != nil {
		return true
	}
	var quirks bool
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.DataAtom == atom.Table {
			quirks = n.Parent != nil && n.Parent.DataAtom == atom.P
			break
		}
	}
	return quirks
}

func isWhitespace(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\f', '\r':
		default:
			return false
		}
	}
	return true
}
