package pages_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestFieldsStored: a crawl's extraction rule takes its fields from the
// pages it matches, relative URLs resolved against <base href>, into
// documents.fields and the published document; the fields that matched
// nothing are named in document_meta.extract_missing and counted by rule;
// a page no rule matches stores no fields.
func TestFieldsStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, Extract: &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{{
		Name: "product", Pattern: `/product/\d+$`,
		Fields: []*crawlv1.ExtractField{
			{Name: "name", Css: "h1"},
			{Name: "price", Css: ".price", Type: "number"},
			{Name: "images", Xpath: `//img[@class="g"]/@src`, Type: "url", List: true},
			{Name: "rating", Css: ".stars", Type: "number"},
		},
	}}}})
	r, store := startDocumentParserSpecs(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true}, specs, now)

	product := `<html><head><base href="/media/"><title>Kettle</title></head><body>
<h1>Steel kettle</h1><p class="price">1.299,50 €</p><img class="g" src="a.jpg"><img class="g" src="b.jpg">
<p>A kettle for sale, long enough to be a document.</p></body></html>`
	r.produce(ctx, htmlPage("http://127.0.0.2/product/7", 1, product, now),
		htmlPage("http://127.0.0.2/about", 1, "<html><body><h1>About</h1><p>Nothing to take here.</p></body></html>", now))

	const wantFields = `{"name":"Steel kettle","price":1299.5,"images":["http://127.0.0.2/media/a.jpg","http://127.0.0.2/media/b.jpg"]}`
	for _, d := range readDocuments(t, ctx, r.kc, 2) {
		if d.GetUrl() == "http://127.0.0.2/product/7" && (d.GetFields() != wantFields || d.GetExtractRule() != "product" ||
			!slices.Equal(d.GetExtractMissing(), []string{"rating"})) {
			t.Errorf("published document: fields %s rule %q missing %v", d.GetFields(), d.GetExtractRule(), d.GetExtractMissing())
		}
	}
	got := storedByURL(t, ctx, store, `SELECT d.url, d.fields, m.extract_rule, arrayStringConcat(m.extract_missing, ',')
FROM (SELECT url, url_fp, fields FROM documents FINAL WHERE crawl_id = 'c') AS d
ANY INNER JOIN (SELECT url_fp, extract_rule, extract_missing FROM document_meta FINAL WHERE crawl_id = 'c') AS m USING url_fp`, 2)
	if g := got["http://127.0.0.2/product/7"]; !slices.Equal(g, []string{wantFields, "product", "rating"}) {
		t.Errorf("product: fields, rule, missing %q", g)
	}
	if g := got["http://127.0.0.2/about"]; !slices.Equal(g, []string{"", "", ""}) {
		t.Errorf("about page: %q, want no fields, no rule", g)
	}
	// The analysts' reading of a field.
	var price float64
	if err := store.Conn().QueryRow(ctx, `SELECT visitParamExtractFloat(fields, 'price') FROM documents FINAL
WHERE crawl_id = 'c' AND fields != ''`).Scan(&price); err != nil || price != 1299.5 {
		t.Errorf("analyst query: price %v, %v", price, err)
	}
	for result, want := range map[string]float64{"found": 3, "missing": 1} {
		if n := counterValue(t, r.reg, "extract_fields_total", "rule", "product", "result", result); n != want {
			t.Errorf("extract_fields_total{rule=product,result=%s} = %v, want %v", result, n, want)
		}
	}
}
