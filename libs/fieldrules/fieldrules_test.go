package fieldrules

import (
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

const shopPage = `<!doctype html><html><head><title>Kettle</title>
<meta itemprop="sku" content="KT-1001"></head><body>
<h1> Steel   kettle
 1.7 l </h1>
<div class="price">Price: $1,299.50</div>
<span class="price-eu">1.299,50 €</span>
<time datetime="2024-03-01T10:20:00+01:00">March 1</time>
<p class="released">March 5, 2024</p>
<img class="gallery" src="/img/a.jpg"><img class="gallery" src="b.jpg"><img class="gallery" src="javascript:alert(1)">
<div id="desc"><p>Boils <b>fast</b>.</p></div>
<ul><li class="tag">steel</li><li class="tag">kitchen</li></ul>
</body></html>`

func parse(t *testing.T, s string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestApplyTakesEachKindAndType(t *testing.T) {
	set, err := Compile(&crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{
		Name: "product", Pattern: `/product/\d+$`,
		Fields: []*crawlv1.ExtractField{
			{Name: "name", Css: "h1"},
			{Name: "price", Css: ".price", Type: "number"},
			{Name: "price_eu", Xpath: `//span[@class="price-eu"]`, Type: "number"},
			{Name: "sku", Css: "meta[itemprop=sku]", Attr: "content"},
			{Name: "sku_xpath", Xpath: `//meta[@itemprop="sku"]/@content`},
			{Name: "updated", Css: "time", Attr: "datetime", Type: "date"},
			{Name: "released", Css: ".released", Type: "date"},
			{Name: "images", Css: "img.gallery", Attr: "src", Type: "url", List: true},
			{Name: "description", Css: "#desc", Html: true},
			{Name: "tags", Xpath: `//li[@class="tag"]`, List: true},
			{Name: "tag_count", Xpath: `count(//li[@class="tag"])`, Type: "number"},
			{Name: "rating", Css: ".rating", Type: "number"},
			{Name: "weight", Css: "h1", Type: "date"},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Match("shop.test:8080", "http://shop.test:8080/product/7")
	if r == nil || r.Name() != "product" {
		t.Fatalf("Match = %v, want the product rule", r)
	}
	base, _ := url.Parse("http://shop.test:8080/product/7")
	res := r.Apply(parse(t, shopPage), base)
	var got map[string]any
	if err := json.Unmarshal(res.Fields, &got); err != nil {
		t.Fatalf("fields %s: %v", res.Fields, err)
	}
	want := map[string]any{
		"name":        "Steel kettle 1.7 l",
		"price":       1299.5,
		"price_eu":    1299.5,
		"sku":         "KT-1001",
		"sku_xpath":   "KT-1001",
		"updated":     "2024-03-01T10:20:00+01:00",
		"released":    "2024-03-05T00:00:00Z",
		"images":      []any{"http://shop.test:8080/img/a.jpg", "http://shop.test:8080/product/b.jpg"},
		"description": "<p>Boils <b>fast</b>.</p>",
		"tags":        []any{"steel", "kitchen"},
		"tag_count":   2.0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fields:\n got %v\nwant %v", got, want)
	}
	if want := []string{"rating", "weight"}; !reflect.DeepEqual(res.Missing, want) {
		t.Errorf("missing %v, want %v (no element; text that is not a date)", res.Missing, want)
	}
	if len(res.Found) != len(want) {
		t.Errorf("found %v, want %d names", res.Found, len(want))
	}
}

func TestApplyNothingFound(t *testing.T) {
	set, err := Compile(&crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{
		Name: "r", Fields: []*crawlv1.ExtractField{{Name: "x", Css: ".none"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	res := set.Match("a.test", "http://a.test/").Apply(parse(t, "<p>hi"), nil)
	if res.Fields != nil || !reflect.DeepEqual(res.Missing, []string{"x"}) {
		t.Errorf("Apply = %s missing %v, want no fields, x missing", res.Fields, res.Missing)
	}
}

func TestMatchFirstRuleByPatternAndHost(t *testing.T) {
	f := []*crawlv1.ExtractField{{Name: "t", Css: "title"}}
	set, err := Compile(&crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{
		{Name: "b-only", Pattern: "/item/", Hosts: []string{"B.test"}, Fields: f},
		{Name: "items", Pattern: "/item/", Fields: f},
		{Name: "all", Fields: f},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ host, url, want string }{
		{"b.test:81", "http://b.test:81/item/1", "b-only"},
		{"a.test", "http://a.test/item/1", "items"},
		{"a.test", "http://a.test/about", "all"},
	} {
		if r := set.Match(c.host, c.url); r == nil || r.Name() != c.want {
			t.Errorf("Match(%s, %s) = %v, want %s", c.host, c.url, r, c.want)
		}
	}
	var none *Set
	if none.Match("a.test", "http://a.test/") != nil || none.Len() != 0 {
		t.Error("a nil set matched a page")
	}
}

func TestCompileRefusesBadRules(t *testing.T) {
	ok := []*crawlv1.ExtractField{{Name: "t", Css: "title"}}
	for _, c := range []struct {
		name string
		x    *crawlv1.Extraction
		want string
	}{
		{"bad css", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a", Css: "div[["}}}}}, "css"},
		{"bad xpath", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a", Xpath: "//div["}}}}}, "xpath"},
		{"both", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a", Css: "p", Xpath: "//p"}}}}}, "give one"},
		{"neither", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a"}}}}}, "no css nor xpath"},
		{"type", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a", Css: "p", Type: "money"}}}}}, "type"},
		{"html attr", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: []*crawlv1.ExtractField{{Name: "a", Css: "p", Html: true, Attr: "id"}}}}}, "take one"},
		{"pattern", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Pattern: "(", Fields: ok}}}, "pattern"},
		{"no fields", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r"}}}, "no fields"},
		{"rule name", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "", Fields: ok}}}, "name"},
		{"field twice", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: append(ok, ok...)}}}, "used twice"},
		{"rule twice", &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{Name: "r", Fields: ok}, {Name: "r", Fields: ok}}}, "used twice"},
	} {
		err := Validate(c.x)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want an error about %q", c.name, err, c.want)
		}
	}
	if set, err := Compile(nil); set != nil || err != nil {
		t.Errorf("Compile(nil) = %v, %v; want no rules, no error", set, err)
	}
}

func TestParseNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"$1,299.50", 1299.5, true},
		{"1.299,50 €", 1299.5, true},
		{"12 345", 12345, true},
		{"CHF 1'250.-", 1250, true},
		{"-3.5", -3.5, true},
		{"−4", -4, true},
		{"4,5", 4.5, true},
		{"1,299", 1299, true},
		{"0.75 kg", 0.75, true},
		{"Rating: 4 of 5", 4, true},
		{"free", 0, false},
		{"1.2.3", 123, true},
	} {
		got, ok := ParseNumber(c.in)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestParseDate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"2024-03-01", "2024-03-01T00:00:00Z"},
		{"2024-03-01T10:20:00+01:00", "2024-03-01T10:20:00+01:00"},
		{"Fri, 01 Mar 2024 10:20:00 GMT", "2024-03-01T10:20:00Z"},
		{"March 1, 2024", "2024-03-01T00:00:00Z"},
		{"1 March 2024", "2024-03-01T00:00:00Z"},
		{"01.03.2024", "2024-03-01T00:00:00Z"},
		{"2024年3月1日", "2024-03-01T00:00:00Z"},
		{"2024-03-01 by Ann", "2024-03-01T00:00:00Z"},
		{"01/03/2024", ""},
		{"soon", ""},
	} {
		got, ok := ParseDate(c.in)
		s := ""
		if ok {
			s = got.Format("2006-01-02T15:04:05Z07:00")
		}
		if s != c.want {
			t.Errorf("ParseDate(%q) = %q, want %q", c.in, s, c.want)
		}
	}
}

