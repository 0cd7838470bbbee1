package extract

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

const diffPageURL = "https://Example.com/dir/sub/page.html?q=1#ignored"

// bothPaths runs the streaming and the DOM extractor on body. The
// streaming one reads views of body (htmltok's): it must leave it as it was.
func bothPaths(t testing.TB, body []byte, opts Options) (stream, dom Result) {
	t.Helper()
	opts = opts.withDefaults()
	page, err := urlcanon.Canonicalize(diffPageURL)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(body)
	stream = extractStream(page, body, opts)
	if !bytes.Equal(body, orig) {
		t.Fatalf("the streaming extractor modified the body: %q, was %q", body, orig)
	}
	return stream, extractDOM(page, body, opts)
}

// diffResults lists how two results differ, field by field.
func diffResults(stream, dom Result) []string {
	var diffs []string
	check := func(field string, s, d any) {
		if !reflect.DeepEqual(s, d) {
			diffs = append(diffs, fmt.Sprintf("%s:\n  stream %#v\n  dom    %#v", field, s, d))
		}
	}
	check("title", stream.Title, dom.Title)
	check("description", stream.Description, dom.Description)
	check("canonical", stream.Canonical, dom.Canonical)
	check("language", stream.Language, dom.Language)
	check("nofollow", stream.NoFollow, dom.NoFollow)
	check("noindex", stream.NoIndex, dom.NoIndex)
	check("links", stream.Links, dom.Links)
	check("dropped", stream.Dropped, dom.Dropped)
	check("text", stream.Text, dom.Text)
	check("text_truncated", stream.TextTruncated, dom.TextTruncated)
	check("json_ld", stream.JSONLD, dom.JSONLD)
	check("opengraph", stream.OpenGraph, dom.OpenGraph)
	check("microdata", stream.Microdata, dom.Microdata)
	check("structured_errors", [3]any{stream.StructuredErrors, stream.StructuredError, stream.StructuredDropped},
		[3]any{dom.StructuredErrors, dom.StructuredError, dom.StructuredDropped})
	return diffs
}

// TestStreamMatchesDOM: on every testdata page and on generated realistic
// pages the streaming extractor returns what the DOM path returns.
func TestStreamMatchesDOM(t *testing.T) {
	type testCase struct {
		name string
		body []byte
	}
	var tests []testCase
	files, err := filepath.Glob(filepath.Join("testdata", "*.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, testCase{filepath.Base(f), body})
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "gbk.html.gbk"))
	if err != nil {
		t.Fatal(err)
	}
	gbk, err := simplifiedchinese.GBK.NewDecoder().Bytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, testCase{"gbk.html.gbk", gbk})
	for seed := range uint64(40) {
		tests = append(tests, testCase{fmt.Sprintf("generated-%d", seed), realisticPage(rand.New(rand.NewPCG(seed, 7)))})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, opts := range []Options{{}, {MaxOutlinks: 5, MaxTextBytes: 200}, {NoFollow: true}} {
				stream, dom := bothPaths(t, tt.body, opts)
				if d := diffResults(stream, dom); len(d) > 0 {
					t.Errorf("options %+v: streaming result differs from the DOM's:\n%s", opts, strings.Join(d, "\n"))
				}
			}
		})
	}
}

