package pages_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
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
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, fast, log, nil)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, fast, log, nil)
	runWriters(t, docs, meta, seen)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, PublishDocuments: true},
		pages.Sinks{Documents: docs, Meta: meta, ContentSeen: seen, Seen: store}, now)

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

	type row struct {
		ld, og string
		errs   uint16
	}
	got := make(map[string]row)
	waitFor(t, ctx, "documents and document_meta rows", func() bool {
		rows, err := store.Conn().Query(ctx, `SELECT d.url, d.json_ld, d.opengraph, m.structured_errors
FROM (SELECT url, url_fp, json_ld, opengraph FROM documents FINAL WHERE crawl_id = 'c') AS d
ANY INNER JOIN (SELECT url_fp, structured_errors FROM document_meta FINAL WHERE crawl_id = 'c') AS m USING url_fp`)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		defer rows.Close()
		clear(got)
		for rows.Next() {
			var (
				url string
				r   row
			)
			if err := rows.Scan(&url, &r.ld, &r.og, &r.errs); err != nil {
				t.Fatalf("scan: %v", err)
			}
			got[url] = r
		}
		return len(got) == 2
	})
	if g := got["http://127.0.0.2/kettle"]; g != (row{wantLD, wantOG, 1}) {
		t.Errorf("kettle: json_ld %s\nopengraph %s\nstructured_errors %d", g.ld, g.og, g.errs)
	}
	if g := got["http://127.0.0.2/plain"]; g != (row{}) {
		t.Errorf("plain page: %+v, want empty", g)
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
