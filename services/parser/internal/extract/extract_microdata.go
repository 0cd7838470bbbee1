package extract

import (
	"bytes"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawl-crawler/trawl/services/parser/internal/htmltok"
)

// HTML microdata (https://html.spec.whatwg.org/multipage/microdata.html):
// the page's top-level items, each kept as one compact JSON object
//
//	{"@type": itemtype (an array if several), "@id": itemid,
//	 "<name>": value, or [values…] when the name has several}
//
// with nested items as nested objects. It shares the structured data cap
// (MaxStructuredBytes) with JSON-LD and OpenGraph.
//
// Both paths collect microdata with the same second pass of the tokenizer
// over the body (microdataPass), run only when the body contains
// "itemscope" (also spelled "itemScope", "ItemScope" or "ITEMSCOPE"; other
// mixes of case are missed): a page without microdata costs three
// substring searches, about 1 µs for 20 KiB. The DOM path does not walk
// its tree for it, so that both paths agree by construction.
//
// The pass keeps its own stack of open elements, simpler than the tree
// builder's: void elements, an end tag closing the nearest open element of
// its name (stray ones ignored, </body> and </html> too), and the implied
// ends that matter for values (<p>, <li>, <dd>/<dt>, table cells and rows,
// <option>). A misnested formatting element (<b><div></b>) closes the
// elements above it, where the adoption agency would move them.
//
// Simplifications of the spec:
//   - itemref is not followed: an item's properties are the itemprop
//     elements inside it.
//   - Values: the content attribute if present; the src of audio, embed,
//     iframe, img, source, track and video, the href of a, area and link,
//     the data of object, resolved against the page URL (or the first
//     <base href> seen before them) but not canonicalized; the value of
//     data and meter; the datetime of time; otherwise the element's text
//     (its descendants' text without <script> and <style>) with white
//     space collapsed, at most 2048 bytes. itemid is resolved too;
//     itemtype is kept as written.
//   - Property names starting with "@" are ignored (they would collide
//     with @type and @id); an itemscope that is the value of an itemprop
//     outside any item is dropped, as the spec's JSON serialization does.
//   - Items in a <template> are ignored (inert content).
//
// Bounds: items nested at most maxMicrodataDepth deep, at most
// maxMicrodataProps values per item; deeper items and further values are
// dropped and counted in Result.StructuredDropped, as are whole items past
// the cap.

// Caps of microdata.
const (
	maxMicrodataDepth = 16  // levels of items inside a top-level item
	maxMicrodataProps = 256 // property values of one item
	maxMicrodataTypes = 8   // itemtype URLs of one item
	maxMicrodataOpen  = 64  // text-valued properties open at once
	maxMicrodataRaw   = 4 * maxPropValueBytes
)

// hasItemscope reports whether body may hold microdata: whether it
// contains "itemscope" in lower case, camel case or upper case. It looks
// for the tail "mscope" (also "mScope", "MSCOPE"): 'm' is rare enough in
// text that the search runs at memory speed, where "itemscope" (an 'i'
// every few bytes of English) is ten times slower.
func hasItemscope(body []byte) bool {
	return bytes.Contains(body, []byte("mscope")) || bytes.Contains(body, []byte("mScope")) ||
		bytes.Contains(body, []byte("MSCOPE"))
}

// mdItem is one microdata item being collected.
type mdItem struct {
	types []string
	id    string
	props []*mdProp
	depth int  // 0 for a top-level item
	dead  bool // not kept (too deep, or unreachable): its properties go nowhere
}

// mdProp is one property value: a string or an item.
type mdProp struct {
	names []string
	value string
	item  *mdItem
}

// mdCollect collects the text of an open text-valued property.
type mdCollect struct {
	prop *mdProp
	buf  []byte
}

// mdElem is an open element of the pass.
type mdElem struct {
	a    atom.Atom
	name string // tag name when a is 0
	item *mdItem
	top  int // index in microdataPass.top + 1 of the top-level item it opens, or 0
	coll *mdCollect
}

