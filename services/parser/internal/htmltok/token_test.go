package htmltok_test

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/html"

	"github.com/trawl-crawler/trawl/services/parser/internal/htmltok"
)

// tokenizer is what the extractor calls on a tokenizer: x/net/html's
// *html.Tokenizer and *htmltok.Tokenizer both have it.
type tokenizer interface {
	Next() html.TokenType
	Raw() []byte
	Text() []byte
	TagName() (name []byte, hasAttr bool)
	TagAttr() (key, val []byte, moreAttr bool)
	AllowCDATA(bool)
	NextIsNotRawText()
	Err() error
}

var (
	_ tokenizer = (*html.Tokenizer)(nil)
	_ tokenizer = (*htmltok.Tokenizer)(nil)
)

// mode is how a comparison drives the two tokenizers.
type mode uint8

const (
	// modePlain calls neither AllowCDATA nor NextIsNotRawText, and every
	// accessor on every token.
	modePlain mode = iota
	// modeForeign calls AllowCDATA and NextIsNotRawText as the extractor
	// does (internal/extract/stream.go): CDATA is allowed inside <svg> and
	// <math>, and a start tag there, or of <svg> or <math>, is followed by
	// NextIsNotRawText.
	modeForeign
	// modeRandom calls AllowCDATA and NextIsNotRawText at random, and a
	// random subset of the accessors in a random order, as a caller that
	// reads only some tags' names and attributes (the extractor) does.
	modeRandom
	nModes
)

func (m mode) String() string {
	return [...]string{"plain", "foreign", "random"}[m]
}

// calls is what is called on both tokenizers for one token.
type calls struct {
	cdata     bool // AllowCDATA's argument before Next
	texts     int  // Text calls
	names     int  // TagName calls
	attrs     int  // TagAttr calls at most (it stops at the first nil key)
	attrFirst bool // TagAttr before TagName
	notRaw    bool // NextIsNotRawText after the accessors
}

// driver chooses the calls of each token.
type driver struct {
	m       mode
	rnd     *rand.Rand
	foreign int // open <svg>/<math> elements and elements in them (modeForeign)
}

func newDriver(m mode, body []byte) *driver {
	h := fnv.New64a()
	h.Write(body)
	return &driver{m: m, rnd: rand.New(rand.NewPCG(h.Sum64(), uint64(m)))}
}

func (d *driver) next() calls {
	switch d.m {
	case modeRandom:
		return calls{
			cdata:     d.rnd.IntN(2) == 0,
			texts:     d.rnd.IntN(3),
			names:     d.rnd.IntN(3),
			attrs:     d.rnd.IntN(6),
			attrFirst: d.rnd.IntN(4) == 0,
			notRaw:    d.rnd.IntN(3) == 0,
		}
	case modeForeign:
		return calls{cdata: d.foreign > 0, texts: 2, names: 2, attrs: -1}
	}
	return calls{texts: 2, names: 2, attrs: -1}
}

// after follows the foreign content of modeForeign: tt and name are the
// token's type and tag name.
func (d *driver) after(c *calls, tt html.TokenType, name string) {
	if d.m != modeForeign {
		return
	}
	switch tt {
	case html.StartTagToken, html.SelfClosingTagToken:
		if d.foreign == 0 && name != "svg" && name != "math" {
			return
		}
		c.notRaw = true
		if tt == html.StartTagToken {
			d.foreign++
		}
	case html.EndTagToken:
		if d.foreign > 0 {
			d.foreign--
		}
	}
}

// call is a call on a tokenizer and what it returned.
type call struct {
	op         string
	b1, b2     string // the slices returned
	nil1, nil2 bool   // whether they were nil
	flag       bool   // the bool returned
	tt         html.TokenType
	err        error
}

func (c call) String() string {
	cut := func(s string) string {
		if len(s) > 200 {
			return fmt.Sprintf("%q… (%d bytes)", s[:200], len(s))
		}
		return strconv.Quote(s)
	}
	s := fmt.Sprintf("%s: %s (nil %v)", c.op, cut(c.b1), c.nil1)
	switch c.op {
	case "Next, Raw, Err":
		return fmt.Sprintf("%s, token %v, err %v", s, c.tt, c.err)
	case "TagAttr":
		return fmt.Sprintf("%s = %s (nil %v), more %v", s, cut(c.b2), c.nil2, c.flag)
	case "TagName":
		return fmt.Sprintf("%s, hasAttr %v", s, c.flag)
	case "Text", "Raw after":
		return s
	}
	return fmt.Sprintf("%s, was %s", s, cut(c.b2))
}

