package httpfetch

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// TestFetchKeepsDocuments: a body of a media type the crawl keeps
// (Request.Keep: a PDF) is downloaded as received, not converted, within
// MaxDocumentBytes even when larger than MaxBodyBytes, also when its type
// is sniffed or only its extension says it; the same body of a crawl that does not keep it is not
// downloaded; a document over its cap is truncated and says so.
func TestFetchKeepsDocuments(t *testing.T) {
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte{0xff, 0xfe, 0x00, 'x'}, 8<<10)...) // 32 KiB + header, not UTF-8
	mux := http.NewServeMux()
	mux.HandleFunc("/manual.pdf", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write(pdf)
	})
	mux.HandleFunc("/untyped", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = nil // sniffed: %PDF- is application/pdf
		_, _ = w.Write(pdf)
	})
	mux.HandleFunc("/files/Manual.PDF", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(pdf)
	})
	base := serve(t, "127.0.0.2", mux)
	f := New(Options{AllowPrivate: true, MaxBodyBytes: 4 << 10, MaxDocumentBytes: 64 << 10})
	defer f.Close()
	keep := []string{"application/pdf"}

	r := f.Fetch(t.Context(), Request{URL: base + "/manual.pdf", Keep: keep})
	if r.Kind != failure.None || r.ContentType != "application/pdf" || !bytes.Equal(r.Body, pdf) || r.Charset != "" || r.Truncated {
		t.Errorf("kept PDF: kind %q type %q %d bytes (equal %v) charset %q truncated %v; want the %d bytes as received",
			r.Kind, r.ContentType, len(r.Body), bytes.Equal(r.Body, pdf), r.Charset, r.Truncated, len(pdf))
	}
	// A server that says only application/octet-stream: the extension
	// tells, and the body is read as a PDF.
	r = f.Fetch(t.Context(), Request{URL: base + "/files/Manual.PDF", Keep: keep})
	if r.ContentType != "application/pdf" || !bytes.Equal(r.Body, pdf) {
		t.Errorf("octet-stream .PDF: type %q, %d bytes; want application/pdf, the %d bytes", r.ContentType, len(r.Body), len(pdf))
	}
	r = f.Fetch(t.Context(), Request{URL: base + "/manual.pdf"})
	if r.Status != 200 || len(r.Body) != 0 {
		t.Errorf("PDF of a crawl that keeps none: status %d, %d bytes; want 200 and no body", r.Status, len(r.Body))
	}
	// Sniffed after the read: the page's cap applies (the type was not
	// known when the read began).
	r = f.Fetch(t.Context(), Request{URL: base + "/untyped", Keep: keep})
	if r.ContentType != "application/pdf" || len(r.Body) != 4<<10 || !bytes.Equal(r.Body, pdf[:4<<10]) || !r.Truncated {
		t.Errorf("sniffed PDF: type %q, %d bytes, truncated %v; want application/pdf cut at 4 KiB as received", r.ContentType, len(r.Body), r.Truncated)
	}
	small := New(Options{AllowPrivate: true, MaxBodyBytes: 4 << 10, MaxDocumentBytes: 16 << 10})
	defer small.Close()
	r = small.Fetch(t.Context(), Request{URL: base + "/manual.pdf", Keep: keep})
	if r.Kind != failure.BodyTooLarge || !r.Truncated || len(r.Body) != 16<<10 {
		t.Errorf("PDF over its cap: kind %q truncated %v, %d bytes; want body_too_large at 16 KiB", r.Kind, r.Truncated, len(r.Body))
	}
}
