// Copyright 2010 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Forked from golang.org/x/net/html/token.go at v0.62.0. What was changed,
// and why the tokens are the same, is listed in doc.go; comments marked
// "htmltok:" explain each change where it is made.

package htmltok

import (
	"bytes"
	"io"

	"golang.org/x/net/html"
)

// span is a range of bytes in a Tokenizer's buffer. The start is inclusive,
// the end is exclusive.
type span struct {
	start, end int
}

// maxLinearAttrs is the number of attributes of a tag up to which duplicate
// attribute names are found by comparing with each attribute kept; past it,
// with a map, as upstream does for every tag.
const maxLinearAttrs = 16

// A Tokenizer returns a stream of HTML tokens from a body held in memory.
// It is not safe for concurrent use.
type Tokenizer struct {
	// tt is the TokenType of the current token.
	tt html.TokenType
	// err is the first error encountered during tokenization: io.EOF once
	// the end of buf was reached, the only error there is. It is possible
	// for tt != Error && err != nil to hold: this means that Next returned a
	// valid token but the subsequent Next call will return an error token.
	// For example, if the HTML text input was just "plain", then the first
	// Next call would set z.err to io.EOF but return a TextToken, and all
	// subsequent Next calls would return an ErrorToken.
	// err is never reset (except by readDoctype and readCDATA, which back
	// up and read the same bytes again, as upstream).
	err error
	// buf[raw.start:raw.end] holds the raw bytes of the current token.
	// buf[raw.end:] is the input that will yield future tokens.
	// htmltok: buf is the whole body, never written to.
	raw span
	buf []byte
	// buf[data.start:data.end] holds the raw bytes of the current token's data:
	// a text token's text, a tag token's tag name, etc.
	data span
	// pendingAttr is the attribute key and value currently being tokenized.
	// When complete, pendingAttr is pushed onto attr. nAttrReturned is
	// incremented on each call to TagAttr.
	pendingAttr [2]span
	attr        [][2]span
	// attrNames holds the lower-cased names of the current tag's attributes
	// once it has more than maxLinearAttrs of them (see dupAttr).
	attrNames     map[string]struct{}
	nAttrReturned int
	// rawTag is the "script" in "</script>" that closes the next token. If
	// non-empty, the subsequent call to Next will return a raw or RCDATA text
	// token: one that treats "<p>" as text instead of an element.
	// rawTag's contents are lower-cased.
	rawTag string
	// textIsRaw is whether the current text token's data is not escaped.
	textIsRaw bool
	// convertNUL is whether NUL bytes in the current token's data should
	// be converted into \ufffd replacement characters.
	convertNUL bool
	// allowCDATA is whether CDATA sections are allowed in the current context.
	allowCDATA bool
	// scratch holds the current token's Text, TagName and TagAttr results
	// that differ from the bytes of buf (a NUL replaced, a CR converted, a
	// letter lowered, an entity unescaped). It is only appended to until the
	// next call to Next, which reuses it.
	scratch []byte
}

// New returns a Tokenizer for body, the whole of an HTML document. The
// input is assumed to be UTF-8 encoded.
//
// The Tokenizer never writes to body, and the slices that Raw, Text,
// TagName and TagAttr return may be subslices of it: the caller must not
// modify body while it uses the Tokenizer, nor modify the returned slices.
func New(body []byte) *Tokenizer {
	return &Tokenizer{buf: body}
}

// AllowCDATA sets whether or not the tokenizer recognizes <![CDATA[foo]]> as
// the text "foo". The default value is false, which means to recognize it as
// a bogus comment "<!-- [CDATA[foo]] -->" instead.
//
// Strictly speaking, an HTML5 compliant tokenizer should allow CDATA if and
// only if tokenizing foreign content, such as MathML and SVG. However,
// tracking foreign-contentness is difficult to do purely in the tokenizer,
// as opposed to the parser, due to HTML integration points: an <svg> element
// can contain a <foreignObject> that is foreign-to-SVG but not foreign-to-
// HTML. For strict compliance with the HTML5 tokenization algorithm, it is the
// responsibility of the user of a tokenizer to call AllowCDATA as appropriate.
// In practice, if using the tokenizer without caring whether MathML or SVG
// CDATA is text or comments, such as tokenizing HTML to find all the anchor
// text, it is acceptable to ignore this responsibility.
func (z *Tokenizer) AllowCDATA(allowCDATA bool) {
	z.allowCDATA = allowCDATA
}