// observation is what a tokenizer returned for one token, call by call,
// and the slices it returned, to check they still hold what they held
// when returned once the token is done with.
type observation struct {
	log   []call
	held  [][]byte
	wants []string
	name  string // the first TagName
}

// hold records returned slices.
func (o *observation) hold(bs ...[]byte) {
	for _, b := range bs {
		o.held = append(o.held, b)
		o.wants = append(o.wants, string(b))
	}
}

// observe reads the current token of z, tt, with the calls c. z is
// htmltok's if htmltok: then Raw after the accessors is compared even if
// Text was called, and a byte is appended to each slice returned (which
// must not change the others, nor the body).
func observe(z tokenizer, tt html.TokenType, c calls, htmltok bool) *observation {
	o := &observation{}
	raw := z.Raw()
	rawWas := string(raw)
	o.log = append(o.log, call{op: "Next, Raw, Err", tt: tt, b1: rawWas, nil1: raw == nil, err: z.Err()})
	for range c.texts {
		text := z.Text()
		o.hold(text)
		o.log = append(o.log, call{op: "Text", b1: string(text), nil1: text == nil})
	}
	tagAttrs := func() {
		for i := 0; c.attrs < 0 || i < c.attrs; i++ {
			k, v, more := z.TagAttr()
			o.hold(k, v)
			o.log = append(o.log, call{op: "TagAttr", b1: string(k), nil1: k == nil, b2: string(v), nil2: v == nil, flag: more})
			if k == nil {
				return
			}
		}
	}
	if c.attrFirst {
		tagAttrs()
	}
	for i := range c.names {
		name, hasAttr := z.TagName()
		if i == 0 {
			o.name = string(name)
		}
		o.hold(name)
		o.log = append(o.log, call{op: "TagName", b1: string(name), nil1: name == nil, flag: hasAttr})
	}
	if !c.attrFirst {
		tagAttrs()
	}
	// x/net/html's Text converts newlines and unescapes in its buffer, in
	// place: what Raw returned, and returns, changes (htmltok's does not).
	// TagName and TagAttr copy.
	rawStays := c.texts == 0 || tt != html.TextToken && tt != html.CommentToken && tt != html.DoctypeToken
	if rawStays {
		o.log = append(o.log, call{op: "Raw after", b1: string(z.Raw())})
	}
	if htmltok && string(z.Raw()) != rawWas {
		o.log = append(o.log, call{op: "Raw after the accessors differs from Raw", b1: string(z.Raw()), b2: rawWas})
	}
	if htmltok {
		_ = append(raw, '!') // a byte: within the capacity if there is any
		for _, b := range o.held {
			_ = append(b, '!')
		}
	}
	if (htmltok || rawStays) && string(raw) != rawWas {
		o.log = append(o.log, call{op: "Raw changed during the token", b1: string(raw), b2: rawWas})
	}
	for i, b := range o.held {
		if string(b) != o.wants[i] {
			o.log = append(o.log, call{op: fmt.Sprintf("returned slice %d changed during the token", i), b1: string(b), b2: o.wants[i]})
		}
	}
	return o
}

// compare runs x/net/html's tokenizer and htmltok's over body side by side
// in mode m and fails at the first token where they differ in anything
// (see FuzzTokenizerMatchesXNetHTML). It returns the number of tokens.
func compare(t testing.TB, body []byte, m mode) int {
	t.Helper()
	orig := bytes.Clone(body)
	want := html.NewTokenizer(bytes.NewReader(body))
	got := htmltok.New(body)
	d := newDriver(m, body)
	var history []string // the previous tokens' Raw, for the failure message
	for n := 1; ; n++ {
		c := d.next()
		want.AllowCDATA(c.cdata)
		got.AllowCDATA(c.cdata)
		wt, gt := want.Next(), got.Next()
		w, g := observe(want, wt, c, false), observe(got, gt, c, true)
		if !slices.Equal(w.log, g.log) {
			t.Fatalf("input %s, mode %v: token %d differs (calls %+v)\nprevious tokens: %q\nx/net/html:\n\t%s\nhtmltok:\n\t%s",
				short(body), m, n, c, history, printLog(w.log), printLog(g.log))
		}
		if wt == html.ErrorToken {
			if !bytes.Equal(body, orig) {
				t.Fatalf("input %s, mode %v: htmltok modified the body: %s", short(orig), m, short(body))
			}
			return n
		}
		if n > len(body)+1 {
			t.Fatalf("input %s, mode %v: more tokens (%d) than bytes", short(body), m, n)
		}
		history = append(history, string(want.Raw()))
		if len(history) > 5 {
			history = history[1:]
		}
		d.after(&c, wt, w.name)
		if c.notRaw {
			want.NextIsNotRawText()
			got.NextIsNotRawText()
		}
	}
}

