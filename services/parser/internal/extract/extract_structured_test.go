package extract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestStructured(t *testing.T) {
	long := strings.Repeat("x", 100<<10)
	tests := []struct {
		name      string
		body      string
		jsonLD    []string
		og        []Property
		errs      int
		errPrefix string
		dropped   int
	}{
		{
			name: "json-ld object",
			body: `<html><head><script type="application/ld+json">
{ "@context": "https://schema.org", "@type": "Product",
  "name": "Kettle", "offers": { "@type": "Offer", "price": "19.99", "priceCurrency": "EUR" } }
</script></head><body><p>text</p></body></html>`,
			jsonLD: []string{`{"@context":"https://schema.org","@type":"Product","name":"Kettle","offers":{"@type":"Offer","price":"19.99","priceCurrency":"EUR"}}`},
		},
		{
			name:   "json-ld array",
			body:   `<script type="application/ld+json">[{"@type":"Person","name":"a"}, {"@type":"Person","name":"b"}, null]</script><p>x`,
			jsonLD: []string{`{"@type":"Person","name":"a"}`, `{"@type":"Person","name":"b"}`},
		},
		{
			name:   "json-ld @graph",
			body:   `<script type=" Application/LD+JSON ">{"@context":"https://schema.org","@graph":[{"@type":"WebSite","url":"https://e.com/"},{"@type":"BreadcrumbList"}]}</script>`,
			jsonLD: []string{`{"@type":"WebSite","url":"https://e.com/"}`, `{"@type":"BreadcrumbList"}`},
		},
		{
			name:      "malformed block counted, the next kept",
			body:      `<script type="application/ld+json">{"@type": "Product", "name": "x",}</script><script type="application/ld+json">{"@type":"Thing"}</script>`,
			jsonLD:    []string{`{"@type":"Thing"}`},
			errs:      1,
			errPrefix: "invalid character '}'",
		},
		{
			name:      "not an object or array",
			body:      `<script type="application/ld+json">"just a string"</script><script type="application/ld+json">nope</script>`,
			errs:      2,
			errPrefix: "json-ld: not an object or array",
		},
		{
			name:   "script text that looks like markup",
			body:   `<body><script type="application/ld+json">{"@type":"Article","text":"<p>a</p><!-- b --> <script>c<\/script>"}</script><p>after</p>`,
			jsonLD: []string{`{"@type":"Article","text":"<p>a</p><!-- b --> <script>c<\/script>"}`},
		},
		{
			name: "other scripts, templates and svg ignored, empty block ignored",
			body: `<script>var x = {"@type":"No"};</script><script type="text/javascript">{}</script>` +
				`<template><script type="application/ld+json">{"@type":"Inert"}</script></template>` +
				`<svg><script type="application/ld+json">{"@type":"Svg"}</script></svg>` +
				`<script type="application/ld+json">  </script>`,
		},
		{
			name:   "unterminated block at the end of the page",
			body:   `<p>x</p><script type="application/ld+json">{"@type":"Thing"}`,
			jsonLD: []string{`{"@type":"Thing"}`},
		},
		{
			name: "opengraph and twitter",
			body: `<head><meta property="og:title" content="  A   title "><meta property="OG:Image" content="https://e.com/1.png">` +
				`<meta property="og:image" content="https://e.com/2.png"><meta name="twitter:card" content="summary">` +
				`<meta property="og:description" name="twitter:description" content="both">` +
				`<meta property="product:price:amount" content="19.99"><meta name="description" content="not og">` +
				`<meta property="fb:app_id" content="1"><meta name="og:" content="no name"></head>`,
			og: []Property{{"og:title", "A title"}, {"og:image", "https://e.com/1.png"}, {"twitter:card", "summary"},
				{"og:description", "both"}, {"twitter:description", "both"}, {"product:price:amount", "19.99"}},
		},
		{
			name: "none",
			body: `<!doctype html><html><head><title>t</title><meta name="description" content="d"></head><body><script>x()</script><p>text</p></body></html>`,
		},
		{
			name:    "cap: items past it dropped",
			body:    `<script type="application/ld+json">[{"a":"` + long + `"},{"b":"` + long + `"},{"c":"` + long + `"},{"d":1}]</script>`,
			jsonLD:  []string{`{"a":"` + long + `"}`, `{"b":"` + long + `"}`, `{"d":1}`},
			dropped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, dom := bothPaths(t, []byte(tt.body), Options{})
			for path, res := range map[string]Result{"stream": stream, "dom": dom} {
				if !reflect.DeepEqual(res.JSONLD, tt.jsonLD) {
					t.Errorf("%s: json-ld %q, want %q", path, res.JSONLD, tt.jsonLD)
				}
				if !reflect.DeepEqual(res.OpenGraph, tt.og) {
					t.Errorf("%s: opengraph %q, want %q", path, res.OpenGraph, tt.og)
				}
				if res.StructuredErrors != tt.errs || !strings.HasPrefix(res.StructuredError, tt.errPrefix) || (tt.errs == 0) != (res.StructuredError == "") {
					t.Errorf("%s: %d errors (%q), want %d (%q…)", path, res.StructuredErrors, res.StructuredError, tt.errs, tt.errPrefix)
				}
				if res.StructuredDropped != tt.dropped {
					t.Errorf("%s: %d dropped, want %d", path, res.StructuredDropped, tt.dropped)
				}
				checkStructured(t, res)
			}
		})
	}
}