// NextIsNotRawText instructs the tokenizer that the next token should not be
// considered as 'raw text'. Some elements, such as script and title elements,
// normally require the next token after the opening tag to be 'raw text' that
// has no child elements. For example, tokenizing "<title>a<b>c</b>d</title>"
// yields a start tag token for "<title>", a text token for "a<b>c</b>d", and
// an end tag token for "</title>". There are no distinct start tag or end tag
// tokens for the "<b>" and "</b>".
//
// This tokenizer implementation will generally look for raw text at the right
// times. Strictly speaking, an HTML5 compliant tokenizer should not look for
// raw text if in foreign content: <title> generally needs raw text, but a
// <title> inside an <svg> does not. Another example is that a <textarea>
// generally needs raw text, but a <textarea> is not allowed as an immediate
// child of a <select>; in normal parsing, a <textarea> implies </select>, but
// one cannot close the implicit element when parsing a <select>'s InnerHTML.
// Similarly to AllowCDATA, tracking the correct moment to override raw-text-
// ness is difficult to do purely in the tokenizer, as opposed to the parser.
// For strict compliance with the HTML5 tokenization algorithm, it is the
// responsibility of the user of a tokenizer to call NextIsNotRawText as
// appropriate. In practice, like AllowCDATA, it is acceptable to ignore this
// responsibility for basic usage.
//
// Note that this 'raw text' concept is different from the one offered by the
// Tokenizer.Raw method.
func (z *Tokenizer) NextIsNotRawText() {
	z.rawTag = ""
}

// Err returns the error associated with the most recent ErrorToken token.
// This is io.EOF, meaning the end of tokenization.
func (z *Tokenizer) Err() error {
	if z.tt != html.ErrorToken {
		return nil
	}
	return z.err
}

// readByte returns the next byte from the input. At the end of the input
// it sets z.err to io.EOF and returns 0, leaving z.raw.end where it is.
// z.buf[z.raw.start:z.raw.end] holds all the bytes read so far for the
// current token.
//
// htmltok: upstream reads from an io.Reader into a buffer that it grows
// and compacts, and checks maxBuf, in a function too large to be inlined
// that is called for every byte; here the body is the buffer and this is
// an index into it, inlined. The hot loops (text, tag names, attributes)
// scan z.buf directly.
func (z *Tokenizer) readByte() byte {
	if z.raw.end >= len(z.buf) {
		z.err = io.EOF
		return 0
	}
	x := z.buf[z.raw.end]
	z.raw.end++
	return x
}

// eof moves the reader to the end of the input and sets z.err, as
// readByte called until it reports the end does.
func (z *Tokenizer) eof() {
	z.raw.end = len(z.buf)
	z.err = io.EOF
}

// skipWhiteSpace skips past any white space.
func (z *Tokenizer) skipWhiteSpace() {
	if z.err != nil {
		return
	}
	for z.raw.end < len(z.buf) {
		switch z.buf[z.raw.end] {
		case ' ', '\n', '\r', '\t', '\f':
			z.raw.end++
		default:
			return
		}
	}
	z.err = io.EOF
}

// readRawOrRCDATA reads until the next "</foo>", where "foo" is z.rawTag and
// is typically something like "script" or "textarea".
func (z *Tokenizer) readRawOrRCDATA() {
	if z.rawTag == "script" {
		z.readScript()
		z.textIsRaw = true
		z.rawTag = ""
		return
	}
loop:
	for {
		// htmltok: upstream reads byte by byte up to the next '<'.
		i := bytes.IndexByte(z.buf[z.raw.end:], '<')
		if i < 0 {
			z.eof()
			break loop
		}
		z.raw.end += i + 1
		c := z.readByte()
		if z.err != nil {
			break loop
		}
		if c != '/' {
			z.raw.end--
			continue loop
		}
		if z.readRawEndTag() || z.err != nil {
			break loop
		}
	}
	z.data.end = z.raw.end
	// A textarea's or title's RCDATA can contain escaped entities.
	z.textIsRaw = z.rawTag != "textarea" && z.rawTag != "title"
	z.rawTag = ""
}