// short quotes b, or its beginning if it is long.
func short(b []byte) string {
	if len(b) <= 300 {
		return strconv.Quote(string(b))
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:300], len(b))
}

// printLog is an observation's log for a failure message.
func printLog(log []call) string {
	var b strings.Builder
	for i, c := range log {
		if i > 0 {
			b.WriteString("\n\t")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// extractTestdata is the extractor's test pages and fuzz corpus.
const extractTestdata = "../extract/testdata"

// testdataInputs is every file under the extractor's testdata: pages (the
// GBK and malformed ones too), golden files, and the inputs of its fuzz
// corpora (decoded).
func testdataInputs(t testing.TB) map[string][]byte {
	inputs := map[string][]byte{}
	err := filepath.WalkDir(extractTestdata, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "fuzz") {
			vals, err := decodeCorpusFile(b)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for i, v := range vals {
				inputs[fmt.Sprintf("%s#%d", path, i)] = v
			}
			return nil
		}
		inputs[path] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 20 {
		t.Fatalf("%d files under %s", len(inputs), extractTestdata)
	}
	return inputs
}

// decodeCorpusFile returns the []byte and string values of a "go test fuzz
// v1" corpus file.
func decodeCorpusFile(b []byte) ([][]byte, error) {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) == 0 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a fuzz corpus file")
	}
	var vals [][]byte
	for _, line := range lines[1:] {
		line = strings.TrimSpace(line)
		for _, prefix := range []string{"[]byte(", "string("} {
			if lit, ok := strings.CutPrefix(line, prefix); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", line, err)
				}
				vals = append(vals, []byte(s))
			}
		}
	}
	return vals, nil
}

