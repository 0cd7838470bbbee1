package extract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestMicrodata(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		items   []string
		dropped int
	}{
		{
			name: "product with nested offer",
			body: `<html><head><base href="https://shop.example/p/"></head><body>
<div itemscope itemtype="https://schema.org/Product">
  <h1 itemprop="name">  Electric   Kettle </h1>
  <img itemprop="image" src="kettle.jpg" alt="">
  <a itemprop="url" href="/p/kettle">link</a>
  <p itemprop="description">Boils <b>water</b>
   fast.</p>
  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
    <span itemprop="price" content="19.99">19,99 €</span>
    <meta itemprop="priceCurrency" content="EUR">
    <link itemprop="availability" href="https://schema.org/InStock">
    <time itemprop="validFrom" datetime="2026-01-01">January</time>
    <data itemprop="sku" value="K-1">one</data>
  </div>
  <meter itemprop="rating" value="4.5" min=0 max=5>4.5</meter>
</div></body></html>`,
			items: []string{`{"@type":"https://schema.org/Product","name":"Electric Kettle","image":"https://shop.example/p/kettle.jpg",` +
				`"url":"https://shop.example/p/kettle","description":"Boils water fast.","offers":{"@type":"https://schema.org/Offer",` +
				`"price":"19.99","priceCurrency":"EUR","availability":"https://schema.org/InStock","validFrom":"2026-01-01","sku":"K-1"},"rating":"4.5"}`},
		},
		{
			name: "person with several values of one property",
			body: `<section itemscope itemtype="https://schema.org/Person"><span itemprop="name">Ada</span>
<ul><li itemprop="email">ada@example.org<li itemprop="email">a@example.net<li>not a value</ul>
<p itemprop="knowsAbout jobTitle">Engines<time itemprop=birthDate>1815</time></section>`,
			items: []string{`{"@type":"https://schema.org/Person","name":"Ada","email":["ada@example.org","a@example.net"],` +
				`"knowsAbout":"Engines1815","jobTitle":"Engines1815","birthDate":"1815"}`},
		},
		{
			name: "itemid and two itemtypes, two top-level items",
			body: `<div itemscope itemid="/books/1" itemtype="https://schema.org/Book https://schema.org/Product">` +
				`<span itemprop=name>Dune</span><script>var x = "not text";</script></div>` +
				`<div itemscope><span itemprop="@type">x</span><span itemprop=a>1</span></div>`,
			items: []string{`{"@type":["https://schema.org/Book","https://schema.org/Product"],"@id":"https://example.com/books/1","name":"Dune"}`,
				`{"a":"1"}`},
		},
		{
			name: "no microdata",
			body: `<!doctype html><html><head><title>t</title></head><body><p itemprop=name>orphan</p><div>itemscope in text</div></body></html>`,
		},
		{
			name: "malformed nesting",
			body: `<div itemscope itemtype=T><p itemprop=a>one<p itemprop=b>two</span></div>` +
				`<span itemprop=c>outside</span><b><div itemscope><i itemprop=d>x</b>y</div>` +
				`<p itemprop=e itemscope><span itemprop=f>unreachable</span></p>` +
				`<template><div itemscope><span itemprop=g>inert</span></div></template>` +
				`<table><tr><td itemscope><span itemprop=h>cell` + "\xff" + `<td itemprop=i>next</table>` +
				`<table><tr itemscope><td itemprop=r>1<tr itemscope><td itemprop=r>2</table>` +
				`<div ITEMSCOPE><svg itemprop=j /><span itemprop=k>last`,
			items: []string{`{"@type":"T","a":"one","b":"two"}`, `{"d":"x"}`, `{"h":"cell` + "\uFFFD" + `"}`, `{"r":"1"}`, `{"r":"2"}`, `{"j":"","k":"last"}`},
		},
		{
			name:    "properties per item capped",
			body:    `<div itemscope>` + strings.Repeat(`<span itemprop=v>x</span>`, 257) + `</div>`,
			items:   []string{`{"v":[` + strings.TrimSuffix(strings.Repeat(`"x",`, 256), ",") + `]}`},
			dropped: 1,
		},
		{
			name:    "depth capped",
			body:    `<div itemscope>` + strings.Repeat(`<div itemprop=n itemscope>`, 18) + `<span itemprop=leaf>x</span>`,
			items:   []string{`{"n":` + strings.Repeat(`{"n":`, 15) + `{}` + strings.Repeat(`}`, 16)},
			dropped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stream, dom := bothPaths(t, []byte(tt.body), Options{})
			for path, res := range map[string]Result{"stream": stream, "dom": dom} {
				if !reflect.DeepEqual(res.Microdata, tt.items) {
					t.Errorf("%s: microdata\n%q\nwant\n%q", path, res.Microdata, tt.items)
				}
				if res.StructuredDropped != tt.dropped {
					t.Errorf("%s: %d dropped, want %d", path, res.StructuredDropped, tt.dropped)
				}
				checkStructured(t, res)
			}
		})
	}
}