// readRawEndTag attempts to read a tag like "</foo>", where "foo" is z.rawTag.
// If it succeeds, it backs up the input position to reconsume the tag and
// returns true. Otherwise it returns false. The opening "</" has already been
// consumed.
func (z *Tokenizer) readRawEndTag() bool {
	for i := 0; i < len(z.rawTag); i++ {
		c := z.readByte()
		if z.err != nil {
			return false
		}
		if c != z.rawTag[i] && c != z.rawTag[i]-('a'-'A') {
			z.raw.end--
			return false
		}
	}
	c := z.readByte()
	if z.err != nil {
		return false
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		// The 3 is 2 for the leading "</" plus 1 for the trailing character c.
		z.raw.end -= 3 + len(z.rawTag)
		return true
	}
	z.raw.end--
	return false
}

// readScript reads until the next </script> tag, following the byzantine
// rules for escaping/hiding the closing tag.
func (z *Tokenizer) readScript() {
	defer func() {
		z.data.end = z.raw.end
	}()
	var c byte

scriptData:
	// htmltok: upstream reads byte by byte up to the next '<'.
	if i := bytes.IndexByte(z.buf[z.raw.end:], '<'); i >= 0 {
		z.raw.end += i + 1
	} else {
		z.eof()
		return
	}
	goto scriptDataLessThanSign

scriptDataLessThanSign:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '/':
		goto scriptDataEndTagOpen
	case '!':
		goto scriptDataEscapeStart
	}
	z.raw.end--
	goto scriptData

scriptDataEndTagOpen:
	if z.readRawEndTag() || z.err != nil {
		return
	}
	goto scriptData

scriptDataEscapeStart:
	c = z.readByte()
	if z.err != nil {
		return
	}
	if c == '-' {
		goto scriptDataEscapeStartDash
	}
	z.raw.end--
	goto scriptData

scriptDataEscapeStartDash:
	c = z.readByte()
	if z.err != nil {
		return
	}
	if c == '-' {
		goto scriptDataEscapedDashDash
	}
	z.raw.end--
	goto scriptData

scriptDataEscaped:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDash:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDashDash:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	c = z.readByte()
	if z.err != nil {
		return
	}
	if c == '/' {
		goto scriptDataEscapedEndTagOpen
	}
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
		goto scriptDataDoubleEscapeStart
	}
	z.raw.end--
	goto scriptData

scriptDataEscapedEndTagOpen:
	if z.readRawEndTag() || z.err != nil {
		return
	}
	goto scriptDataEscaped

scriptDataDoubleEscapeStart:
	z.raw.end--
	for i := 0; i < len("script"); i++ {
		c = z.readByte()
		if z.err != nil {
			return
		}
		if c != "script"[i] && c != "SCRIPT"[i] {
			z.raw.end--
			goto scriptDataEscaped
		}
	}
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		goto scriptDataDoubleEscaped
	}
	z.raw.end--
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDash:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDashDash:
	c = z.readByte()
	if z.err != nil {
		return
	}
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	c = z.readByte()
	if z.err != nil {
		return
	}
	if c == '/' {
		goto scriptDataDoubleEscapeEnd
	}
	z.raw.end--
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapeEnd:
	if z.readRawEndTag() {
		z.raw.end += len("</script>")
		goto scriptDataEscaped
	}
	if z.err != nil {
		return
	}
	goto scriptDataDoubleEscaped
}

// readComment reads the next comment token starting with "<!--". The opening
// "<!--" has already been consumed.
func (z *Tokenizer) readComment() {
	z.data.start = z.raw.end
	defer func() {
		if z.data.end < z.data.start {
			// It's a comment with no data, like <!-->.
			z.data.end = z.data.start
		}
	}()

	var dashCount int
	beginning := true
	for {
		c := z.readByte()
		if z.err != nil {
			z.data.end = z.calculateAbruptCommentDataEnd()
			return
		}
		switch c {
		case '-':
			dashCount++
			continue
		case '>':
			if dashCount >= 2 || beginning {
				z.data.end = z.raw.end - len("-->")
				return
			}
		case '!':
			if dashCount >= 2 {
				c = z.readByte()
				if z.err != nil {
					z.data.end = z.calculateAbruptCommentDataEnd()
					return
				} else if c == '>' {
					z.data.end = z.raw.end - len("--!>")
					return
				} else if c == '-' {
					dashCount = 1
					beginning = false
					continue
				}
			}
		}
		dashCount = 0
		beginning = false
	}
}