// trickyInputs are hand-written inputs for the tokenizer's corners. Each
// prefix of each is an input too (TestTokenizerMatchesXNetHTML).
var trickyInputs = []string{
	"", "plain", "<", "x<", "x</", "x<!", "<>", "<<a>>", "<a<b>", "a<1b", "a< b", "a <3 b",
	// Raw text, RCDATA, script data, plaintext.
	"<script>a</script>", "<script>a</scrip", "<script>a</script", "<script>a</SCRIPT >",
	"<SCRIPT>x</ScRiPt/>", "<script>", "<script></script>", "<script>\x00\r\n&amp;</script>",
	"<script><!--<script>x</script>-->y</script>", "<script><!--<script>x</script>y</script>",
	"<script><!-- --></script>", "<script><!--<scriptx></script>", "<script><!--</script>",
	"<script><!--<script>--></script>", "<script><!-<a></script>", "<script><!--<SCRIPT/>--><</script>",
	"<script><!--<script>-<</script>--></script>", "<script><!--<script>--!></script>",
	"<script><!--<a-></script>", "<script>if (a<b && c</d) {}</script>",
	"<script><!--<1<script>x</script>y</script>", "<script><!---<1<script>x</script>y</script>",
	"<script><!-- -<script>x</script>y</script>", "<script><!--<script>x<1</script>y</script>",
	"<script><!--<script>x--<</script>y</script>", "<script><!--<script/x</script>y</script>",
	"<script><!--<script>x-</script>y-->z</script>", "<script><!--<ScRiPt\n>x</SCRIPT\t>y</script>",
	"<style>p{}</style>", "<style><!--</style>-->", "<style>a</styles></style>",
	"<textarea>a&amp;b<b></textarea>", "<textarea>&lt", "<textarea>\r\n\x00x</textarea>",
	"<title>a&amp;b&lt</title>", "<TITLE>x</TiTlE>", "<title></title>", "<titles>x<b>",
	"<xmp><a></xmp>", "<iframe><a></iframe>", "<noembed><a></noembed>", "<noframes><a></noframes>",
	"<noscript><a href=x></noscript>", "<plaintext><a></plaintext>", "<plaintext>", "<PLAINTEXT>x\x00\r\n&amp;",
	"<plaintextx>y", "<scriptx>y</scriptx>", "<script/>x</script>", "<title/>x</title>",
	// Comments, doctypes, CDATA, processing instructions, bogus comments.
	"<!", "<!-", "<!--", "<!---", "<!---->", "<!-->", "<!--->", "<!-- a -->", "<!-- a --!>",
	"<!-- a --!-->", "<!-- a --!", "<!-- a --", "<!-- a -", "<!--a--b-->", "<!--a--!b-->",
	"<!-- \x00 \r\n \r -->", "<!-- &amp; -->", "<!--<!-- -->-->", "<!a bogus>", "<!>", "<!x",
	"<!a\x00\r\n&amp;>", "<?xml version='1.0'?>", "<?", "<?>", "<!DOCTYPE html>", "<!doctype html>",
	"<!DoCtYpE HTML PUBLIC \"-//W3C//DTD HTML 4.01//EN\">", "<!DOCTYPE", "<!DOCTYPE ", "<!DOCTY",
	"<!DOCTYPEhtml>", "<!DOCTYPE html", "<!DOCTYPE \r\nhtml\x00&amp;>", "<!DOCTYPE>",
	"<![CDATA[x]]>", "<![CDATA[x]]", "<![CDATA[", "<![CDA", "<![CDATA[a]b]]c]]]>d", "<![cdata[x]]>",
	"<svg><![CDATA[x<y]]></svg>", "<math><![CDATA[\x00\r\n&amp;]]></math>", "<svg><![CDATA[",
	"<svg><title><a></title></svg>", "<math><mi><style>x</style></mi></math>", "<svg><script>a<b></script>",
	"<svg><style>a<b></style><textarea>c<d></textarea></svg><textarea>e<f></textarea>",
	// End tags.
	"</", "</>", "</ >", "</a", "</a ", "</a b=c>", "</a b='>'>", "</1>", "</-->x", "</A\x00>", "</a/>",
	// Tags and attributes.
	"<a", "<a ", "<a b", "<a b=", "<a b='", "<a b=\"c", "<a b=c", "<a b=c ", "<a b=c/", "<a/", "<a/>",
	"<a >", "<br/>", "<br />", "<p a=/>", "<p a=b/>", "<p a='b'/>", "<p a/>", "<p a />", "<p a= />",
	"<a\x00b c\x00d=e\x00f>", "<A HREF=X>", "<DIV CLASS='A' ID=B>", "<ÄB ÇD=É>",
	"<a href=\"x\" HREF=\"y\" Href=z>", "<a b=1 b=2 B=3>", "<a b\x00=1 b\x00=2 b\ufffd=3>",
	"<a =b>", "<a ==b>", "<a = b>", "<a b = c>", "<a b= >", "<a b=>", "<a b='c'd=e>", "<a b=\"c\"/>",
	"<a/b/c>", "<a b/c=d>", "<a b='c\r\nd\re'>", "<a b=\"\r\n\x00&amp;\">", "<a\tb\nc\fd\re>",
	"<a href=x>text</a>", "<a b=c\x00>", "<a 'b'=c \"d\"=e>", "<a b=c=d>", "<a b=`c`>",
	// Text: NUL, CR, entities.
	"a\x00b", "a\r\nb\rc\n\r", "\r", "\r\n", "\n\r", "\r\r\n\n", "<p>\t\n\f\r </p>",
	"&amp;&lt;&gt;&quot;&#39;&#x27;&nbsp;", "&amp &lt &gt &notit; &notin; &not", "&ampx &ampamp;",
	"&#0; &#x0; &#128; &#x80; &#x9F; &#xD800; &#x110000; &#99999999999; &#x10FFFF;",
	"&#; &#x; &# &#X41 &#65a", "&", "&a", "&amp", "&AMP;", "&nGt; &nLt; &NotEqualTilde; &nGt",
	"&acE; &bne; &fjlig;", "a&b&c;&d=&e", "&\x00amp;", "&am\r\np;",
	// Entities in attributes: with and without ';', followed by '=' or an
	// alphanumeric.
	"<a href='?a=1&b=2&amp;c=3&copy=4&copy;5&lt=6&ltx=7&lt;8'>", "<a href=\"&amp=\">", "<a href='&ampx'>",
	"<a href='&amp'>", "<a href=&amp>", "<a t='&notit;&notin;&not'>", "<a t='&#65&#x41;&#x;&#'>",
	"<a t='&nGt;&nGt&acE;'>", "<a t=\"&amp;&\">", "<a t=&\x00lt;>", "<a t='&lt\r\n&gt'>",
}