// TestMicrodataCap: microdata shares MaxStructuredBytes with JSON-LD;
// items past it are dropped and counted, later smaller ones kept.
func TestMicrodataCap(t *testing.T) {
	long := strings.Repeat("z", 1500)
	var b strings.Builder
	b.WriteString(`<script type="application/ld+json">{"big":"` + strings.Repeat("j", 150<<10) + `"}</script>`)
	for range 80 {
		b.WriteString(`<div itemscope>`)
		for range 3 {
			b.WriteString(`<span itemprop=p>` + long + `</span>`)
		}
		b.WriteString(`</div>`)
	}
	b.WriteString(`<div itemscope><span itemprop=small>s</span></div>`)
	stream, dom := bothPaths(t, []byte(b.String()), Options{})
	for path, res := range map[string]Result{"stream": stream, "dom": dom} {
		checkStructured(t, res)
		if len(res.JSONLD) != 1 || len(res.Microdata) < 10 || res.StructuredDropped == 0 {
			t.Fatalf("%s: %d json-ld, %d microdata items, %d dropped", path, len(res.JSONLD), len(res.Microdata), res.StructuredDropped)
		}
		if got := len(res.Microdata) + res.StructuredDropped; got != 81 {
			t.Errorf("%s: %d kept + dropped, want 81", path, got)
		}
		if last := res.Microdata[len(res.Microdata)-1]; last != `{"small":"s"}` {
			t.Errorf("%s: last item %q, want the small one", path, last)
		}
	}
}

func TestMicrodataText(t *testing.T) {
	res := Result{Microdata: []string{`{"@type":"A"}`, `{"b":["1","2"]}`}}
	if got, want := res.MicrodataText(), `[{"@type":"A"},{"b":["1","2"]}]`; got != want {
		t.Errorf("MicrodataText %s, want %s", got, want)
	}
	if (Result{}).MicrodataText() != "" {
		t.Error("text of a page without microdata is not empty")
	}
}

// FuzzMicrodata feeds arbitrary pages to both extractors. Invariants:
// neither panics; both keep the same microdata; the structured data stays
// within MaxStructuredBytes; every item and the text are valid JSON
// objects (checkStructured).
func FuzzMicrodata(f *testing.F) {
	addTestdata(f)
	f.Add([]byte(`<div itemscope itemtype="a b"><p itemprop="x y">t<a itemprop=u href="%zz">l</a><div itemprop=n itemscope><meta itemprop=m content="\x00">`))
	f.Add([]byte(`<table itemscope><tr><td itemprop=a>1<td itemprop=a>2</table><li itemscope><li itemprop=z>`))
	f.Add([]byte(`<table><tr itemscope><td itemprop=a>1<tr itemscope><td itemprop=b>2</table>`))
	f.Add([]byte(`<div itemScope><svg itemprop=s><span itemprop=t>x</svg></b></div><object itemprop=o data=x></object>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		stream, dom := bothPaths(t, body, Options{MaxTextBytes: 4096})
		if !reflect.DeepEqual(stream.Microdata, dom.Microdata) {
			t.Errorf("microdata differs: stream %q, dom %q", stream.Microdata, dom.Microdata)
		}
		for _, res := range []Result{stream, dom} {
			checkStructured(t, res)
			if md := res.MicrodataText(); md != "" {
				var items []map[string]any
				if err := json.Unmarshal([]byte(md), &items); err != nil || len(items) != len(res.Microdata) {
					t.Errorf("microdata text %q: %v", md, err)
				}
			}
		}
	})
}
