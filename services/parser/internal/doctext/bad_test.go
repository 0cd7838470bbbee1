package doctext

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestBadInput: every broken, hostile or slow document ends within its time
// limit, its memory bounded, in the error kind that names it.
func TestBadInput(t *testing.T) {
	report := readCorpus(t, "report.pdf")
	reportDocx := readCorpus(t, "report.docx")

	// A PDF page whose content inflates from ~0.5 MB to 512 MiB: past the
	// WebAssembly memory of the bomb extractor (64 MiB).
	bomb := buildPDF(t, makeRepeated(t, "", " ", 512<<20, "").zlib(), true)
	// A PDF page of 2 million short text objects (26 MB): PDFium takes
	// seconds on it, within one call.
	slowPDF := buildPDF(t, makeRepeated(t, "BT /F1 1 Tf\n", "1 0 Td (x) Tj\n", 26<<20, "ET\n").zlib(), true)

	garbage := make([]byte, 64<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(r.UintN(256))
	}
	malformed := append(append([]byte("%PDF-1.7\n"), garbage...), "\n%%EOF\n"...)

	// A docx whose document inflates to 256 MiB (0.25 MB deflated).
	zipBomb := docx(t, zipEntry{raw: ptr(makeRepeated(t, `<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>`, "a", 256<<20, `</w:t></w:r></w:p></w:body></w:document>`))})
	// A docx whose document is 60 MB of empty runs: slow to stream.
	slowDocx := docx(t, zipEntry{raw: ptr(makeRepeated(t, `<w:document xmlns:w="w"><w:body><w:p>`, `<w:r><w:t/></w:r>`, 60<<20, `</w:p></w:body></w:document>`))})
	var many []zipEntry
	for i := range 20_000 {
		many = append(many, zipEntry{name: fmt.Sprintf("f%05d.xml", i), data: "<x/>"})
	}
	manyEntries := buildZip(t, append([]zipEntry{{name: "word/document.xml", data: "<w:document/>"}}, many...)...)
	laughs := docx(t, zipEntry{data: `<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
<!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">]>
<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>`})
	// A password-protected ODF file: its manifest says content.xml is
	// encrypted (as LibreOffice writes it), its bytes are noise.
	odtLocked := buildZip(t,
		zipEntry{name: "mimetype", data: "application/vnd.oasis.opendocument.text"},
		zipEntry{name: "META-INF/manifest.xml", data: `<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml" manifest:size="3000"><manifest:encryption-data manifest:checksum-type="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0#sha256-1k" manifest:checksum="x"><manifest:algorithm manifest:algorithm-name="http://www.w3.org/2001/04/xmlenc#aes256-cbc" manifest:initialisation-vector="x"/></manifest:encryption-data></manifest:file-entry></manifest:manifest>`},
		zipEntry{name: "content.xml", data: string(garbage[:3000])})
	// A password-protected docx: an OLE compound file (its header and the
	// names of its streams, UTF-16LE, as Office writes them).
	docxLocked := append(append([]byte{}, cfbMagic...), make([]byte, 504)...)
	docxLocked = append(docxLocked, utf16le("EncryptionInfo")...)
	docxLocked = append(docxLocked, utf16le("EncryptedPackage")...)
	legacyDoc := append(append([]byte{}, cfbMagic...), utf16le("WordDocument")...)
	odtNoContent := buildZip(t, zipEntry{name: "mimetype", data: "application/vnd.oasis.opendocument.text"}, zipEntry{name: "meta.xml", data: "<office:document-meta/>"})

	bombExtractor := New(Config{CacheDir: testExtractor.cfg.CacheDir, PDFMemory: 64 << 20, PDFWorkers: 1})
	defer bombExtractor.Close()
	if _, err := bombExtractor.Extract(t.Context(), "", readCorpus(t, "deck.pdf"), nil, Limits{}); err != nil {
		t.Fatal(err) // started before it is measured
	}
	// The zip bomb again, its central directory claiming 1000 bytes.
	lying := bytes.Clone(zipBomb)
	cd := bytes.LastIndex(lying, []byte("PK\x01\x02"))
	if cd < 0 || !bytes.HasPrefix(lying[cd+46:], []byte("word/document.xml")) {
		t.Fatal("no central directory entry for word/document.xml")
	}
	copy(lying[cd+24:cd+28], []byte{0xe8, 0x03, 0, 0})

	tests := []struct {
		name        string
		ext         *Extractor
		contentType string
		body        []byte
		lim         Limits
		want        string
		maxAlloc    int64 // most the Go heap may grow reading it
	}{
		{name: "encrypted pdf", body: readCorpus(t, "encrypted.pdf"), want: KindEncrypted},
		{name: "truncated pdf", body: report[:len(report)/2], want: KindTruncated},
		{name: "pdf cut near its end", body: report[:len(report)*99/100], want: KindTruncated},
		{name: "pdf cut in its header", body: report[:20], want: KindTruncated},
		{name: "malformed pdf", body: malformed, want: KindMalformed},
		{name: "pdf bomb", ext: bombExtractor, body: bomb, want: KindTooLarge, maxAlloc: 4 * 64 << 20},
		{name: "slow pdf", body: slowPDF, lim: Limits{MaxTime: 300 * time.Millisecond}, want: KindTimeout},
		{name: "docx zip bomb", body: zipBomb, lim: Limits{MaxDecompressed: 16 << 20}, want: KindTooLarge, maxAlloc: 64 << 20},
		{name: "docx zip bomb, size hidden", body: lying, lim: Limits{MaxDecompressed: 16 << 20}, want: KindMalformed, maxAlloc: 64 << 20},
		{name: "docx of many entries", body: manyEntries, lim: Limits{MaxEntries: 10_000}, want: KindTooLarge},
		{name: "billion laughs", body: laughs, want: KindMalformed, maxAlloc: 16 << 20},
		{name: "slow docx", body: slowDocx, lim: Limits{MaxTime: 100 * time.Millisecond, MaxDecompressed: 128 << 20}, want: KindTimeout},
		{name: "truncated docx", body: reportDocx[:len(reportDocx)-200], want: KindTruncated},
		{name: "odt without content", body: odtNoContent, want: KindMalformed},
		{name: "encrypted odt", body: odtLocked, want: KindEncrypted},
		{name: "encrypted docx", contentType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", body: docxLocked, want: KindEncrypted},
		{name: "legacy doc named docx", contentType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", body: legacyDoc, want: KindUnsupported},
		{name: "not a zip", contentType: "application/vnd.oasis.opendocument.text", body: []byte("hello"), want: KindMalformed},
		{name: "html", contentType: "text/html", body: []byte("<p>hi"), want: KindUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ext := tt.ext
			if ext == nil {
				ext = testExtractor
			}
			lim := tt.lim
			if lim.MaxTime == 0 {
				lim.MaxTime = 10 * time.Second
			}
			peak := startPeak()
			start := time.Now()
			doc, err := ext.Extract(t.Context(), tt.contentType, tt.body, nil, lim)
			took := time.Since(start)
			alloc := peak()
			t.Logf("%s after %v, peak heap +%d MB: %v", ErrorKind(err), took.Round(time.Millisecond), alloc>>20, err)
			if got := ErrorKind(err); got != tt.want {
				t.Errorf("kind %q, want %q (%v)", got, tt.want, err)
			}
			// The deadline, and time to unwind from it.
			if took > lim.MaxTime+2*time.Second {
				t.Errorf("took %v, limit %v", took, lim.MaxTime)
			}
			if tt.maxAlloc > 0 && alloc > tt.maxAlloc {
				t.Errorf("heap grew by %d MB, want at most %d MB", alloc>>20, tt.maxAlloc>>20)
			}
			if len(doc.Text) > DefaultLimits.MaxTextBytes {
				t.Errorf("%d bytes of text", len(doc.Text))
			}
		})
	}
	// The extractor still reads PDFs after killing instances.
	doc, err := testExtractor.Extract(t.Context(), "application/pdf", readCorpus(t, "deck.pdf"), nil, Limits{})
	if err != nil || !strings.Contains(doc.Text, "pelican") {
		t.Errorf("after the bad input: %v, %q", err, doc.Text)
	}
}

func ptr[T any](v T) *T { return &v }