func (z *Tokenizer) calculateAbruptCommentDataEnd() int {
	raw := z.Raw()
	const prefixLen = len("<!--")
	if len(raw) >= prefixLen {
		raw = raw[prefixLen:]
		if hasSuffix(raw, "--!") {
			return z.raw.end - 3
		} else if hasSuffix(raw, "--") {
			return z.raw.end - 2
		} else if hasSuffix(raw, "-") {
			return z.raw.end - 1
		}
	}
	return z.raw.end
}

func hasSuffix(b []byte, suffix string) bool {
	if len(b) < len(suffix) {
		return false
	}
	b = b[len(b)-len(suffix):]
	for i := range b {
		if b[i] != suffix[i] {
			return false
		}
	}
	return true
}

// readUntilCloseAngle reads until the next ">".
func (z *Tokenizer) readUntilCloseAngle() {
	z.data.start = z.raw.end
	// htmltok: upstream reads byte by byte up to the next '>'.
	i := bytes.IndexByte(z.buf[z.raw.end:], '>')
	if i < 0 {
		z.eof()
		z.data.end = z.raw.end
		return
	}
	z.raw.end += i + 1
	z.data.end = z.raw.end - len(">")
}

// readMarkupDeclaration reads the next token starting with "<!". It might be
// a "<!--comment-->", a "<!DOCTYPE foo>", a "<![CDATA[section]]>" or
// "<!a bogus comment". The opening "<!" has already been consumed.
func (z *Tokenizer) readMarkupDeclaration() html.TokenType {
	z.data.start = z.raw.end
	var c [2]byte
	for i := 0; i < 2; i++ {
		c[i] = z.readByte()
		if z.err != nil {
			// bogus comment
			z.data.end = z.raw.end
			if i == 1 && c[0] == '>' {
				z.data.end--
			}
			return html.CommentToken
		}
	}
	if c[0] == '-' && c[1] == '-' {
		z.readComment()
		return html.CommentToken
	}
	z.raw.end -= 2
	if z.readDoctype() {
		return html.DoctypeToken
	}
	if z.allowCDATA && z.readCDATA() {
		z.convertNUL = true
		return html.TextToken
	}
	// It's a bogus comment.
	z.readUntilCloseAngle()
	return html.CommentToken
}

// readDoctype attempts to read a doctype declaration and returns true if
// successful. The opening "<!" has already been consumed.
func (z *Tokenizer) readDoctype() bool {
	const s = "DOCTYPE"
	for i := 0; i < len(s); i++ {
		c := z.readByte()
		if z.err != nil {
			// Back up to read the fragment of "DOCTYPE" again, reset
			// z.err to signal EOF on the next call.
			// htmltok: upstream does this only if z.err is io.EOF, and
			// else (an error of the io.Reader, or ErrBufferExceeded)
			// ends the token; io.EOF is the only error here.
			z.raw.end = z.data.start
			z.err = nil
			return false
		}
		if c != s[i] && c != s[i]+('a'-'A') {
			// Back up to read the fragment of "DOCTYPE" again.
			z.raw.end = z.data.start
			return false
		}
	}
	if z.skipWhiteSpace(); z.err != nil {
		z.data.start = z.raw.end
		z.data.end = z.raw.end
		return true
	}
	z.readUntilCloseAngle()
	return true
}

// readCDATA attempts to read a CDATA section and returns true if
// successful. The opening "<!" has already been consumed.
func (z *Tokenizer) readCDATA() bool {
	const s = "[CDATA["
	for i := 0; i < len(s); i++ {
		c := z.readByte()
		if z.err != nil {
			// Back up to read the fragment of "[CDATA[" again, reset
			// z.err to signal EOF on the next call.
			// htmltok: as in readDoctype, io.EOF is the only error.
			z.raw.end = z.data.start
			z.err = nil
			return false
		}
		if c != s[i] {
			// Back up to read the fragment of "[CDATA[" again.
			z.raw.end = z.data.start
			return false
		}
	}
	z.data.start = z.raw.end
	brackets := 0
	for {
		c := z.readByte()
		if z.err != nil {
			z.data.end = z.raw.end
			return true
		}
		switch c {
		case ']':
			brackets++
		case '>':
			if brackets >= 2 {
				z.data.end = z.raw.end - len("]]>")
				return true
			}
			brackets = 0
		default:
			brackets = 0
		}
	}
}

