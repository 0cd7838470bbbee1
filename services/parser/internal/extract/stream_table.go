package extract

import (
	"strings"

	"golang.org/x/net/html/atom"
)

// Tables: the "in table" insertion modes, their implied end tags and
// cells, and the foster parenting of what a table holds out of its cells
// (each open table writes into a segment of its own, merged when it closes).

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