type microdataPass struct {
	z        *htmltok.Tokenizer
	used     int // bytes of the structured data cap used (structuredSink.bytes)
	dropped  int
	kept     int // items kept
	page     string
	base     *url.URL // parsed on first use
	baseSeen bool     // a <base href> was seen: base is final
	stack    []mdElem
	items    []*mdItem // open items, innermost last
	colls    []*mdCollect
	template int
	foreign  int
	top      []string // rendered top-level items, in document order ("" when dropped)
	b        strings.Builder
}

// microdata adds the microdata items of body, a page fetched from page.
func (s *structuredSink) microdata(page string, body []byte) {
	if !hasItemscope(body) {
		return
	}
	// The pass has its own copy of the budget: a pointer to s would move
	// the streamer that holds it to the heap on every page.
	p := microdataPass{z: htmltok.New(body), used: s.bytes, page: page}
	p.run()
	s.bytes, s.dropped = p.used, s.dropped+p.dropped
	for _, it := range p.top {
		if it != "" {
			s.micro = append(s.micro, it)
		}
	}
}

func (p *microdataPass) run() {
	for {
		switch p.z.Next() {
		case html.ErrorToken:
			for len(p.stack) > 0 {
				p.pop()
			}
			return
		case html.TextToken:
			if len(p.colls) == 0 {
				continue
			}
			if n := len(p.stack); n > 0 && (p.stack[n-1].a == atom.Script || p.stack[n-1].a == atom.Style) {
				continue
			}
			t := p.z.Text()
			for _, c := range p.colls {
				if room := maxMicrodataRaw - len(c.buf); room > 0 {
					c.buf = append(c.buf, t[:min(room, len(t))]...)
				}
			}
		case html.StartTagToken:
			p.start(false)
		case html.SelfClosingTagToken:
			p.start(true)
		case html.EndTagToken:
			p.end()
		}
	}
}

// mdVoid are the elements that have no end tag.
var mdVoid = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true, atom.Embed: true, atom.Hr: true,
	atom.Img: true, atom.Input: true, atom.Keygen: true, atom.Link: true, atom.Meta: true,
	atom.Param: true, atom.Source: true, atom.Track: true, atom.Wbr: true, atom.Image: true,
}

// mdScope are the elements an implied end does not cross.
var mdScope = map[atom.Atom]bool{
	atom.Html: true, atom.Table: true, atom.Td: true, atom.Th: true, atom.Caption: true,
	atom.Template: true, atom.Applet: true, atom.Object: true, atom.Marquee: true,
	atom.Button: true, atom.Svg: true, atom.Math: true,
}

// mdClosesP are the start tags that close an open <p>.
var mdClosesP = map[atom.Atom]bool{
	atom.Address: true, atom.Article: true, atom.Aside: true, atom.Blockquote: true, atom.Center: true,
	atom.Details: true, atom.Dialog: true, atom.Dir: true, atom.Div: true, atom.Dl: true,
	atom.Fieldset: true, atom.Figcaption: true, atom.Figure: true, atom.Footer: true, atom.Form: true,
	atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true, atom.H6: true,
	atom.Header: true, atom.Hgroup: true, atom.Hr: true, atom.Main: true, atom.Menu: true,
	atom.Nav: true, atom.Ol: true, atom.P: true, atom.Pre: true, atom.Section: true,
	atom.Summary: true, atom.Ul: true, atom.Li: true, atom.Dd: true, atom.Dt: true,
	atom.Table: true, atom.Listing: true, atom.Plaintext: true,
}

// closeImplied pops up to and including the nearest open element among
// targets, unless an element of mdScope or one of stop comes first.
func (p *microdataPass) closeImplied(stop atom.Atom, targets ...atom.Atom) {
	for i := len(p.stack) - 1; i >= 0; i-- {
		a := p.stack[i].a
		for _, t := range targets {
			if a == t {
				for len(p.stack) > i {
					p.pop()
				}
				return
			}
		}
		if mdScope[a] || (stop != 0 && a == stop) {
			return
		}
	}
}

// mdAttrs are the attributes of a start tag the pass reads.
type mdAttrs struct {
	scope, hasProp, hasContent, hasDatetime bool
	prop, typ, id, content                  string
	href, src, data, value, datetime        string
}