func TestStructuredTexts(t *testing.T) {
	res := Result{
		JSONLD:    []string{`{"@type":"A"}`, `{"@type":"B"}`},
		OpenGraph: []Property{{"og:title", "a \"quoted\"\ttitle <b>"}, {"og:url", "https://e.com/?a=1&b=2"}},
	}
	if got, want := res.JSONLDText(), `[{"@type":"A"},{"@type":"B"}]`; got != want {
		t.Errorf("JSONLDText %s, want %s", got, want)
	}
	if got, want := res.OpenGraphText(), `{"og:title":"a \"quoted\"\ttitle <b>","og:url":"https://e.com/?a=1&b=2"}`; got != want {
		t.Errorf("OpenGraphText %s, want %s", got, want)
	}
	if (Result{}).JSONLDText() != "" || (Result{}).OpenGraphText() != "" {
		t.Error("texts of a page without structured data are not empty")
	}
}

// checkStructured checks a result's structured data: within
// MaxStructuredBytes, every JSON-LD and microdata item and the three texts valid JSON, the
// properties valid UTF-8 with unique keys.
func checkStructured(t *testing.T, res Result) {
	t.Helper()
	ld, og, md := res.JSONLDText(), res.OpenGraphText(), res.MicrodataText()
	if n := len(ld) + len(og) + len(md); n > MaxStructuredBytes {
		t.Errorf("structured data is %d bytes, cap %d", n, MaxStructuredBytes)
	}
	for _, it := range res.JSONLD {
		if !json.Valid([]byte(it)) || !utf8.ValidString(it) {
			t.Errorf("json-ld item is not valid JSON: %q", it)
		}
	}
	for _, it := range res.Microdata {
		if !json.Valid([]byte(it)) || !utf8.ValidString(it) || !strings.HasPrefix(it, "{") {
			t.Errorf("microdata item is not a valid JSON object: %q", it)
		}
	}
	if md != "" && !json.Valid([]byte(md)) {
		t.Errorf("microdata text is not valid JSON: %q", md)
	}
	if ld != "" && !json.Valid([]byte(ld)) {
		t.Errorf("json-ld text is not valid JSON: %q", ld)
	}
	if og != "" {
		var m map[string]string
		if err := json.Unmarshal([]byte(og), &m); err != nil || len(m) != len(res.OpenGraph) {
			t.Errorf("opengraph text %q: %v, %d keys of %d", og, err, len(m), len(res.OpenGraph))
		}
		for _, p := range res.OpenGraph {
			if m[p.Key] != p.Value {
				t.Errorf("opengraph text %q: %q is %q, want %q", og, p.Key, m[p.Key], p.Value)
			}
		}
	}
	if !utf8.ValidString(og) || !utf8.ValidString(res.StructuredError) {
		t.Errorf("invalid UTF-8 in %q or %q", og, res.StructuredError)
	}
}

// FuzzStructured feeds arbitrary pages to both extractors. Invariants:
// neither panics; each keeps within MaxStructuredBytes; every JSON-LD item
// it keeps is valid JSON, and so are the two texts stored; the properties
// are valid UTF-8, one value per key.
func FuzzStructured(f *testing.F) {
	addTestdata(f)
	f.Add([]byte(`<script type="application/ld+json">{"@graph":{"@type":"A"}}</script><meta property="og:x" content="\x00\xff">`))
	f.Add([]byte(`<script type="application/ld+json">[[1],{"a":"\ud800"},"s",null]</script><script type=application/ld+json>{"@graph":[`))
	f.Add([]byte(`<table><script type="application/ld+json">{"a":1}</script><tr><td><meta name="twitter:card" content="summary"></table>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		stream, dom := bothPaths(t, body, Options{MaxTextBytes: 4096})
		checkStructured(t, stream)
		checkStructured(t, dom)
	})
}
