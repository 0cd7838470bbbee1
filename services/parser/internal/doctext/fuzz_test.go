package doctext

import (
	"archive/zip"
	"bytes"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// fuzzLimits keep one input's work small.
var fuzzLimits = Limits{MaxTextBytes: 64 << 10, MaxTime: 2 * time.Second, MaxDecompressed: 8 << 20, MaxEntries: 500, MaxPages: 20}

// checkDoc states the invariants of every Extract: it never panics (no
// KindPanic), it ends near its time limit, every error has a kind, the
// text is valid UTF-8 within MaxTextBytes, every link is an absolute
// http(s) URL.
func checkDoc(t *testing.T, contentType string, body []byte) {
	base, _ := url.Parse("https://fuzz.example/dir/doc")
	start := time.Now()
	doc, err := testExtractor.Extract(t.Context(), contentType, body, base, fuzzLimits)
	if took := time.Since(start); took > fuzzLimits.MaxTime+2*time.Second {
		t.Errorf("took %v", took)
	}
	switch ErrorKind(err) {
	case "", KindEncrypted, KindTruncated, KindMalformed, KindTooLarge, KindTimeout, KindUnsupported:
	default:
		t.Fatalf("error kind %q: %v", ErrorKind(err), err)
	}
	if len(doc.Text) > fuzzLimits.MaxTextBytes || !utf8.ValidString(doc.Text) || !utf8.ValidString(doc.Title) {
		t.Errorf("text of %d bytes, valid UTF-8 %v", len(doc.Text), utf8.ValidString(doc.Text))
	}
	for _, l := range doc.Links {
		u, err := url.Parse(l)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Errorf("link %q", l)
		}
	}
}

// FuzzPDF feeds PDFium any bytes as a PDF. Invariants: those of checkDoc.
func FuzzPDF(f *testing.F) {
	for _, name := range []string{"deck.pdf", "columns.pdf", "encrypted.pdf", "debian-xpdfimport-err.pdf"} {
		b := readCorpus(f, name)
		f.Add(b)
		f.Add(b[:len(b)/3])
	}
	f.Add(buildPDF(f, []byte("BT /F1 12 Tf 72 700 Td (Hello https://example.com/x) Tj ET"), false))
	f.Add([]byte("%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n%%EOF"))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDoc(t, "application/pdf", body)
	})
}

// FuzzOffice feeds the office readers any bytes, typed as each format or
// sniffed. Invariants: those of checkDoc.
func FuzzOffice(f *testing.F) {
	for _, name := range []string{"report.docx", "sales.xlsx", "deck.pptx", "report.odt", "sales.ods", "deck.odp"} {
		b := readCorpus(f, name)
		f.Add(uint8(0), b)
		f.Add(uint8(1), b[:len(b)*2/3])
	}
	f.Fuzz(func(t *testing.T, format uint8, body []byte) {
		types := []string{""}
		for mt := range mediaTypes {
			if !strings.Contains(mt, "pdf") {
				types = append(types, mt)
			}
		}
		// The map's order varies; the format picks a type by its sorted rank.
		slices.Sort(types)
		checkDoc(t, types[int(format)%len(types)], body)
	})
}

// FuzzOfficeXML puts any XML as the main part of a real document of each
// format (document.xml, the first sheet, the first slide, content.xml), so
// that the XML walkers see what a mutated zip rarely gets them to.
// Invariants: those of checkDoc.
func FuzzOfficeXML(f *testing.F) {
	parts := []struct{ file, part string }{
		{"report.docx", "word/document.xml"},
		{"sales.xlsx", "xl/worksheets/sheet1.xml"},
		{"sales.xlsx", "xl/sharedStrings.xml"},
		{"deck.pptx", "ppt/slides/slide1.xml"},
		{"report.odt", "content.xml"},
		{"sales.ods", "content.xml"},
		{"deck.odp", "content.xml"},
		{"report.docx", "docProps/core.xml"},
		{"report.odt", "meta.xml"},
	}
	docs := make([][]byte, len(parts))
	for i, p := range parts {
		docs[i] = readCorpus(f, p.file)
		f.Add(uint8(i), entry(f, docs[i], p.part))
	}
	f.Add(uint8(0), []byte(`<w:document><w:body><w:tbl><w:tr><w:tc><w:p><w:r><w:t>a</w:t></w:r></w:p></w:tc></w:tr></w:tbl><w:hyperlink r:id="rId1"/></w:body></w:document>`))
	f.Add(uint8(4), []byte(`<office:document-content><office:body><text:p>a<text:s text:c="99999999"/>b<text:a xlink:href="/rel">c</text:a></text:p></office:body></office:document-content>`))
	f.Fuzz(func(t *testing.T, which uint8, xml []byte) {
		i := int(which) % len(parts)
		checkDoc(t, "", replaceEntry(t, docs[i], parts[i].part, xml))
	})
}

// entry returns the bytes of a zip's entry.
func entry(t testing.TB, body []byte, name string) []byte {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replaceEntry returns the zip with one entry's bytes replaced.
func replaceEntry(t testing.TB, body []byte, name string, data []byte) []byte {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if f.Name != name {
			if err := zw.Copy(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