func (p *microdataPass) start(selfClosing bool) {
	name, hasAttr := p.z.TagName()
	a := atom.Lookup(name)
	var e mdElem
	e.a = a
	if a == 0 {
		e.name = string(name)
	}
	var at mdAttrs
	for more := hasAttr; more; {
		var k, v []byte
		k, v, more = p.z.TagAttr()
		switch string(k) {
		case "itemscope":
			at.scope = true
		case "itemprop":
			at.hasProp, at.prop = true, string(v)
		case "itemtype":
			at.typ = string(v)
		case "itemid":
			at.id = string(v)
		case "content":
			at.hasContent, at.content = true, string(v)
		case "href":
			at.href = string(v)
		case "src":
			at.src = string(v)
		case "data":
			at.data = string(v)
		case "value":
			at.value = string(v)
		case "datetime":
			at.hasDatetime, at.datetime = true, string(v)
		}
	}

	void := mdVoid[a] || (selfClosing && (p.foreign > 0 || a == atom.Svg || a == atom.Math))
	if p.foreign == 0 {
		switch a {
		case atom.Li:
			p.closeImplied(0, atom.Li)
		case atom.Dd, atom.Dt:
			p.closeImplied(atom.Dl, atom.Dd, atom.Dt)
		case atom.Td, atom.Th:
			p.closeImplied(atom.Tr, atom.Td, atom.Th)
		case atom.Tr:
			p.closeImplied(atom.Tbody, atom.Td, atom.Th)
			p.closeImplied(atom.Tbody, atom.Tr)
		case atom.Option:
			p.closeImplied(atom.Select, atom.Option)
		}
		if mdClosesP[a] {
			p.closeImplied(0, atom.P)
		}
		if a == atom.Base && !p.baseSeen && at.href != "" {
			p.baseSeen = true
			if b := p.pageURL(); b != nil {
				if ref, err := url.Parse(strings.TrimSpace(at.href)); err == nil {
					p.base = b.ResolveReference(ref)
				}
			}
		}
	}

	if p.template == 0 && (at.scope || at.hasProp) {
		p.microdata(&e, &at, void)
	}
	if void {
		p.close(e)
		return
	}
	switch a {
	case atom.Template:
		p.template++
	case atom.Svg, atom.Math:
		p.foreign++
	}
	p.stack = append(p.stack, e)
}

// microdata handles the itemscope and itemprop attributes of element e.
func (p *microdataPass) microdata(e *mdElem, at *mdAttrs, void bool) {
	var owner *mdItem
	if n := len(p.items); n > 0 {
		owner = p.items[n-1]
	}
	if at.scope {
		it := &mdItem{id: p.url(at.id)}
		for _, t := range strings.Fields(at.typ) {
			if len(it.types) == maxMicrodataTypes {
				break
			}
			it.types = append(it.types, cleanValue(t))
		}
		switch {
		case !at.hasProp:
			p.top = append(p.top, "")
			e.top = len(p.top)
		case owner == nil || owner.dead:
			it.dead = true
		default:
			it.depth = owner.depth + 1
			if it.depth > maxMicrodataDepth {
				it.dead = true
				p.dropped++
			} else {
				p.add(owner, at.prop, &mdProp{item: it})
			}
		}
		e.item = it
		p.items = append(p.items, it)
		return
	}
	if owner == nil || owner.dead {
		return
	}
	prop := &mdProp{}
	text := false
	switch e.a {
	case atom.Meta:
		prop.value = at.content
	case atom.Audio, atom.Embed, atom.Iframe, atom.Img, atom.Source, atom.Track, atom.Video:
		prop.value = p.url(at.src)
	case atom.A, atom.Area, atom.Link:
		prop.value = p.url(at.href)
	case atom.Object:
		prop.value = p.url(at.data)
	case atom.Data, atom.Meter:
		prop.value = at.value
	case atom.Time:
		prop.value, text = at.datetime, !at.hasDatetime
	default:
		text = true
	}
	if at.hasContent {
		prop.value, text = at.content, false
	}
	prop.value = cleanValue(prop.value)
	if !p.add(owner, at.prop, prop) || !text || void {
		return
	}
	if len(p.colls) >= maxMicrodataOpen {
		p.dropped++
		return
	}
	e.coll = &mdCollect{prop: prop}
	p.colls = append(p.colls, e.coll)
}

