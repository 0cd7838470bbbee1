package rendersniff

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestNeedsRender: the shells that React, Vue, Angular, Nuxt, AngularJS
// and websim serve need a browser; server-rendered pages (Next.js, Nuxt
// and Gatsby with SSR, a blog with many scripts, a short page whose
// noscript is a tracking pixel) and non-HTML do not.
func TestNeedsRender(t *testing.T) {
	tests := []struct {
		name        string
		file        string // in testdata, or
		body        string // inline
		contentType string
		want        Verdict
	}{
		{name: "react create-react-app shell", file: "react-cra.html", want: Verdict{true, ReasonAppRoot}},
		{name: "vue cli shell", file: "vue-cli.html", want: Verdict{true, ReasonAppRoot}},
		{name: "angular shell", file: "angular.html", want: Verdict{true, ReasonAppRoot}},
		{name: "vite root with a loading spinner", file: "vite-loading.html", want: Verdict{true, ReasonAppRoot}},
		{name: "nuxt without ssr", file: "nuxt-spa.html", want: Verdict{true, ReasonAppRoot}},
		{name: "angularjs ng-app on body", file: "angularjs.html", want: Verdict{true, ReasonAppRoot}},
		// websim (deployments/local/internal/websim, which this module
		// cannot import): a shell of a script-built site, a copy that
		// websim's TestShellCopyInRendersniff keeps equal to what it
		// serves, and the server-rendered pages of its other sites.
		{name: "websim script-built shell", file: "websim-shell.html", want: Verdict{true, ReasonAppRoot}},
		{name: "websim article", file: "websim-article.html", want: Verdict{false, ReasonHasText}},
		{name: "websim article in gbk", file: "websim-article-gbk.html", want: Verdict{false, ReasonHasText}},
		{name: "websim index", file: "websim-index.html", want: Verdict{false, ReasonNoScripts}},
		{name: "websim list", file: "websim-list.html", want: Verdict{false, ReasonNoScripts}},
		{name: "websim calendar", file: "websim-calendar.html", want: Verdict{false, ReasonNoScripts}},
		{name: "next.js with ssr", file: "next-ssr.html", want: Verdict{false, ReasonHasText}},
		{name: "nuxt with ssr", file: "nuxt-ssr.html", want: Verdict{false, ReasonHasText}},
		{name: "gatsby with ssr", file: "gatsby-ssr.html", want: Verdict{false, ReasonHasText}},
		{name: "blog with many scripts", file: "blog.html", want: Verdict{false, ReasonHasText}},
		{name: "short page, noscript only a tracking pixel", file: "pixel-noscript.html", want: Verdict{false, ReasonLittleText}},

		{name: "json", body: `{"html":"<div id=\"app\"></div><script></script>"}`, contentType: "application/json", want: Verdict{false, ReasonNotHTML}},
		{name: "plain text that looks like a shell", body: `<div id="app"></div><script src="/a.js"></script>`, contentType: "text/plain; charset=utf-8", want: Verdict{false, ReasonNotHTML}},
		{name: "pdf without content type", body: "%PDF-1.7\n<div id=app></div><script>", want: Verdict{false, ReasonNotHTML}},
		{name: "shell without content type", body: "\ufeff  <!doctype html><div id=app></div><script src=/a.js></script>", want: Verdict{true, ReasonAppRoot}},
		{name: "xhtml content type", body: `<html><body><div id="root"/><script src="a.js"/></body></html>`, contentType: "Application/XHTML+XML", want: Verdict{true, ReasonAppRoot}},
		{name: "content type with parameters", body: `<div id="root"></div><script src="a.js"></script>`, contentType: " text/html ; charset=UTF-8", want: Verdict{true, ReasonAppRoot}},

		{name: "empty root, no executable script", body: `<div id="app"></div><script type="application/ld+json">{}</script><script type="importmap">{}</script>`, want: Verdict{false, ReasonNoScripts}},
		{name: "no scripts, no text", body: `<html><body><img src=a.png></body></html>`, want: Verdict{false, ReasonNoScripts}},
		{name: "upper-case tags", body: `<HTML><BODY><DIV ID="root"><DIV CLASS=x></DIV></DIV><SCRIPT SRC=/b.js></SCRIPT></BODY></HTML>`, want: Verdict{true, ReasonAppRoot}},
		{name: "root id is case-sensitive", body: `<div id="App"></div><script src=/b.js></script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{false, ReasonLittleText}},
		{name: "root in a comment", body: `<!-- <div id="root"></div> --><script src=/b.js></script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{false, ReasonLittleText}},
		{name: "root inside a script is not a root", body: `<script>document.write('<div id="app"></div>')</script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{false, ReasonLittleText}},
		{name: "data-reactroot", body: `<div data-reactroot=""></div><script src=/b.js></script>`, want: Verdict{true, ReasonAppRoot}},
		{name: "root holding text is not empty", body: `<div id="app"><h1>Opening hours</h1><p>Monday to Friday from nine to six, and on Saturdays from ten to two</p></div><script src=/b.js></script>`, want: Verdict{false, ReasonLittleText}},
		{name: "nested divs in an empty root", body: `<div id="root"><div><div></div></div><div></div></div><p>Footer note with some words here ok</p><script src=/b.js></script>`, want: Verdict{true, ReasonAppRoot}},
		{name: "noscript asking for javascript, no root", body: `<div id="main"></div><noscript><p>This site needs <b>JavaScript</b>.</p></noscript><script src=/b.js></script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{true, ReasonNoscript}},
		{name: "noscript asking to enable js", body: `<noscript>Please enable JS</noscript><script src=/b.js></script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{true, ReasonNoscript}},
		{name: "noscript naming javascript only in a tag", body: `<noscript><a href="javascript:void(0)">Menu</a></noscript><script src=/b.js></script><p>Welcome to the shop, browse our catalogue</p>`, want: Verdict{false, ReasonLittleText}},
		{name: "no text, scripts, no marker", body: `<html><head><script src=/b.js></script></head><body><h1>Hi</h1></body></html>`, want: Verdict{true, ReasonNoText}},
		{name: "text in a template does not count", body: `<template>` + strings.Repeat("hidden words ", 40) + `</template><div id="app"></div><script src=/b.js></script>`, want: Verdict{true, ReasonAppRoot}},
		{name: "text in noscript does not count", body: `<noscript>` + strings.Repeat("fallback words ", 40) + `</noscript><div id="app"></div><script src=/b.js></script>`, want: Verdict{true, ReasonAppRoot}},
		{name: "text in a textarea counts", body: `<textarea>` + strings.Repeat("visible words ", 40) + `</textarea><div id="app"></div><script src=/b.js></script>`, want: Verdict{false, ReasonHasText}},
		{name: "a script whose text holds a fake end tag", body: `<script>var s = "</scripty>` + strings.Repeat("code ", 60) + `";</script><div id="app"></div>`, want: Verdict{true, ReasonAppRoot}},
		{name: "text before the root decides first", body: `<p>` + strings.Repeat("word ", 50) + `</p><div id="app"></div><script src=/b.js></script>`, want: Verdict{false, ReasonHasText}},
		{name: "head ended by a body element", body: `<head><script src=/b.js></script><div id=app></div>Loading</head>`, want: Verdict{true, ReasonAppRoot}},
		{name: "unterminated attribute", body: `<div id="app></div><script src=/b.js></script>`, want: Verdict{false, ReasonNoScripts}},
		{name: "empty", body: ``, contentType: "text/html", want: Verdict{false, ReasonNoScripts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			ct := tt.contentType
			if tt.file != "" {
				body = readFile(t, tt.file)
				ct = "text/html; charset=utf-8"
			} else if ct == "" && strings.HasPrefix(tt.body, "<") {
				ct = "text/html"
			}
			if got := NeedsRender(body, ct); got != tt.want {
				t.Errorf("NeedsRender = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestScanMatchesTokenizer: on every page of testdata, the scanner's
// count of visible text and of executable scripts (read to the end) are
// those that golang.org/x/net/html's tokenizer gives.
func TestScanMatchesTokenizer(t *testing.T) {
	files, err := filepath.Glob("testdata/*.html")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		body := readFile(t, filepath.Base(f))
		s := scanner{limit: len(body) + 1}
		s.scan(body)
		text, scripts := tokenize(body)
		if s.text != text || s.scripts != scripts {
			t.Errorf("%s: scanner saw %d text bytes and %d scripts, the tokenizer %d and %d", f, s.text, s.scripts, text, scripts)
		}
	}
}

// tokenize counts the visible text bytes (as written) and executable
// scripts of body with x/net/html's tokenizer.
func tokenize(body []byte) (text, scripts int) {
	z := html.NewTokenizer(bytes.NewReader(body))
	var hidden []string // open elements whose text is not visible
	for {
		switch z.Next() {
		case html.ErrorToken:
			return text, scripts
		case html.TextToken:
			if len(hidden) == 0 {
				for _, c := range z.Raw() {
					if !isSpace(c) {
						text++
					}
				}
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			n := string(name)
			if n == "script" {
				typ, has := "", false
				for more {
					var k, v []byte
					k, v, more = z.TagAttr()
					if string(k) == "type" {
						typ, has = string(v), true
					}
				}
				if !has || executable([]byte(typ)) {
					scripts++
				}
			}
			if n == "body" || (len(hidden) > 0 && hidden[0] == "head" && !inHead(name)) {
				hidden = slices.DeleteFunc(hidden, func(h string) bool { return h == "head" })
			}
			if slices.Contains([]string{"head", "script", "style", "noscript", "template", "title", "iframe", "noembed", "noframes"}, n) {
				hidden = append(hidden, n)
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			if i := slices.Index(hidden, string(name)); i >= 0 {
				hidden = slices.Delete(hidden, i, i+1)
			}
		}
	}
}

// TestNeedsRenderAllocatesNothing: the decision costs no allocation.
func TestNeedsRenderAllocatesNothing(t *testing.T) {
	for _, f := range []string{"react-cra.html", "blog.html", "next-ssr.html", "pixel-noscript.html"} {
		body := readFile(t, f)
		if n := testing.AllocsPerRun(100, func() { NeedsRender(body, "text/html; charset=utf-8") }); n != 0 {
			t.Errorf("%s: %v allocations per call", f, n)
		}
	}
}

// FuzzNeedsRender: NeedsRender never panics, leaves the body as it was,
// gives one of Reasons and says Render exactly for the rules that render;
// it is deterministic; a page without "<script" is never rendered; a
// non-HTML type is never rendered; MaxText bytes of text in a paragraph
// put before any page make it server-rendered.
func FuzzNeedsRender(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.html")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "text/html")
	}
	f.Add([]byte(`<div id="app"><!--`), "")
	f.Add([]byte(`<script type="module"`), "text/html")
	f.Add([]byte(`</`), "text/html")
	f.Add([]byte(`<noscript>javascript`), "text/html")
	renders := map[string]bool{ReasonAppRoot: true, ReasonNoscript: true, ReasonNoText: true}
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		orig := slices.Clone(body)
		v := NeedsRender(body, ct)
		if !bytes.Equal(body, orig) {
			t.Fatal("body changed")
		}
		if !slices.Contains(Reasons, v.Reason) {
			t.Fatalf("unknown reason %q", v.Reason)
		}
		if v.Render != renders[v.Reason] {
			t.Fatalf("verdict %+v", v)
		}
		if again := NeedsRender(body, ct); again != v {
			t.Fatalf("second call %+v, first %+v", again, v)
		}
		if v.Render && !containsFold(body, "<script") {
			t.Fatalf("rendered without a script: %+v", v)
		}
		if v := NeedsRender(body, "application/json"); v != (Verdict{Reason: ReasonNotHTML}) {
			t.Fatalf("json: %+v", v)
		}
		prefixed := append([]byte("<p>"+strings.Repeat("x", MaxText)+"</p>"), body...)
		if v := NeedsRender(prefixed, "text/html"); v != (Verdict{Reason: ReasonHasText}) {
			t.Fatalf("text first: %+v", v)
		}
	})
}

// BenchmarkNeedsRender: the cost of the decision on 20 KB pages: a
// server-rendered article (the usual case: the scan stops at MaxText) and
// two pages read to the end (a shell with 20 KB of inline script and
// style, and a page of links with little text).
func BenchmarkNeedsRender(b *testing.B) {
	pages := map[string][]byte{
		"article":       page20k("article"),
		"shell":         page20k("shell"),
		"links-no-text": page20k("links"),
	}
	for _, name := range []string{"article", "shell", "links-no-text"} {
		body := pages[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var v Verdict
			for b.Loop() {
				v = NeedsRender(body, "text/html; charset=utf-8")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/page")
			b.Logf("%s: %d bytes, %+v", name, len(body), v)
		})
	}
}

// page20k builds a page of about 20 KB of the kind named.
func page20k(kind string) []byte {
	var b bytes.Buffer
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>A page</title>`)
	b.WriteString(`<link rel="stylesheet" href="/style.css"><script src="/js/jquery.min.js"></script>`)
	b.WriteString(`<script async src="https://www.googletagmanager.com/gtag/js?id=G-1"></script>`)
	switch kind {
	case "article":
		b.WriteString(`</head><body><header><nav>`)
		for i := range 30 {
			fmt.Fprintf(&b, `<a class="nav-link" href="/section/%d/">Section %d</a>`, i, i)
		}
		b.WriteString(`</nav></header><main><article><h1>A long article</h1>`)
		for b.Len() < 20_000 {
			b.WriteString(`<p>The quick brown fox jumps over the lazy dog, and the dog, who had seen foxes before, did not get up. <a href="/more">More</a></p>`)
		}
		b.WriteString(`</article></main></body></html>`)
	case "shell":
		b.WriteString(`<style>`)
		for b.Len() < 8_000 {
			b.WriteString(`.btn{display:inline-block;padding:.375rem .75rem;border:1px solid transparent}`)
		}
		b.WriteString(`</style><script>window.__STATE__=`)
		for b.Len() < 20_000 {
			b.WriteString(`{"id":12,"name":"<b>item</b>","tags":["a","b"]},`)
		}
		b.WriteString(`null</script></head><body><div id="app"></div><script src="/app.js"></script></body></html>`)
	case "links":
		b.WriteString(`</head><body><div id="wrap">`)
		for b.Len() < 20_000 {
			b.WriteString(`<div class="tile"><a href="/gallery/item/12345" title="item"><img src="/thumbs/12345.jpg" alt="" width="120" height="90"></a></div>`)
		}
		b.WriteString(`</div></body></html>`)
	}
	return b.Bytes()
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