// FuzzApply: whatever the page and the selector, Apply returns a JSON
// object or nothing, and every field of the rule is found or missing.
func FuzzApply(f *testing.F) {
	f.Add(shopPage, "h1", "", "", false)
	f.Add("<p>1,2<p>3", "p", "", "number", true)
	f.Add("<a href=x>", "", "//a/@href", "url", false)
	f.Add("<time>2024-01-01</time>", "time", "", "date", true)
	f.Fuzz(func(t *testing.T, page, css, xp, typ string, list bool) {
		set, err := Compile(&crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{
			Name: "r", Fields: []*crawlv1.ExtractField{{Name: "f", Css: css, Xpath: xp, Type: typ, List: list}},
		}}})
		if err != nil {
			return
		}
		doc, err := html.Parse(strings.NewReader(page))
		if err != nil {
			return
		}
		base, _ := url.Parse("http://a.test/p/")
		res := set.Match("a.test", "http://a.test/p/").Apply(doc, base)
		if len(res.Found)+len(res.Missing) != 1 {
			t.Fatalf("found %v missing %v, want the one field in one of them", res.Found, res.Missing)
		}
		if res.Fields != nil {
			var m map[string]any
			if err := json.Unmarshal(res.Fields, &m); err != nil || len(m) != 1 {
				t.Fatalf("fields %q: %v", res.Fields, err)
			}
		}
	})
}

func TestBaseOf(t *testing.T) {
	page, _ := url.Parse("http://a.test/x/y.html")
	for _, c := range []struct{ html, want string }{
		{`<head><base href="/b/"></head><p>`, "http://a.test/b/"},
		{`<head><base href="http://c.test/"></head>`, "http://c.test/"},
		{`<head><base target=_top></head>`, "http://a.test/x/y.html"},
		{`<body><base href="/late/">`, "http://a.test/x/y.html"},
	} {
		if got := BaseOf(parse(t, c.html), page).String(); got != c.want {
			t.Errorf("BaseOf(%s) = %s, want %s", c.html, got, c.want)
		}
	}
}
