package pages_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestDocumentsRead: a crawl that keeps PDFs and docx files has them read
// into documents like pages (text, title, properties; links published);
// an encrypted PDF is a document with parse_error encrypted, not a lost
// page; a PDF of a crawl that keeps none is not_html; a PDF sent with
// X-Robots-Tag noindex publishes its links but stores no document.
func TestDocumentsRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, Documents: &crawlv1.Documents{ContentTypes: []string{doctypes.PDF, doctypes.DOCX}}})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "html-only", Revision: 1})
	r, store := startDocumentParserSpecs(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true, DocumentTimeout: 60 * time.Second}, specs, now)

	corpus := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "doctext", "testdata", "corpus", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	doc := func(crawl, u, ct string, body []byte, headers map[string]string) *crawlv1.FetchedPage {
		return &crawlv1.FetchedPage{CrawlId: crawl, Url: u, Depth: 1, FetchedAt: timestamppb.New(now), StatusCode: 200,
			ContentType: ct, Body: body, Headers: headers}
	}
	r.produce(ctx,
		doc("c", "http://127.0.0.2/report.pdf", doctypes.PDF, corpus("report.pdf"), nil),
		doc("c", "http://127.0.0.2/report.docx", doctypes.DOCX, corpus("report.docx"), nil),
		doc("c", "http://127.0.0.2/secret.pdf", doctypes.PDF, corpus("encrypted.pdf"), nil),
		doc("c", "http://127.0.0.2/private.pdf", doctypes.PDF, corpus("columns.pdf"), map[string]string{"x-robots-tag": "noindex"}),
		doc("html-only", "http://127.0.0.2/report.pdf", doctypes.PDF, corpus("report.pdf"), nil),
	)

	got := storedByURL(t, ctx, store, `SELECT d.url, d.title, d.content_type, toString(visitParamExtractUInt(d.properties, 'pages')),
visitParamExtractString(d.properties, 'author'), m.parse_error, toString(position(d.text, 'marker3alpha') > 0)
FROM (SELECT url, url_fp, title, content_type, properties, text FROM documents FINAL WHERE crawl_id = 'c') AS d
ANY INNER JOIN (SELECT url_fp, parse_error FROM document_meta FINAL WHERE crawl_id = 'c') AS m USING url_fp`, 3)
	for u, want := range map[string][]string{
		"http://127.0.0.2/report.pdf":  {"Trawl Reference Report", doctypes.PDF, "6", "Ada Lovelace", "", "1"},
		"http://127.0.0.2/report.docx": {"Trawl Reference Report", doctypes.DOCX, "6", "Ada Lovelace", "", "1"},
	} {
		if !slices.Equal(got[u], want) {
			t.Errorf("%s: title, type, pages, author, parse_error, has the text: %q, want %q", u, got[u], want)
		}
	}
	if g := got["http://127.0.0.2/secret.pdf"]; len(g) != 6 || g[4] != "encrypted" {
		t.Errorf("encrypted PDF: %q, want a document with parse_error encrypted", g)
	}
	if _, ok := got["http://127.0.0.2/private.pdf"]; ok {
		t.Error("a noindex PDF was stored as a document")
	}

	// Links: the report's chapters, from the PDF and the docx (the docx's
	// are a subset, published once by the recent-links table), and the
	// noindex PDF's note link; none from the crawl that keeps no PDFs.
	var urls []string
	for _, d := range readDiscovered(t, ctx, r.kc, 11) {
		urls = append(urls, d.url)
		if !strings.HasPrefix(d.parent, "http://127.0.0.2/") || d.depth != 2 {
			t.Errorf("link %s: parent %s depth %d", d.url, d.parent, d.depth)
		}
	}
	slices.Sort(urls)
	for _, want := range []string{"https://example.org/chapter/1", "https://example.org/chapter/5", "https://example.com/plain/3", "https://example.net/notes"} {
		if _, found := slices.BinarySearch(urls, want); !found {
			t.Errorf("links %q: no %s", urls, want)
		}
	}
	if n := counterValue(t, r.reg, "pages_parsed_total", "outcome", pages.OutcomeNotHTML); n != 1 {
		t.Errorf("not_html pages = %v, want 1 (the PDF of the crawl that keeps none)", n)
	}
	if n := counterValue(t, r.reg, "documents_read_total", "format", "pdf", "result", "encrypted"); n != 1 {
		t.Errorf("documents_read_total{pdf,encrypted} = %v, want 1", n)
	}
}
