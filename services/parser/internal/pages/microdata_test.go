package pages_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestMicrodataStored: a product page marked up with microdata (a
// schema.org Product with a nested Offer), produced to the broker, lands
// in ClickHouse with its item in documents.microdata, and the document
// published carries it too. A page without microdata stores the empty
// string.
func TestMicrodataStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r, store := startDocumentParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true}, now)

	product := `<!doctype html><html><head><title>Kettle</title></head><body>
<div itemscope itemtype="https://schema.org/Product">
  <h1 itemprop="name">Electric Kettle</h1>
  <img itemprop="image" src="/img/kettle.jpg" alt="">
  <div itemprop="offers" itemscope itemtype="https://schema.org/Offer">
    <span itemprop="price" content="19.99">19,99 €</span>
    <meta itemprop="priceCurrency" content="EUR">
  </div>
</div></body></html>`
	r.produce(ctx, htmlPage("http://127.0.0.2/kettle", 1, product, now),
		htmlPage("http://127.0.0.2/plain", 1, "<html><body><p>No items here.</p></body></html>", now))

	const want = `[{"@type":"https://schema.org/Product","name":"Electric Kettle","image":"http://127.0.0.2/img/kettle.jpg",` +
		`"offers":{"@type":"https://schema.org/Offer","price":"19.99","priceCurrency":"EUR"}}]`
	published := readDocuments(t, ctx, r.kc, 2)
	for _, d := range published {
		if d.GetUrl() == "http://127.0.0.2/kettle" && d.GetMicrodata() != want {
			t.Errorf("published document: microdata %s, want %s", d.GetMicrodata(), want)
		}
	}

	got := storedByURL(t, ctx, store, `SELECT url, microdata FROM documents FINAL WHERE crawl_id = 'c'`, 2)
	if g := got["http://127.0.0.2/kettle"]; !slices.Equal(g, []string{want}) {
		t.Errorf("kettle: microdata %s, want %s", g, want)
	}
	if g := got["http://127.0.0.2/plain"]; !slices.Equal(g, []string{""}) {
		t.Errorf("plain page: microdata %q, want ''", g)
	}
	// A query an analyst can run on 18.16: the product's price.
	var price string
	if err := store.Conn().QueryRow(ctx, `SELECT visitParamExtractString(microdata, 'price')
FROM documents FINAL WHERE crawl_id = 'c' AND position(microdata, '"@type":"https://schema.org/Product"') > 0`).Scan(&price); err != nil {
		t.Fatalf("analyst query: %v", err)
	}
	if price != "19.99" {
		t.Errorf("analyst query: price %q", price)
	}
}
