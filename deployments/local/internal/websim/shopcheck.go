package websim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// Stored is what a crawl stored of one product page: the JSON texts of
// documents.fields, json_ld, microdata and opengraph (” when none) and
// document_meta.structured_errors.
type Stored struct {
	URL              string
	Fields           string
	JSONLD           string
	Microdata        string
	OpenGraph        string
	StructuredErrors int
}

// Tally counts what a crawl stored of the shop's known values, over the
// product pages checked: each figure is known, found (stored at all) and
// exact (stored and equal).
type Tally struct {
	// NoRules says that the crawl had no extraction rules: Add does not
	// check the fields.
	NoRules bool `json:"no_rules,omitempty"`

	Pages int // product pages checked

	Fields, FieldsFound, FieldsExact int // fields of the rules, each compared with its known value
	PagesExact                       int // pages whose every field is exact, none extra

	JSONLD, JSONLDFound, JSONLDExact int // JSON-LD items
	Microdata, MicrodataExact        int // microdata items
	OpenGraph, OpenGraphExact        int // OpenGraph and Twitter card properties
	Malformed, MalformedRecorded     int // malformed JSON-LD blocks, and of them recorded (structured_errors)

	// Mismatches are the first MaxMismatches differences, one a line:
	// "url field: got …, want …".
	Mismatches []string
}

// MaxMismatches is how many differences a Tally keeps.
const MaxMismatches = 10

func (t *Tally) mismatch(format string, args ...any) {
	if len(t.Mismatches) < MaxMismatches {
		t.Mismatches = append(t.Mismatches, fmt.Sprintf(format, args...))
	}
}

// decode decodes a stored JSON text; ” is nil.
func decode(s string) (any, error) {
	if s == "" {
		return nil, nil
	}
	var v any
	err := json.Unmarshal([]byte(s), &v)
	return v, err
}

func show(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	const most = 160
	if len(s) > most {
		r := []rune(s)
		return string(r[:min(len(r), most)]) + "…"
	}
	return s
}

// Add checks what was stored of product p's page against its known
// values and counts it.
func (t *Tally) Add(p Product, s Stored) {
	page, err := url.Parse(s.URL)
	if err != nil {
		t.mismatch("%s: url does not parse: %v", s.URL, err)
		return
	}
	t.Pages++
	if !t.NoRules {
		t.addFields(p, page, s)
	}
	t.addStructured(p, page, s)
}

// addFields checks the page's fields.
func (t *Tally) addFields(p Product, page *url.URL, s Stored) {
	want := p.Fields(page)
	t.Fields += len(want)
	fv, err := decode(s.Fields)
	got, _ := fv.(map[string]any)
	if err != nil || (fv != nil && got == nil) {
		t.mismatch("%s fields: not a JSON object: %q", s.URL, s.Fields)
	}
	exact := len(got) == len(want)
	for _, name := range sortedKeys(want) {
		g, ok := got[name]
		switch {
		case !ok:
			exact = false
			t.mismatch("%s field %s: missing, want %s", s.URL, name, show(want[name]))
		case reflect.DeepEqual(g, want[name]):
			t.FieldsFound++
			t.FieldsExact++
		default:
			exact = false
			t.FieldsFound++
			t.mismatch("%s field %s: got %s, want %s", s.URL, name, show(g), show(want[name]))
		}
	}
	for _, name := range sortedKeys(got) {
		if _, ok := want[name]; !ok {
			t.mismatch("%s field %s: got %s, want none", s.URL, name, show(got[name]))
		}
	}
	if exact {
		t.PagesExact++
	}
}

// addStructured checks the page's structured data.
func (t *Tally) addStructured(p Product, page *url.URL, s Stored) {
	known := p.JSONLD()
	t.JSONLD += len(known)
	lv, err := decode(s.JSONLD)
	items, _ := lv.([]any)
	if err != nil {
		t.mismatch("%s json_ld: %v", s.URL, err)
	}
	t.JSONLDFound += min(len(items), len(known))
	t.JSONLDExact += matched(known, items)
	if len(items) != len(known) || matched(known, items) != len(known) {
		t.mismatch("%s json_ld: got %s, want %s", s.URL, show(items), show(known))
	}

	md := p.Microdata(page)
	t.Microdata += len(md)
	mv, err := decode(s.Microdata)
	mitems, _ := mv.([]any)
	if err != nil {
		t.mismatch("%s microdata: %v", s.URL, err)
	}
	t.MicrodataExact += matched(md, mitems)
	if len(mitems) != len(md) || matched(md, mitems) != len(md) {
		t.mismatch("%s microdata: got %s, want %s", s.URL, show(mitems), show(md))
	}

	og := p.OpenGraph(page)
	t.OpenGraph += len(og)
	ov, err := decode(s.OpenGraph)
	gotOG, _ := ov.(map[string]any)
	if err != nil {
		t.mismatch("%s opengraph: %v", s.URL, err)
	}
	for _, k := range sortedKeys(og) {
		if reflect.DeepEqual(gotOG[k], og[k]) {
			t.OpenGraphExact++
		} else {
			t.mismatch("%s opengraph %s: got %s, want %s", s.URL, k, show(gotOG[k]), show(og[k]))
		}
	}
	if p.Malformed {
		t.Malformed++
		if s.StructuredErrors == 1 {
			t.MalformedRecorded++
		}
	}
	if want := btoi(p.Malformed); s.StructuredErrors != want {
		t.mismatch("%s structured_errors: got %d, want %d", s.URL, s.StructuredErrors, want)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// matched counts the known items found among got, each found item used
// once.
func matched(known, got []any) int {
	used := make([]bool, len(got))
	n := 0
	for _, k := range known {
		for i, g := range got {
			if !used[i] && reflect.DeepEqual(k, g) {
				used[i] = true
				n++
				break
			}
		}
	}
	return n
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// DocTally counts what a crawl stored of the shop's documents (manuals or
// spec sheets): how many exist (Known, linked from the product pages),
// how many were stored, how many of those have every known word in their
// text (documents.text), and how many have the known metadata: the title
// (documents.title), the author and the pages (documents.properties, the
// keys "author" and "pages").
type DocTally struct {
	Known, Stored, WordsAll, MetaExact int
	Mismatches                         []string
}

// Add checks one stored document against what it is known to hold.
func (d *DocTally) Add(url string, k KnownDoc, title, text, properties string) {
	d.Stored++
	var missing []string
	for _, w := range k.Words {
		if !strings.Contains(text, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		d.WordsAll++
	} else if len(d.Mismatches) < MaxMismatches {
		d.Mismatches = append(d.Mismatches, fmt.Sprintf("%s: text lacks %q (%d bytes of text)", url, missing, len(text)))
	}
	v, err := decode(properties)
	props, _ := v.(map[string]any)
	meta := err == nil && title == k.Title && props["author"] == k.Author
	if k.Pages > 0 && props["pages"] != float64(k.Pages) {
		meta = false
	}
	if meta {
		d.MetaExact++
	} else if len(d.Mismatches) < MaxMismatches {
		d.Mismatches = append(d.Mismatches, fmt.Sprintf("%s: title %q, properties %s; want title %q, author %q, pages %d",
			url, title, properties, k.Title, k.Author, k.Pages))
	}
}
