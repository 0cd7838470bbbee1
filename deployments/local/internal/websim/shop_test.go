package websim

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fieldrules"
)

// shopRulesFile is the shop's committed extraction rules.
const shopRulesFile = "../../bench/shop-extract.json"

func loadShopRules(t *testing.T) *fieldrules.Set {
	t.Helper()
	b, err := os.ReadFile(shopRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var x crawlv1.Extraction
	if err := protojson.Unmarshal(b, &x); err != nil {
		t.Fatalf("%s: %v", shopRulesFile, err)
	}
	set, err := fieldrules.Compile(&x)
	if err != nil {
		t.Fatalf("%s: %v", shopRulesFile, err)
	}
	return set
}

var (
	ldRE   = regexp.MustCompile(`(?s)<script type="application/ld\+json">(.*?)</script>`)
	metaRE = regexp.MustCompile(`<meta (?:property|name)="((?:og|twitter):[^"]+)" content="([^"]*)">`)
	aRE    = regexp.MustCompile(`<a [^>]*href="([^"]*)"`)
)

// pageStructured reads a page's JSON-LD items and OpenGraph properties as
// the parser's README says it keeps them (each block an item, an @graph's
// elements items each; a block that does not parse counted; the first
// value of a property wins), independently of the known values.
func pageStructured(t *testing.T, body []byte) (items []any, bad int, og map[string]any) {
	t.Helper()
	for _, m := range ldRE.FindAllSubmatch(body, -1) {
		var v any
		if err := json.Unmarshal(m[1], &v); err != nil {
			bad++
			continue
		}
		obj, ok := v.(map[string]any)
		if g, has := obj["@graph"].([]any); ok && has {
			items = append(items, g...)
			continue
		}
		items = append(items, v)
	}
	og = map[string]any{}
	for _, m := range metaRE.FindAllSubmatch(body, -1) {
		if _, seen := og[string(m[1])]; !seen {
			og[string(m[1])] = html.UnescapeString(string(m[2]))
		}
	}
	return items, bad, og
}

// TestShopWeb walks a shop web from its seeds and checks its shape and
// its known values: every content page reached, product pages of 10–30 KB
// with 20–60 links, every field of the committed rules (applied with
// libs/fieldrules, as the parser applies them) equal to the product's
// known value, the JSON-LD items, the malformed blocks and the OpenGraph
// properties the page publishes equal to the known ones, and the manuals
// and spec sheets valid documents with their known words and metadata.
func TestShopWeb(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w, err := Start(ctx, Config{Hosts: 3, Articles: 24, FirstAddr: netip.MustParseAddr("127.1.90.1"), Seed: 7, Shop: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rules := loadShopRules(t)
	hostIdx := map[string]int{}
	for i, h := range w.Hosts() {
		hostIdx[h] = i
	}
	c := &http.Client{Timeout: 10 * time.Second}
	seen := map[string]bool{}
	var queue []*url.URL
	for _, s := range w.Seeds() {
		u, _ := url.Parse(s)
		seen[u.String()] = true
		queue = append(queue, u)
	}
	var tally Tally
	var manuals, specs []Product
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		status, ctype, body := get(t, c, u.String())
		if status != http.StatusOK {
			t.Fatalf("%s: status %d", u, status)
		}
		if !strings.HasPrefix(ctype, "text/html") {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(u.Path, "/product/")); err == nil && strings.HasPrefix(u.Path, "/product/") {
			p := w.Product(hostIdx[u.Host], n)
			links := len(aRE.FindAllSubmatch(body, -1))
			if len(body) < w.cfg.MinPageBytes || len(body) > w.cfg.MaxPageBytes+2048 {
				t.Errorf("%s: %d bytes, want %d to %d", u, len(body), w.cfg.MinPageBytes, w.cfg.MaxPageBytes)
			}
			if links < w.cfg.MinLinks || links > w.cfg.MaxLinks {
				t.Errorf("%s: %d links, want %d to %d", u, links, w.cfg.MinLinks, w.cfg.MaxLinks)
			}
			doc, err := html.Parse(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			rule := rules.Match(u.Host, u.String())
			if rule == nil {
				t.Fatalf("%s: no rule of %s matches", u, shopRulesFile)
			}
			res := rule.Apply(doc, u)
			items, bad, og := pageStructured(t, body)
			ld, _ := json.Marshal(items)
			ogj, _ := json.Marshal(og)
			// Microdata is the parser's alone to read: the known items
			// stand in, and the end-to-end test checks them against
			// what the parser stores.
			md, _ := json.Marshal(p.Microdata(u))
			tally.Add(p, Stored{URL: u.String(), Fields: string(res.Fields), JSONLD: string(ld), Microdata: string(md),
				OpenGraph: string(ogj), StructuredErrors: bad})
			if p.Manual {
				manuals = append(manuals, p)
			}
			if p.Spec {
				specs = append(specs, p)
			}
		}
		for _, m := range aRE.FindAllSubmatch(body, -1) {
			ref, err := u.Parse(string(m[1]))
			if err != nil {
				t.Fatalf("%s: bad href %q", u, m[1])
			}
			ref.Fragment = ""
			if _, ours := hostIdx[ref.Host]; !ours || seen[ref.String()] {
				continue
			}
			seen[ref.String()] = true
			queue = append(queue, ref)
		}
	}
	if st := w.Stats(); st.Pages != w.Pages() || st.Duplicates != 0 {
		t.Errorf("walked %d of %d content pages (%d duplicates), want all once", st.Pages, w.Pages(), st.Duplicates)
	}
	if tally.Pages != 3*24 {
		t.Errorf("checked %d product pages, want %d", tally.Pages, 3*24)
	}
	if tally.FieldsExact != tally.Fields || tally.PagesExact != tally.Pages || tally.JSONLDExact != tally.JSONLD ||
		tally.OpenGraphExact != tally.OpenGraph || tally.MalformedRecorded != tally.Malformed || len(tally.Mismatches) > 0 {
		t.Errorf("tally %+v, want every value exact:\n%s", tally, strings.Join(tally.Mismatches, "\n"))
	}
	if tally.Malformed == 0 || len(manuals) == 0 || len(specs) == 0 {
		t.Errorf("%d malformed blocks, %d manuals, %d spec sheets: want some of each", tally.Malformed, len(manuals), len(specs))
	}
	t.Logf("%d product pages, %d fields, %d JSON-LD items, %d malformed blocks, %d manuals, %d spec sheets",
		tally.Pages, tally.Fields, tally.JSONLD, tally.Malformed, len(manuals), len(specs))

	for _, p := range manuals {
		status, ctype, body := get(t, c, "http://"+w.Hosts()[p.Host]+p.ManualPath())
		if status != http.StatusOK || ctype != typePDF {
			t.Fatalf("manual %d: status %d, %s", p.N, status, ctype)
		}
		checkPDF(t, p, body)
	}
	for _, p := range specs {
		status, ctype, body := get(t, c, "http://"+w.Hosts()[p.Host]+p.SpecPath())
		if status != http.StatusOK || ctype != typeDOCX {
			t.Fatalf("spec %d: status %d, %s", p.N, status, ctype)
		}
		checkDocx(t, p, body)
	}
	// A product without a manual has none to serve.
	for n := range 24 {
		if p := w.Product(0, n); !p.Manual {
			if status, _, _ := get(t, c, "http://"+w.Hosts()[0]+p.ManualPath()); status != http.StatusNotFound {
				t.Errorf("manual of product %d, which has none: status %d, want 404", n, status)
			}
			break
		}
	}
}

// checkPDF reads a manual with poppler's pdftotext and pdfinfo: its text
// holds the known words, its metadata the known title, author and pages.
func checkPDF(t *testing.T, p Product, body []byte) {
	t.Helper()
	if _, err := exec.LookPath("pdftotext"); err != nil {
		t.Skip("pdftotext (poppler-utils) not installed")
	}
	f := filepath.Join(t.TempDir(), "manual.pdf")
	if err := os.WriteFile(f, body, 0o644); err != nil {
		t.Fatal(err)
	}
	text, err := exec.CommandContext(t.Context(), "pdftotext", f, "-").Output()
	if err != nil {
		t.Fatalf("pdftotext manual %d: %v", p.N, err)
	}
	var d DocTally
	d.Add(p.ManualPath(), p.ManualDoc(), "", string(text), "") // the metadata: pdfinfo below
	if d.WordsAll != 1 {
		t.Errorf("manual %d: %v", p.N, d.Mismatches)
	}
	info, err := exec.CommandContext(t.Context(), "pdfinfo", f).Output()
	if err != nil {
		t.Fatalf("pdfinfo manual %d: %v", p.N, err)
	}
	fields := map[string]string{}
	for line := range strings.Lines(string(info)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	want := map[string]string{"Title": p.ManualTitle(), "Author": ShopDocAuthor, "Pages": strconv.Itoa(p.ManualPages())}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("manual %d: pdfinfo %s %q, want %q", p.N, k, fields[k], v)
		}
	}
}

// checkDocx opens a spec sheet as a zip: its document's text holds the
// known words, its core properties the known title and author.
func checkDocx(t *testing.T, p Product, body []byte) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("spec %d: %v", p.N, err)
	}
	parts := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		parts[f.Name] = string(b)
	}
	for _, name := range []string{"[Content_Types].xml", "_rels/.rels", "word/document.xml", "docProps/core.xml"} {
		if _, ok := parts[name]; !ok {
			t.Fatalf("spec %d: no %s", p.N, name)
		}
	}
	var text strings.Builder
	dec := xml.NewDecoder(strings.NewReader(parts["word/document.xml"]))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("spec %d: document.xml: %v", p.N, err)
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
			text.WriteByte(' ')
		}
	}
	var d DocTally
	d.Add(p.SpecPath(), p.SpecDoc(), "", text.String(), "") // the metadata: core.xml below
	if d.WordsAll != 1 {
		t.Errorf("spec %d: %v", p.N, d.Mismatches)
	}
	var core struct {
		Title   string `xml:"title"`
		Creator string `xml:"creator"`
	}
	if err := xml.Unmarshal([]byte(parts["docProps/core.xml"]), &core); err != nil {
		t.Fatalf("spec %d: core.xml: %v", p.N, err)
	}
	if core.Title != p.SpecTitle() || core.Creator != ShopDocAuthor {
		t.Errorf("spec %d: title %q, creator %q; want %q, %q", p.N, core.Title, core.Creator, p.SpecTitle(), ShopDocAuthor)
	}
}