// startTagIn returns the element of ss that the start tag in
// z.buf[z.data.start:z.data.end] case-insensitively matches, or "".
//
// htmltok: upstream returns whether there is one, and readStartTag then
// lower-cases the tag name into a new string; this is that string.
func (z *Tokenizer) startTagIn(ss ...string) string {
loop:
	for _, s := range ss {
		if z.data.end-z.data.start != len(s) {
			continue loop
		}
		for i := 0; i < len(s); i++ {
			c := z.buf[z.data.start+i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != s[i] {
				continue loop
			}
		}
		return s
	}
	return ""
}

// readStartTag reads the next start tag token. The opening "<a" has already
// been consumed, where 'a' means anything in [A-Za-z].
func (z *Tokenizer) readStartTag() html.TokenType {
	z.readTag(true)
	if z.err != nil {
		return html.ErrorToken
	}
	// Several tags flag the tokenizer's next token as raw.
	c, raw := z.buf[z.data.start], ""
	if 'A' <= c && c <= 'Z' {
		c += 'a' - 'A'
	}
	switch c {
	case 'i':
		raw = z.startTagIn("iframe")
	case 'n':
		raw = z.startTagIn("noembed", "noframes", "noscript")
	case 'p':
		raw = z.startTagIn("plaintext")
	case 's':
		raw = z.startTagIn("script", "style")
	case 't':
		raw = z.startTagIn("textarea", "title")
	case 'x':
		raw = z.startTagIn("xmp")
	}
	if raw != "" {
		z.rawTag = raw
	}
	// Look for a self-closing token (e.g. <br/>).
	//
	// Originally, we did this by just checking that the last character of the
	// tag (ignoring the closing bracket) was a solidus (/) character, but this
	// is not always accurate.
	//
	// We need to be careful that we don't misinterpret a non-self-closing tag
	// as self-closing, as can happen if the tag contains unquoted attribute
	// values (i.e. <p a=/>).
	//
	// To avoid this, we check that the last non-bracket character of the tag
	// (z.raw.end-2) isn't the same character as the last non-quote character of
	// the last attribute of the tag (z.pendingAttr[1].end-1), if the tag has
	// attributes.
	nAttrs := len(z.attr)
	if z.err == nil && z.buf[z.raw.end-2] == '/' && (nAttrs == 0 || z.raw.end-2 != z.attr[nAttrs-1][1].end-1) {
		return html.SelfClosingTagToken
	}
	return html.StartTagToken
}

// readTag reads the next tag token and its attributes. If saveAttr, those
// attributes are saved in z.attr, otherwise z.attr is set to an empty slice.
// The opening "<a" or "</a" has already been consumed, where 'a' means anything
// in [A-Za-z].
func (z *Tokenizer) readTag(saveAttr bool) {
	z.attr = z.attr[:0]
	z.nAttrReturned = 0
	if len(z.attrNames) > 0 {
		clear(z.attrNames)
	}
	// Read the tag name and attribute key/value pairs.
	z.readTagName()
	if z.skipWhiteSpace(); z.err != nil {
		return
	}
	for {
		c := z.readByte()
		if z.err != nil || c == '>' {
			break
		}
		z.raw.end--
		z.readTagAttrKey()
		z.readTagAttrVal()
		// Save pendingAttr if saveAttr and that attribute has a non-empty key, and the key hasn't been seen before.
		if saveAttr && z.pendingAttr[0].start != z.pendingAttr[0].end && !z.dupAttr(z.pendingAttr[0]) {
			z.attr = append(z.attr, z.pendingAttr)
		}
		if z.skipWhiteSpace(); z.err != nil {
			break
		}
	}
}

// dupAttr reports whether a saved attribute of the current tag has the
// name k, compared as lower(name) (A-Z lowered, NUL not replaced), and
// else records k as seen: the caller saves the attribute.
//
// htmltok: upstream copies and lower-cases every attribute name (of end
// tags too) into a new string, and looks it up in and adds it to a map of
// the names saved; here the names saved are compared in place, and only
// a tag with more than maxLinearAttrs attributes uses the map (then the
// test is linear in the number of attributes, as upstream's).
func (z *Tokenizer) dupAttr(k span) bool {
	key := z.buf[k.start:k.end]
	if len(z.attr) < maxLinearAttrs {
		for _, a := range z.attr {
			if equalLower(z.buf[a[0].start:a[0].end], key) {
				return true
			}
		}
		return false
	}
	if z.attrNames == nil {
		z.attrNames = make(map[string]struct{})
	}
	if len(z.attrNames) == 0 {
		for _, a := range z.attr {
			z.attrNames[lowerString(z.buf[a[0].start:a[0].end])] = struct{}{}
		}
	}
	name := lowerString(key)
	if _, ok := z.attrNames[name]; ok {
		return true
	}
	z.attrNames[name] = struct{}{}
	return false
}

// equalLower reports whether lower(a) == lower(b), without writing to
// either.
func equalLower(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i, ca := range a {
		cb := b[i]
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// lowerString is string(lower(bytes.Clone(b))).
func lowerString(b []byte) string {
	return string(lower(bytes.Clone(b)))
}

// readTagName sets z.data to the "div" in "<div k=v>". The reader (z.raw.end)
// is positioned such that the first byte of the tag name (the "d" in "<div")
// has already been consumed.
func (z *Tokenizer) readTagName() {
	z.data.start = z.raw.end - 1
	// htmltok: upstream calls readByte for each byte.
	buf := z.buf
	for i := z.raw.end; i < len(buf); i++ {
		switch buf[i] {
		case ' ', '\n', '\r', '\t', '\f':
			z.raw.end = i + 1
			z.data.end = i
			return
		case '/', '>':
			z.raw.end = i
			z.data.end = i
			return
		}
	}
	z.eof()
	z.data.end = z.raw.end
}

// readTagAttrKey sets z.pendingAttr[0] to the "k" in "<div k=v>".
// Precondition: z.err == nil.
func (z *Tokenizer) readTagAttrKey() {
	start := z.raw.end
	z.pendingAttr[0].start = start
	// htmltok: upstream calls readByte for each byte.
	buf := z.buf
	for i := start; i < len(buf); i++ {
		switch buf[i] {
		case '=':
			if i == start {
				// WHATWG 13.2.5.32, if we see an equals sign before the attribute name
				// begins, we treat it as a character in the attribute name and continue.
				continue
			}
			// WHATWG 13.2.5.33 Attribute name state
			// We need to reconsume the char in the after attribute name state to support the / character
			z.raw.end = i
			z.pendingAttr[0].end = i
			return
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			z.raw.end = i
			z.pendingAttr[0].end = i
			return
		}
	}
	z.eof()
	z.pendingAttr[0].end = z.raw.end
}

// readTagAttrVal sets z.pendingAttr[1] to the "v" in "<div k=v>".
func (z *Tokenizer) readTagAttrVal() {
	z.pendingAttr[1].start = z.raw.end
	z.pendingAttr[1].end = z.raw.end
	if z.skipWhiteSpace(); z.err != nil {
		return
	}
	c := z.readByte()
	if z.err != nil {
		return
	}
	if c == '/' {
		// WHATWG 13.2.5.34 After attribute name state
		// U+002F SOLIDUS (/) - Switch to the self-closing start tag state.
		return
	}
	if c != '=' {
		z.raw.end--
		return
	}
	if z.skipWhiteSpace(); z.err != nil {
		return
	}
	quote := z.readByte()
	if z.err != nil {
		return
	}
	// htmltok: upstream calls readByte for each byte of the value.
	switch quote {
	case '>':
		z.raw.end--
		return

	case '\'', '"':
		z.pendingAttr[1].start = z.raw.end
		i := bytes.IndexByte(z.buf[z.raw.end:], quote)
		if i < 0 {
			z.eof()
			z.pendingAttr[1].end = z.raw.end
			return
		}
		z.pendingAttr[1].end = z.raw.end + i
		z.raw.end += i + 1

	default:
		z.pendingAttr[1].start = z.raw.end - 1
		buf := z.buf
		for i := z.raw.end; i < len(buf); i++ {
			switch buf[i] {
			case ' ', '\n', '\r', '\t', '\f':
				z.raw.end = i + 1
				z.pendingAttr[1].end = i
				return
			case '>':
				z.raw.end = i
				z.pendingAttr[1].end = i
				return
			}
		}
		z.eof()
		z.pendingAttr[1].end = z.raw.end
	}
}

// Next scans the next token and returns its type. It reuses the memory of
// the slices that Text, TagName and TagAttr returned for the previous
// token.
func (z *Tokenizer) Next() html.TokenType {
	z.raw.start = z.raw.end
	z.data.start = z.raw.end
	z.data.end = z.raw.end
	z.scratch = z.scratch[:0]
	if z.err != nil {
		z.tt = html.ErrorToken
		return z.tt
	}
	if z.rawTag != "" {
		if z.rawTag == "plaintext" {
			// Read everything up to EOF.
			z.eof()
			z.data.end = z.raw.end
			z.textIsRaw = true
		} else {
			z.readRawOrRCDATA()
		}
		if z.data.end > z.data.start {
			z.tt = html.TextToken
			z.convertNUL = true
			return z.tt
		}
	}
	z.textIsRaw = false
	z.convertNUL = false

loop:
	for {
		// htmltok: upstream reads byte by byte up to the next '<'.
		i := bytes.IndexByte(z.buf[z.raw.end:], '<')
		if i < 0 {
			z.eof()
			break loop
		}
		z.raw.end += i + 1

		// Check if the '<' we have just read is part of a tag, comment
		// or doctype. If not, it's part of the accumulated text token.
		c := z.readByte()
		if z.err != nil {
			break loop
		}
		var tokenType html.TokenType
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
			tokenType = html.StartTagToken
		case c == '/':
			tokenType = html.EndTagToken
		case c == '!' || c == '?':
			// We use CommentToken to mean any of "<!--actual comments-->",
			// "<!DOCTYPE declarations>" and "<?xml processing instructions?>".
			tokenType = html.CommentToken
		default:
			// Reconsume the current character.
			z.raw.end--
			continue
		}

		// We have a non-text token, but we might have accumulated some text
		// before that. If so, we return the text first, and return the non-
		// text token on the subsequent call to Next.
		if x := z.raw.end - len("<a"); z.raw.start < x {
			z.raw.end = x
			z.data.end = x
			z.tt = html.TextToken
			return z.tt
		}
		switch tokenType {
		case html.StartTagToken:
			z.tt = z.readStartTag()
			return z.tt
		case html.EndTagToken:
			c = z.readByte()
			if z.err != nil {
				break loop
			}
			if c == '>' {
				// "</>" does not generate a token at all. Generate an empty comment
				// to allow passthrough clients to pick up the data using Raw.
				// Reset the tokenizer state and start again.
				z.tt = html.CommentToken
				return z.tt
			}
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
				z.readTag(false)
				if z.err != nil {
					z.tt = html.ErrorToken
				} else {
					z.tt = html.EndTagToken
				}
				return z.tt
			}
			z.raw.end--
			z.readUntilCloseAngle()
			z.tt = html.CommentToken
			return z.tt
		case html.CommentToken:
			if c == '!' {
				z.tt = z.readMarkupDeclaration()
				return z.tt
			}
			z.raw.end--
			z.readUntilCloseAngle()
			z.tt = html.CommentToken
			return z.tt
		}
	}
	if z.raw.start < z.raw.end {
		z.data.end = z.raw.end
		z.tt = html.TextToken
		return z.tt
	}
	z.tt = html.ErrorToken
	return z.tt
}

// Raw returns the unmodified text of the current token: a subslice of the
// body, which no method changes.
//
// The token stream's raw bytes partition the byte stream (up until an
// ErrorToken). There are no overlaps or gaps between two consecutive token's
// raw bytes. One implication is that the byte offset of the current token is
// the sum of the lengths of all previous tokens' raw bytes.
//
// htmltok: upstream's Text converts newlines and unescapes in place, so
// that Raw called after Text may return the converted bytes.
func (z *Tokenizer) Raw() []byte {
	return z.buf[z.raw.start:z.raw.end:z.raw.end]
}

// convertNewlines converts "\r" and "\r\n" in s to "\n".
// The conversion happens in place, but the resulting slice may be shorter.
func convertNewlines(s []byte) []byte {
	for i, c := range s {
		if c != '\r' {
			continue
		}

		src := i + 1
		if src >= len(s) || s[src] != '\n' {
			s[i] = '\n'
			continue
		}

		dst := i
		for src < len(s) {
			if s[src] == '\r' {
				if src+1 < len(s) && s[src+1] == '\n' {
					src++
				}
				s[dst] = '\n'
			} else {
				s[dst] = s[src]
			}
			src++
			dst++
		}
		return s[:dst]
	}
	return s
}

// copyOut appends s to z.scratch, with each NUL byte replaced by U+FFFD
// if replaceNUL (as bytes.ReplaceAll(s, "\x00", "\ufffd") does), and
// returns the copy, its capacity its length.
func (z *Tokenizer) copyOut(s []byte, replaceNUL bool) []byte {
	start := len(z.scratch)
	for replaceNUL {
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			break
		}
		z.scratch = append(z.scratch, s[:i]...)
		z.scratch = append(z.scratch, "\ufffd"...)
		s = s[i+1:]
	}
	z.scratch = append(z.scratch, s...)
	return z.scratch[start:len(z.scratch):len(z.scratch)]
}