// bigInputs are generated inputs: huge attributes, many attributes (and
// duplicates past the point where htmltok looks names up in a map), long
// text, comments and scripts.
func bigInputs() map[string][]byte {
	var many, dups strings.Builder
	many.WriteString("<a")
	for i := range 1000 {
		fmt.Fprintf(&many, " a%d=%d A%d=x", i%700, i, i%300)
	}
	many.WriteString(">x</a>")
	dups.WriteString("<p")
	for i := range 40 {
		fmt.Fprintf(&dups, " k%d=v%d K%d K%d=w", i, i, i/2, i/3)
	}
	dups.WriteString(" k0 = z/>")
	huge := strings.Repeat("x&amp;y\r\n\x00", 20000)
	return map[string][]byte{
		"huge attribute":         []byte(`<a href="` + strings.Repeat("x", 200000) + `" title='` + huge + `'>t</a>`),
		"huge unquoted":          []byte(`<a href=` + strings.Repeat("y", 100000)),
		"huge unterminated":      []byte(`<a href="` + huge),
		"many attributes":        []byte(many.String()),
		"duplicate attributes":   []byte(dups.String()),
		"many attributes at EOF": []byte(strings.TrimSuffix(many.String(), ">x</a>")),
		"long text":              []byte(strings.Repeat("text &lt; more text\r\n", 10000)),
		"long comment":           []byte("<!--" + strings.Repeat("- -- --! <!-- x", 5000) + "-->"),
		"long script":            []byte("<script><!--<script>" + strings.Repeat("a<b -- </scrip", 5000) + "</script>--></script>"),
		"every byte":             everyByte(),
	}
}

func everyByte() []byte {
	b := make([]byte, 0, 4*256)
	for c := range 256 {
		b = append(b, '<', byte(c), 'a', ' ')
	}
	for c := range 256 {
		b = append(b, byte(c))
	}
	return b
}

// TestTokenizerMatchesXNetHTML: on every testdata file of the extractor,
// on the tricky inputs and all their prefixes, on prefixes of the testdata
// files and on big generated inputs, in each mode, htmltok's tokens are
// x/net/html's (see FuzzTokenizerMatchesXNetHTML).
func TestTokenizerMatchesXNetHTML(t *testing.T) {
	t.Run("testdata", func(t *testing.T) {
		inputs := testdataInputs(t)
		for _, name := range slices.Sorted(maps.Keys(inputs)) {
			body := inputs[name]
			t.Run(filepath.Base(name), func(t *testing.T) {
				for m := range nModes {
					compare(t, body, m)
				}
				// Cut at random places: the tokens at the end of the input.
				rnd := rand.New(rand.NewPCG(uint64(len(body)), 1))
				for range min(64, len(body)) {
					cut := rnd.IntN(len(body))
					compare(t, body[:cut], modePlain)
					compare(t, body[:cut], modeForeign)
				}
			})
		}
	})
	t.Run("tricky", func(t *testing.T) {
		for _, in := range trickyInputs {
			for i := range len(in) + 1 {
				for m := range nModes {
					compare(t, []byte(in[:i]), m)
				}
			}
		}
	})
	t.Run("big", func(t *testing.T) {
		for name, body := range bigInputs() {
			t.Run(name, func(t *testing.T) {
				for m := range nModes {
					compare(t, body, m)
				}
			})
		}
	})
}

