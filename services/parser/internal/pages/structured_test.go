package pages_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestStructuredDataStored: a page with two JSON-LD blocks, one malformed,
// and OpenGraph and Twitter card tags, produced to the broker, lands in
// ClickHouse with the good block's items in documents.json_ld, its
// properties in documents.opengraph and the bad block counted in
// document_meta.structured_errors; the document published carries them
// too. A page without structured data stores ”.
func TestStructuredDataStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r, store := startDocumentParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true}, now)

	product := `<!doctype html><html><head><title>Kettle</title>
<meta property="og:title" content="Kettle"><meta property="og:type" content="product">
<meta name="twitter:card" content="summary">
<script type="application/ld+json">
{"@context": "https://schema.org", "@graph": [
  {"@type": "Product", "name": "Kettle", "offers": {"@type": "Offer", "price": "19.99", "priceCurrency": "EUR"}},
  {"@type": "BreadcrumbList", "itemListElement": []}
]}
</script>
<script type="application/ld+json">{"@type": "Organization", "name": "broken",}</script>
</head><body><p>A kettle for sale.</p></body></html>`
	r.produce(ctx, htmlPage("http://127.0.0.2/kettle", 1, product, now),
		htmlPage("http://127.0.0.2/plain", 1, "<html><body><p>Nothing structured here.</p></body></html>", now))

	const (
		wantLD = `[{"@type":"Product","name":"Kettle","offers":{"@type":"Offer","price":"19.99","priceCurrency":"EUR"}},` +
			`{"@type":"BreadcrumbList","itemListElement":[]}]`
		wantOG = `{"og:title":"Kettle","og:type":"product","twitter:card":"summary"}`
	)
	published := readDocuments(t, ctx, r.kc, 2)
	for _, d := range published {
		if d.GetUrl() == "http://127.0.0.2/kettle" && (d.GetJsonLd() != wantLD || d.GetOpengraph() != wantOG || d.GetStructuredErrors() != 1) {
			t.Errorf("published document: json_ld %s opengraph %s errors %d", d.GetJsonLd(), d.GetOpengraph(), d.GetStructuredErrors())
		}
	}

	got := storedByURL(t, ctx, store, `SELECT d.url, d.json_ld, d.opengraph, toString(m.structured_errors)
FROM (SELECT url, url_fp, json_ld, opengraph FROM documents FINAL WHERE crawl_id = 'c') AS d
ANY INNER JOIN (SELECT url_fp, structured_errors FROM document_meta FINAL WHERE crawl_id = 'c') AS m USING url_fp`, 2)
	if g := got["http://127.0.0.2/kettle"]; !slices.Equal(g, []string{wantLD, wantOG, "1"}) {
		t.Errorf("kettle: json_ld, opengraph, structured_errors %q", g)
	}
	if g := got["http://127.0.0.2/plain"]; !slices.Equal(g, []string{"", "", "0"}) {
		t.Errorf("plain page: %q, want empty", g)
	}
	// The analysts' query (docs/analyst-queries.md) over the stored row.
	var name, price string
	if err := store.Conn().QueryRow(ctx, `SELECT visitParamExtractString(json_ld, 'name'), visitParamExtractString(json_ld, 'price')
FROM documents FINAL WHERE crawl_id = 'c' AND json_ld LIKE '%"@type":"Product"%'`).Scan(&name, &price); err != nil {
		t.Fatalf("analyst query: %v", err)
	}
	if name != "Kettle" || price != "19.99" {
		t.Errorf("analyst query: name %q price %q", name, price)
	}
}