// Text returns the unescaped text of a text, comment or doctype token.
//
// The slice is valid until the next call to Next, and must not be
// modified: it is a subslice of the body when the text is the same as its
// bytes in the body (no NUL to replace, no CR to convert, no entity to
// unescape), else of memory that Next reuses.
//
// htmltok: upstream converts newlines and unescapes in z.buf, in place
// (bytes.Replace copies when a NUL is replaced). Here the bytes are
// copied first when one of those could change them, and the same
// functions are applied to the copy, in the same order.
func (z *Tokenizer) Text() []byte {
	switch z.tt {
	case html.TextToken, html.CommentToken, html.DoctypeToken:
		s := z.buf[z.data.start:z.data.end:z.data.end]
		z.data.start = z.raw.end
		z.data.end = z.raw.end
		nul := (z.convertNUL || z.tt == html.CommentToken) && bytes.IndexByte(s, 0) >= 0
		if !nul && bytes.IndexByte(s, '\r') < 0 && (z.textIsRaw || bytes.IndexByte(s, '&') < 0) {
			return s
		}
		s = convertNewlines(z.copyOut(s, false))
		if nul {
			s = z.copyOut(s, true)
		}
		if !z.textIsRaw {
			s = unescape(s, false)
		}
		return s
	}
	return nil
}