// TestTokenizerSlices: what TagName, TagAttr and Text return are the body's
// bytes when there is nothing to replace (no copy), copies otherwise, and
// the ones returned for one token stay as they are while the token is read.
func TestTokenizerSlices(t *testing.T) {
	body := []byte(`<a href="/x?a=1&amp;b=2" REL=next title=plain data-x="A&lt;B">t&amp;u</A>`)
	z := htmltok.New(body)
	inBody := func(b []byte) bool {
		if len(b) == 0 {
			return false
		}
		p, start := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&body[0]))
		return start <= p && p < start+uintptr(len(body))
	}
	if tt := z.Next(); tt != html.StartTagToken {
		t.Fatalf("Next = %v", tt)
	}
	name, _ := z.TagName()
	type kv struct {
		k, v   []byte
		inBody [2]bool
	}
	var attrs []kv
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		attrs = append(attrs, kv{k, v, [2]bool{inBody(k), inBody(v)}})
	}
	want := []struct {
		k, v   string
		inBody [2]bool
	}{
		{"href", "/x?a=1&b=2", [2]bool{true, false}},
		{"rel", "next", [2]bool{false, true}},
		{"title", "plain", [2]bool{true, true}},
		{"data-x", "A<B", [2]bool{true, false}},
	}
	if string(name) != "a" || !inBody(name) {
		t.Errorf("TagName %q, in the body %v", name, inBody(name))
	}
	if len(attrs) != len(want) {
		t.Fatalf("%d attributes, want %d", len(attrs), len(want))
	}
	for i, w := range want {
		a := attrs[i]
		if string(a.k) != w.k || string(a.v) != w.v || a.inBody != w.inBody {
			t.Errorf("attribute %d: %q=%q (in the body %v), want %q=%q (%v)", i, a.k, a.v, a.inBody, w.k, w.v, w.inBody)
		}
	}
	if tt := z.Next(); tt != html.TextToken {
		t.Fatalf("Next = %v", tt)
	}
	if text := z.Text(); string(text) != "t&u" || inBody(text) {
		t.Errorf("Text %q, in the body %v", text, inBody(text))
	}
	if tt := z.Next(); tt != html.EndTagToken {
		t.Fatalf("Next = %v", tt)
	}
	if name, _ := z.TagName(); string(name) != "a" || inBody(name) {
		t.Errorf("TagName %q, in the body %v", name, inBody(name))
	}
	if tt := z.Next(); tt != html.ErrorToken || z.Err() == nil {
		t.Fatalf("Next = %v, Err %v", tt, z.Err())
	}
}

// TestTokenizerAllocs: reading a page as the extractor does allocates the
// Tokenizer and little more (the buffers it reuses from token to token).
func TestTokenizerAllocs(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(extractTestdata, "websim_article.html"))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		tokenize(htmltok.New(page))
	})
	if allocs > 10 {
		t.Errorf("%v allocations per page, want at most 10", allocs)
	}
}

// FuzzTokenizerMatchesXNetHTML runs x/net/html v0.62.0's Tokenizer (over a
// bytes.Reader) and htmltok's over the same input side by side.
//
// Invariant: neither panics, and for every token, driven the same way
// (AllowCDATA before each Next and NextIsNotRawText after a start tag: never,
// as the extractor does for <svg> and <math>, or at random; Text, TagName
// and TagAttr called all or some, in either order), both return the same
// token type, the same Raw, Err, Text (each call), TagName (name and
// hasAttr, each call) and TagAttr (key, value, more and the nil-ness of key
// and value, each call), and the same Raw after the accessors when Text was
// not called (x/net/html's Text rewrites its buffer in place); the stream
// ends with the same ErrorToken and Err (io.EOF) at the same place; the
// slices htmltok returned for a token do not change while the token is read;
// and htmltok never writes to the body.
func FuzzTokenizerMatchesXNetHTML(f *testing.F) {
	inputs := testdataInputs(f)
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		f.Add(inputs[name])
	}
	for _, in := range trickyInputs {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for m := range nModes {
			compare(t, body, m)
		}
	})
}

// tokenize reads every token as the extractor does: the text of text
// tokens and doctypes, the name and attributes of tags.
func tokenize(z tokenizer) (n int) {
	for {
		z.AllowCDATA(false)
		switch z.Next() {
		case html.ErrorToken:
			return n
		case html.TextToken, html.DoctypeToken:
			n += len(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			n += len(name)
			for more := true; more; {
				var k, v []byte
				k, v, more = z.TagAttr()
				n += len(k) + len(v)
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			n += len(name)
		}
	}
}

// BenchmarkTokenize reads testdata/websim_article.html of the extractor
// (22 KiB) as the extractor does, with x/net/html's tokenizer and with
// htmltok's.
func BenchmarkTokenize(b *testing.B) {
	page, err := os.ReadFile(filepath.Join(extractTestdata, "websim_article.html"))
	if err != nil {
		b.Fatal(err)
	}
	want := tokenize(html.NewTokenizer(bytes.NewReader(page)))
	for _, tt := range []struct {
		name string
		new  func() tokenizer
	}{
		{"xnethtml", func() tokenizer { return html.NewTokenizer(bytes.NewReader(page)) }},
		{"htmltok", func() tokenizer { return htmltok.New(page) }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if n := tokenize(tt.new()); n != want {
					b.Fatalf("%d bytes of tokens, want %d", n, want)
				}
			}
		})
	}
}