// TestStreamTreeBuilding pins tree builder behaviours that the stream
// follows, each compared with the DOM path.
func TestStreamTreeBuilding(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"head ends at text", `<html><head><title>T</title>text <a href=a>a</a>`},
		{"head ends at body element", `<head><meta name=description content=d><div>x<link rel=next href=n></div>`},
		{"meta after head", `<html><head></head><meta name=robots content=noindex><body>x`},
		{"base after links", `<a href=x>x</a><p>y<base href="/other/"><a href=z>z</a>`},
		{"second base ignored", `<base href=/one/><base href=/two/><a href=x>x</a>`},
		{"unclosed p", `<p>one<p>two<div>three</div>four<p>five`},
		{"unclosed li", `<ul><li>one<li>two<ul><li>inner</ul><li>three</ul>after`},
		{"unclosed li with links", "<ul><li><a href=1>one</a>\n<li><a href=2>two</a>\n</ul>"},
		{"a leaks out of p", `<p><a href=leak>in p</p><p>more</p>`},
		{"a leaks out of li", "<ul><li><a href=leak>one</li>\n<li>two</li></ul>"},
		{"a closes a", `<a href=1>one<a href=2>two</a>three`},
		{"a in a with span", `<a href=1><span>one<a href=2>two</a></span>`},
		{"dl", `<dl><dt>term<dd>def<dt>term2<dd>def2</dl>`},
		{"headings", `<h1>one<h2>two</h1>three`},
		{"stray end tags", `<p>a</div>b</span>c</p>d</p>e`},
		{"br end tag", `a</br>b`},
		{"void elements", `a<br>b<hr>c<img alt=i>d<input>e<wbr>f`},
		{"raw text", `<script>a<b</script><style>c</style><textarea>t<a href=no></textarea><xmp><a href=no2></xmp><title>x</title>`},
		{"noscript is raw", `<noscript><a href=ns>ns</a></noscript><a href=y>y</a>`},
		{"iframe content is raw", `<iframe src=f title="F t">fallback <a href=no>x</a></iframe>z`},
		{"plaintext", `<p>a<plaintext><a href=no>x</a>`},
		{"entities", `<p title="&amp;">a&amp;b &lt;c&gt; &eacute;&nbsp;d &#x41;&#66; &notanentity;</p><a href="/x?a=1&amp;b=2&copy=3">e</a>`},
		{"nul and crlf", "<p>a\x00b\r\nc\rd</p><a href=\"x\x00y\">l\x00nk</a><title>t\x00</title>"},
		{"svg", `<p>a<svg><a href=svg1>s</a><title>svg title</title><text>t</text></svg>b<title>T</title><a href=h>h</a>`},
		{"svg foreignObject", `<svg><foreignObject><a href=fo>in fo</a><p>x</p></foreignObject><a href=no>no</a></svg>`},
		{"svg breakout", `<svg><g><p>breaks out<a href=out>o</a></svg>`},
		{"math", `<math><mi><a href=mi>mi</a></mi><mo>+</mo><annotation-xml encoding="text/html"><a href=ax>ax</a></annotation-xml></math>`},
		{"template", `<template><a href=t1>t</a><p>hidden</p><meta name=description content=tdesc></template><a href=v>v</a>`},
		{"template in head", `<head><template><a href=t>t</a><div>x</div></template><title>after</title></head>b`},
		{"object", `<object data=x><a href=of>fallback</a><p>hidden</p></object>`},
		{"frameset", `<frameset><frame src=a title=A><frameset><frame src=b></frameset><div><a href=no>x</a></div></frameset><frame src=c>`},
		{"frame in body ignored", `<body><frame src=no><a href=y>y</a>`},
		{"body background merged", `<a href=x>x</a><body background=bg.gif>`},
		{"html lang merged", `<p>x<html lang=fr xml:lang=de>`},
		{"xml lang", `<html lang=" " xml:lang="EN-us">`},
		{"title in body", `<body><title>late</title><title>second</title>`},
		{"empty title first", `<title></title><title>second</title>`},
		{"self-closing title", `<title/>x</title>`},
		{"anchor image alt", `<a href=i><img alt=""><img alt="  the alt  "><img alt=other></a>`},
		{"anchor blocks", `<a href=b><div>one</div><p>two</p>three<script>no</script></a>`},
		{"anchor object text", `<object><a href=o><div>visible in anchor</div></a></object>`},
		{"area and map", `<map><area href=a alt="Area  alt"><area nohref></map>`},
		{"link rels", `<link rel="Next NoFollow" href=n><link rel="canonical" href=c><link rel=canonical href=c2><link rel="stylesheet alternate" href=s>`},
		{"meta refresh", `<meta http-equiv=Refresh content="0; url=r.html"><meta http-equiv=refresh content=5>`},
		{"robots", `<meta name=ROBOTS content="noindex"><meta name=robots content=nofollow><a href=x>x</a>`},
		{"applet", `<applet code=A.class codebase=cb/><applet code=B.class codebase="javascript:x"></applet>`},
		{"table simple", `<table><tr><td>a<td>b<tr><th>c</table>d`},
		{"table implied tbody", `<table><td>cell</td></table>`},
		{"table foster text", `<table>foster<tr><td>cell</td></tr></table>`},
		{"table foster link", `<p>before<table><a href=f>fostered</a><tr><td><a href=c>cell</a></table>after`},
		{"nested tables", `<table><tr><td>a<table><tr><td>b</table>c</td></tr></table>`},
		{"table caption", `<table><caption>cap</caption><tr><td>x</td></tr></table>`},
		{"table hidden input", `<table><input type=hidden><tr><td>x</table>`},
		{"a reconstructed in cell", `<table><tr><td><a href=x>a</td><td>b</td></tr></table>c`},
		{"form", `<form><input name=q><button>Go</button></form>after`},
		{"select", `<select><option>one<option>two</select>after`},
		{"ruby", `<ruby>漢<rt>kan</rt>字<rp>(</rp><rt>ji</rt></ruby>`},
		{"after html", `<body>x</body></html><a href=late>late</a> text`},
		{"comments and doctype", `<!DOCTYPE html><!-- <a href=no> --><p>a<!-- c -->b</p>`},
		{"custom elements", `<my-card><my-title>t</my-title><a href=c>c</a></my-card>`},
		{"formatting", `<b>bold <i>both</b> italic</i> <u>u</u>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, dom := bothPaths(t, []byte(tt.body), Options{})
			if d := diffResults(stream, dom); len(d) > 0 {
				t.Errorf("%s\nstreaming result differs from the DOM's:\n%s", tt.body, strings.Join(d, "\n"))
			}
		})
	}
}

// addTestdata seeds f with the pages of testdata/.
func addTestdata(f *testing.F) {
	f.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.html"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
}

// FuzzStreamMatchesDOM compares the streaming extractor with the DOM path.
// Invariants: neither panics; on every input both find the same set of
// link URLs (by dedup key) and the same title, description, language,
// canonical and robots flags; on inputs that are well formed (see
// wellFormed) links (URLs, order, anchors), drops and text are equal too.
func FuzzStreamMatchesDOM(f *testing.F) {
	addTestdata(f)
	for seed := range uint64(4) {
		f.Add(realisticPage(rand.New(rand.NewPCG(seed, 9))))
	}
	f.Add([]byte(`<p><a href=x>a</p>b<table>c<tr><td><a href=y>d</table>`))
	f.Add([]byte(`<svg><foreignObject><a href=fo>x</a></foreignObject></svg><template><a href=t>t</a></template>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(bytes.TrimSpace(body)) == 0 {
			return
		}
		opts := Options{MaxTextBytes: 4096}
		stream, dom := bothPaths(t, body, opts)
		if wellFormed(body) {
			if d := diffResults(stream, dom); len(d) > 0 {
				t.Fatalf("well-formed input, streaming result differs from the DOM's:\n%s", strings.Join(d, "\n"))
			}
			return
		}
		if s, d := linkKeys(stream), linkKeys(dom); !slices.Equal(s, d) {
			t.Errorf("link sets differ:\n  stream %q\n  dom    %q", s, d)
		}
		meta := func(r Result) [6]any {
			return [6]any{r.Title, r.Description, r.Language, r.Canonical, r.NoFollow, r.NoIndex}
		}
		if s, d := meta(stream), meta(dom); s != d {
			t.Errorf("metadata differs:\n  stream %q\n  dom    %q", s, d)
		}
	})
}

