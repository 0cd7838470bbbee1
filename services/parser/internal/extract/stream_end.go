package extract

import (
	"slices"
	"strings"

	"golang.org/x/net/html/atom"
)

// End tags: the "in body" end tag rules and the adoption agency
// algorithm as the stream follows it (for <a>; see the package's known
// differences in stream.go), and the list of active formatting elements.

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