// TagName returns the lower-cased name of a tag token (the `img` out of
// `<IMG SRC="foo">`) and whether the tag has attributes.
//
// The slice is valid until the next call to Next, and must not be
// modified: it is a subslice of the body when the name has no upper-case
// letter and no NUL, else of memory that Next reuses.
//
// htmltok: upstream always copies the name (bytes.ReplaceAll) and
// lower-cases the copy.
func (z *Tokenizer) TagName() (name []byte, hasAttr bool) {
	if z.data.start < z.data.end {
		switch z.tt {
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			s := z.buf[z.data.start:z.data.end:z.data.end]
			z.data.start = z.raw.end
			z.data.end = z.raw.end
			return z.lowered(s), z.nAttrReturned < len(z.attr)
		}
	}
	return nil, false
}

// lowered is lower(bytes.ReplaceAll(s, "\x00", "\ufffd")): s itself when
// it has no NUL and no upper-case letter, else a copy.
func (z *Tokenizer) lowered(s []byte) []byte {
	for _, c := range s {
		if c == 0 || 'A' <= c && c <= 'Z' {
			return lower(z.copyOut(s, true))
		}
	}
	return s
}

// TagAttr returns the lower-cased key and unescaped value of the next unparsed
// attribute for the current tag token and whether there are more attributes.
// An empty value is nil, as upstream's.
//
// The slices are valid until the next call to Next (the ones returned for
// the tag's other attributes stay as they are), and must not be modified:
// each is a subslice of the body when it is the same as its bytes in the
// body (no upper-case letter in the key; no NUL, CR or '&' in the value),
// else of memory that Next reuses.
//
// htmltok: upstream always copies the key and the value (bytes.ReplaceAll),
// and lower-cases, converts newlines and unescapes the copies.
func (z *Tokenizer) TagAttr() (key, val []byte, moreAttr bool) {
	if z.nAttrReturned < len(z.attr) {
		switch z.tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			x := z.attr[z.nAttrReturned]
			z.nAttrReturned++
			key = z.lowered(z.buf[x[0].start:x[0].end:x[0].end])
			val = z.buf[x[1].start:x[1].end:x[1].end]
			switch {
			case len(val) == 0:
				val = nil // bytes.ReplaceAll of an empty slice
			case bytes.IndexByte(val, '&') >= 0 || bytes.IndexByte(val, '\r') >= 0 || bytes.IndexByte(val, 0) >= 0:
				val = unescape(convertNewlines(z.copyOut(val, true)), true)
			}
			return key, val, z.nAttrReturned < len(z.attr)
		}
	}
	return nil, nil, false
}