// linkKeys is the sorted set of the dedup keys of r's links.
func linkKeys(r Result) []string {
	var keys []string
	for _, l := range r.Links {
		keys = append(keys, urlcanon.Key(l.URL))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// wellFormed reports whether body is strictly nested HTML: every end tag
// closes the innermost open element (void elements have none; <p>, <li>,
// <dd> and <dt> may be left open, to be closed by a sibling or their
// parent's end tag), with no tables, foreign content, templates or
// framesets, whose rearrangements stream.go lists.
func wellFormed(body []byte) bool {
	z := html.NewTokenizer(bytes.NewReader(body))
	var stack []string
	for {
		switch z.Next() {
		case html.ErrorToken:
			return true
		case html.TextToken:
			if bytes.IndexByte(z.Raw(), 0) >= 0 {
				return false
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			n, _ := z.TagName()
			name := string(n)
			switch name {
			case "table", "tbody", "thead", "tfoot", "tr", "td", "th", "caption", "col", "colgroup",
				"svg", "math", "template", "frameset", "frame":
				return false
			}
			if voidElements[name] {
				continue
			}
			if name == "p" || name == "li" || name == "dd" || name == "dt" || name == "a" {
				// A sibling start closes the open one.
				if len(stack) > 0 && stack[len(stack)-1] == name {
					stack = stack[:len(stack)-1]
				}
			}
			stack = append(stack, name)
		case html.EndTagToken:
			n, _ := z.TagName()
			name := string(n)
			for len(stack) > 0 && stack[len(stack)-1] != name && impliedEnd[stack[len(stack)-1]] {
				stack = stack[:len(stack)-1]
			}
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
}

var voidElements = map[string]bool{
	"area": true, "base": true, "basefont": true, "bgsound": true, "br": true, "embed": true,
	"hr": true, "img": true, "input": true, "keygen": true, "link": true, "meta": true, "param": true,
	"source": true, "track": true, "wbr": true,
}

var impliedEnd = map[string]bool{"p": true, "li": true, "dd": true, "dt": true}

// realisticPage generates an article page of the kinds the crawler meets:
// navigation, paragraphs (some left unclosed), lists (some items left
// unclosed), tables, forms, scripts, styles, inline SVG with links,
// templates, a <base href> after the first links, entities, Chinese text.
func realisticPage(r *rand.Rand) []byte {
	var b bytes.Buffer
	words := []string{"crawler", "frontier", "politeness", "robots", "分布式", "网络爬虫", "抓取", "&amp;", "&lt;tag&gt;",
		"caf&eacute;", "&nbsp;", "naïve", "fetch", "链接", "parser", "&#8212;", "&quot;quoted&quot;"}
	sentence := func(n int) string {
		var s []string
		for range n {
			s = append(s, words[r.IntN(len(words))])
		}
		return strings.Join(s, " ")
	}
	link := func() string {
		refs := []string{"/articles/%d.html", "../rel/%d", "page%d.html?x=1&amp;y=2", "https://other.example.org/%d",
			"#frag%d", "javascript:void(%d)", "mailto:a%d@example.com", "//cdn.example.net/%d", "?page=%d"}
		ref := fmt.Sprintf(refs[r.IntN(len(refs))], r.IntN(30))
		rel := ""
		switch r.IntN(6) {
		case 0:
			rel = ` rel="nofollow"`
		case 1:
			rel = ` rel="Noopener  External"`
		}
		text := sentence(1 + r.IntN(3))
		if r.IntN(5) == 0 {
			text = fmt.Sprintf(`<img src="i.png" alt="%s">`, sentence(2))
		}
		return fmt.Sprintf(`<a href="%s"%s>%s</a>`, ref, rel, text)
	}
	b.WriteString("<!DOCTYPE html>\n<html lang=\"zh-CN\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", sentence(4))
	fmt.Fprintf(&b, "<meta name=\"description\" content=\"%s\">\n", sentence(8))
	if r.IntN(4) == 0 {
		b.WriteString("<meta name=\"robots\" content=\"noindex\">\n")
	}
	b.WriteString("<link rel=\"stylesheet\" href=\"/css/site.css\">\n<link rel=\"canonical\" href=\"/dir/sub/page.html\">\n")
	b.WriteString("<script>var a = '<a href=\"/in-script\">x</a>'; if (a < b && c > d) {}</script>\n")
	b.WriteString("<style>body > p { color: red } /* <a href=x> */</style>\n")
	if r.IntN(2) == 0 {
		b.WriteString("<noscript><img src=\"/pixel\"></noscript>\n")
	}
	b.WriteString("</head>\n<body>\n<header><nav><ul>\n")
	for range 3 + r.IntN(5) {
		b.WriteString("<li>" + link())
		if r.IntN(2) == 0 {
			b.WriteString("</li>")
		}
		b.WriteString("\n")
	}
	b.WriteString("</ul></nav></header>\n")
	if r.IntN(2) == 0 {
		b.WriteString("<base href=\"/base/dir/\">\n")
	}
	b.WriteString("<main><article>\n")
	fmt.Fprintf(&b, "<h1>%s</h1>\n", sentence(5))
	for range 5 + r.IntN(10) {
		switch r.IntN(9) {
		case 0, 1, 2:
			fmt.Fprintf(&b, "<p>%s %s %s", sentence(10), link(), sentence(6))
			if r.IntN(3) > 0 {
				b.WriteString("</p>")
			}
		case 3:
			b.WriteString("<ol>")
			for range 2 + r.IntN(4) {
				fmt.Fprintf(&b, "<li>%s %s", sentence(3), link())
				if r.IntN(2) == 0 {
					b.WriteString("</li>")
				}
				b.WriteString("\n")
			}
			b.WriteString("</ol>")
		case 4:
			b.WriteString("<table class=\"data\">\n<thead><tr><th>Name<th>Value</tr></thead>\n<tbody>\n")
			for range 2 + r.IntN(3) {
				fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>\n", sentence(2), link())
			}
			b.WriteString("</tbody></table>\n")
		case 5:
			fmt.Fprintf(&b, "<form action=\"/search\"><label>%s <input name=\"q\" value=\"x\"></label><select name=s><option>one<option selected>two</select><button type=submit>Go</button></form>\n", sentence(2))
		case 6:
			fmt.Fprintf(&b, "<figure><svg viewBox=\"0 0 10 10\"><a href=\"/svg-link\"><circle r=\"4\"/><text>%s</text></a><title>icon</title></svg><figcaption>%s</figcaption></figure>\n", sentence(1), sentence(3))
		case 7:
			fmt.Fprintf(&b, "<template id=\"row\"><tr><td>%s</td><td>%s</td></tr></template>\n", sentence(2), link())
		case 8:
			fmt.Fprintf(&b, "<blockquote>%s<br>%s</blockquote>\n<div class=\"ad\"><iframe src=\"/ads/%d\" title=\"Ad\"></iframe></div>\n", sentence(6), sentence(4), r.IntN(5))
		}
		b.WriteString("\n")
	}
	b.WriteString("</article></main>\n<footer><p>&copy; 2024 Example &mdash; ")
	b.WriteString(link() + " | " + link())
	b.WriteString("</p></footer>\n<script src=\"/js/app.js\"></script>\n</body>\n</html>\n")
	return b.Bytes()
}

// BenchmarkExtractPaths measures the streaming and the DOM path side by
// side on the same pages (the benchmark page and a websim article).
func BenchmarkExtractPaths(b *testing.B) {
	websim, err := os.ReadFile(filepath.Join("testdata", "websim_article.html"))
	if err != nil {
		b.Fatal(err)
	}
	pages := []struct {
		name string
		body []byte
	}{{"generated", realisticPage(rand.New(rand.NewPCG(1, 7)))}, {"websim", websim}}
	opts := Options{}.withDefaults()
	page, err := urlcanon.Canonicalize(diffPageURL)
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pages {
		for _, path := range []struct {
			name string
			fn   func(string, []byte, Options) Result
		}{{"stream", extractStream}, {"dom", extractDOM}} {
			b.Run(p.name+"/"+path.name, func(b *testing.B) {
				b.SetBytes(int64(len(p.body)))
				b.ReportAllocs()
				for b.Loop() {
					path.fn(page, p.body, opts)
				}
			})
		}
	}
}

// TestStreamDeepNesting: x/net/html's tree builder rejects documents nested
// deeper than 512 elements (the DOM path returns nothing); the stream
// extracts them.
func TestStreamDeepNesting(t *testing.T) {
	body := []byte(strings.Repeat("<div>", 600) + `deep <a href="/deep">link</a>`)
	stream, dom := bothPaths(t, body, Options{})
	if len(dom.Links) != 0 {
		t.Errorf("DOM path found %d links; x/net/html no longer rejects deep documents: update stream.go's comment", len(dom.Links))
	}
	if len(stream.Links) != 1 || stream.Links[0].URL != "https://example.com/deep" || stream.Text != "deep link" {
		t.Errorf("stream: links %+v, text %q", stream.Links, stream.Text)
	}
}

// TestResultsOutliveScratch: the streamer's buffers (text, title, raw
// links, anchors' text) are reused by the next page, so a result must hold
// copies. Results kept while later pages are extracted, on this goroutine
// and others, stay as they were, and each matches the DOM path's.
func TestResultsOutliveScratch(t *testing.T) {
	opts := Options{}.withDefaults()
	page, err := urlcanon.Canonicalize(diffPageURL)
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		res  Result
		want string // %#v of the result when it was returned
	}
	var all []kept
	for seed := range uint64(30) {
		body := realisticPage(rand.New(rand.NewPCG(seed, 11)))
		res := extractStream(page, body, opts)
		if d := diffResults(res, extractDOM(page, body, opts)); len(d) > 0 {
			t.Fatalf("page %d: streaming result differs from the DOM's:\n%s", seed, strings.Join(d, "\n"))
		}
		all = append(all, kept{res, fmt.Sprintf("%#v", res)})
		// Other goroutines take scratches too.
		done := make(chan struct{})
		go func() {
			defer close(done)
			extractStream(page, realisticPage(rand.New(rand.NewPCG(seed, 12))), opts)
		}()
		<-done
	}
	for i, k := range all {
		if got := fmt.Sprintf("%#v", k.res); got != k.want {
			t.Errorf("result of page %d changed after later pages were extracted", i)
		}
	}
}
