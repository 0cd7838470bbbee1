package pages_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestRenderedStored: a page the fetcher's browser built (FetchedPage
// rendered, render_outcome) is stored with its outcome in
// documents.rendered and its links and text are the DOM's; a page as
// fetched stores ”.
func TestRenderedStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r, store := startDocumentParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048}, now)

	built := htmlPage("http://127.0.0.2/app", 1, `<html><head><title>Built</title></head><body><div id="app"><p>Text the script wrote.</p><a href="/item/1">one</a></div></body></html>`, now)
	built.Rendered, built.RenderOutcome = true, "timeout"
	r.produce(ctx, built, htmlPage("http://127.0.0.2/plain", 1, "<html><body><p>As fetched.</p></body></html>", now))

	got := storedByURL(t, ctx, store, `SELECT url, rendered FROM documents FINAL WHERE crawl_id = 'c'`, 2)
	if g := got["http://127.0.0.2/app"]; !slices.Equal(g, []string{"timeout"}) {
		t.Errorf("rendered page: rendered %q, want timeout", g)
	}
	if g := got["http://127.0.0.2/plain"]; !slices.Equal(g, []string{""}) {
		t.Errorf("page as fetched: rendered %q, want ''", g)
	}
	text := storedByURL(t, ctx, store, `SELECT url, text FROM documents FINAL WHERE crawl_id = 'c' AND rendered != ''`, 1)
	if g := text["http://127.0.0.2/app"]; len(g) != 1 || g[0] != "Text the script wrote.\none" {
		t.Errorf("rendered page's text %q", g)
	}
}