// add adds prop to item under the names of an itemprop attribute, and
// reports whether it was kept.
func (p *microdataPass) add(item *mdItem, itemprop string, prop *mdProp) bool {
	for _, n := range strings.Fields(itemprop) {
		switch {
		case n[0] == '@':
		case len(n) > maxPropKeyBytes:
			p.dropped++
		default:
			prop.names = append(prop.names, strings.ToValidUTF8(n, "\uFFFD"))
		}
	}
	if len(prop.names) == 0 {
		return false
	}
	if len(item.props) >= maxMicrodataProps {
		p.dropped++
		return false
	}
	item.props = append(item.props, prop)
	return true
}

// cleanValue is an attribute value as kept: valid UTF-8, trimmed, cut.
func cleanValue(v string) string {
	return strings.ToValidUTF8(cutUTF8(strings.TrimSpace(v), maxPropValueBytes), "\uFFFD")
}

func (p *microdataPass) pageURL() *url.URL {
	if p.base == nil {
		p.base, _ = url.Parse(p.page)
	}
	return p.base
}

// url resolves a URL value against the document's base; one that does
// not parse is kept as written.
func (p *microdataPass) url(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	b := p.pageURL()
	ref, err := url.Parse(v)
	if b == nil || err != nil {
		return v
	}
	return b.ResolveReference(ref).String()
}

func (p *microdataPass) end() {
	name, _ := p.z.TagName()
	a := atom.Lookup(name)
	if a == atom.Body || a == atom.Html || a == atom.Br {
		return
	}
	for i := len(p.stack) - 1; i >= 0; i-- {
		e := &p.stack[i]
		if e.a == a && (a != 0 || e.name == string(name)) {
			for len(p.stack) > i {
				p.pop()
			}
			return
		}
	}
}

func (p *microdataPass) pop() {
	n := len(p.stack) - 1
	e := p.stack[n]
	p.stack = p.stack[:n]
	switch e.a {
	case atom.Template:
		p.template--
	case atom.Svg, atom.Math:
		p.foreign--
	}
	p.close(e)
}

// close ends element e: its text value and the item it opened.
func (p *microdataPass) close(e mdElem) {
	if e.coll != nil {
		e.coll.prop.value = strings.ToValidUTF8(collapseString(string(e.coll.buf), maxPropValueBytes), "\uFFFD")
		p.colls = p.colls[:len(p.colls)-1]
	}
	if e.item == nil {
		return
	}
	p.items = p.items[:len(p.items)-1]
	if e.top == 0 {
		return
	}
	p.b.Reset()
	e.item.render(&p.b)
	if !reserve(&p.used, p.b.Len()+min(p.kept, 1)) {
		p.dropped++
		return
	}
	p.kept++
	p.top[e.top-1] = p.b.String()
}

// render writes the item as a JSON object.
func (it *mdItem) render(b *strings.Builder) {
	b.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		writeJSONString(b, k)
		b.WriteByte(':')
	}
	switch len(it.types) {
	case 0:
	case 1:
		key("@type")
		writeJSONString(b, it.types[0])
	default:
		key("@type")
		b.WriteByte('[')
		for i, t := range it.types {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, t)
		}
		b.WriteByte(']')
	}
	if it.id != "" {
		key("@id")
		writeJSONString(b, cleanValue(it.id))
	}
	var names []string
	values := make(map[string][]*mdProp)
	for _, pr := range it.props {
		for _, n := range pr.names {
			if _, ok := values[n]; !ok {
				names = append(names, n)
			}
			values[n] = append(values[n], pr)
		}
	}
	for _, n := range names {
		key(n)
		vs := values[n]
		if len(vs) == 1 {
			vs[0].render(b)
			continue
		}
		b.WriteByte('[')
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(',')
			}
			v.render(b)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
}

func (pr *mdProp) render(b *strings.Builder) {
	if pr.item != nil {
		pr.item.render(b)
		return
	}
	writeJSONString(b, pr.value)
}
