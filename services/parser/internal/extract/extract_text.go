package extract

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

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
			if c := s[j]; c < utf8.RuneSelf && !asciiSpace[c] {
				j++ // the common byte, without the call
				continue
			}
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