func TestFormatPrice(t *testing.T) {
	tests := []struct {
		cents int64
		euro  bool
		want  string
	}{
		{500, false, "$5.00"},
		{99999, false, "$999.99"},
		{129950, false, "$1,299.50"},
		{129950, true, "1.299,50 €"},
		{1234567, true, "12.345,67 €"},
		{100000, false, "$1,000.00"},
		{4205, true, "42,05 €"},
	}
	for _, tt := range tests {
		if got := formatPrice(tt.cents, tt.euro); got != tt.want {
			t.Errorf("formatPrice(%d, %v) = %q, want %q", tt.cents, tt.euro, got, tt.want)
		}
		if v, ok := fieldrules.ParseNumber(tt.want); !ok || v != float64(tt.cents)/100 {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v", tt.want, v, ok, float64(tt.cents)/100)
		}
	}
}

// TestShopProductDeterministic: a product is a function of (seed, host,
// n): the same three give the same values, another n or host another SKU.
func TestShopProductDeterministic(t *testing.T) {
	a, b := ShopProduct(3, 4, 17), ShopProduct(3, 4, 17)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("ShopProduct(3, 4, 17) differs between calls:\n%+v\n%+v", a, b)
	}
	if c := ShopProduct(3, 4, 18); c.SKU == a.SKU {
		t.Errorf("products 17 and 18 share SKU %s", a.SKU)
	}
	if c := ShopProduct(3, 5, 17); c.SKU == a.SKU {
		t.Errorf("hosts 4 and 5 share SKU %s", a.SKU)
	}
	// The manuals are the same bytes every time.
	m1, err := ManualPDF(a, "http://127.0.0.1:80")
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := ManualPDF(a, "http://127.0.0.1:80")
	s1, err := SpecDocx(a)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := SpecDocx(a)
	if !bytes.Equal(m1, m2) || !bytes.Equal(s1, s2) {
		t.Error("a product's manual or spec sheet differs between two makings")
	}
}
