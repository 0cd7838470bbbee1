package extract

import (
	"slices"
	"strings"

	"golang.org/x/net/html/atom"
)

// Start tags: the tree construction's "in head", "in body" and "in
// frameset" insertion modes and foreign (SVG, MathML) content, as the
// stream follows them (see stream.go).

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
