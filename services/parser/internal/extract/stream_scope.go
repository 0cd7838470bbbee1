package extract

import (
	"slices"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// The stack of open elements: scopes, implied end tags, and the element
// categories of the HTML standard that the tree construction rules test.

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
