package doctext

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testExtractor is the package's tests' one Extractor: PDFium is compiled
// once per run (and kept between runs in the temporary directory).
var testExtractor *Extractor

func TestMain(m *testing.M) {
	testExtractor = New(Config{CacheDir: filepath.Join(os.TempDir(), "trawl-doctext-test-cache")})
	code := m.Run()
	if err := testExtractor.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "close extractor:", err)
		code = 1
	}
	os.Exit(code)
}

func readCorpus(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildPDF writes a one-page PDF whose page content is stream (a zlib
// stream, FlateDecode, when deflated is set), with Helvetica as /F1, and a
// correct xref table.
func buildPDF(t testing.TB, stream []byte, deflated bool) []byte {
	t.Helper()
	filter := ""
	if deflated {
		filter = "/Filter /FlateDecode "
	}
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		"", // the content stream
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var out bytes.Buffer
	out.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = out.Len()
		fmt.Fprintf(&out, "%d 0 obj\n", i+1)
		if i == 3 {
			fmt.Fprintf(&out, "<< %s/Length %d >>\nstream\n", filter, len(stream))
			out.Write(stream)
			out.WriteString("\nendstream")
		} else {
			out.WriteString(o)
		}
		out.WriteString("\nendobj\n")
	}
	xref := out.Len()
	fmt.Fprintf(&out, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&out, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&out, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return out.Bytes()
}

// repeated is a large document made cheaply: head, then unit repeated,
// then tail, as a raw deflate stream built from one compressed chunk of
// units copied over and over. A chunk (≥ 64 KiB, whole units) decodes the
// same after any earlier chunk, since its back references reach at most
// 32 KiB into identical bytes.
type repeated struct {
	deflate []byte
	size    int64  // decompressed
	crc     uint32 // CRC-32 of the decompressed bytes (zip)
	adler   uint32 // Adler-32 of the decompressed bytes (zlib)
}

func makeRepeated(t testing.TB, head, unit string, minSize int64, tail string) repeated {
	t.Helper()
	chunk := strings.Repeat(unit, (64<<10)/len(unit)+1)
	k := max(2, (minSize+int64(len(chunk))-1)/int64(len(chunk)))
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	part := func(s string) []byte {
		buf.Reset()
		if _, err := io.WriteString(zw, s); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		return bytes.Clone(buf.Bytes())
	}
	h, first, next := part(head), part(chunk), part(chunk)
	buf.Reset()
	if _, err := io.WriteString(zw, tail); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil { // writes the final block
		t.Fatal(err)
	}
	end := bytes.Clone(buf.Bytes())

	var out bytes.Buffer
	out.Write(h)
	out.Write(first)
	for range k - 1 {
		out.Write(next)
	}
	out.Write(end)

	crc := crc32.ChecksumIEEE([]byte(head))
	for range k {
		crc = crc32.Update(crc, crc32.IEEETable, []byte(chunk))
	}
	crc = crc32.Update(crc, crc32.IEEETable, []byte(tail))

	ad := adler32.Checksum([]byte(head))
	ad = adlerCombine(ad, adlerRepeat(adler32.Checksum([]byte(chunk)), int64(len(chunk)), k), int64(len(chunk))*k)
	ad = adlerCombine(ad, adler32.Checksum([]byte(tail)), int64(len(tail)))
	return repeated{deflate: out.Bytes(), size: int64(len(head)) + int64(len(chunk))*k + int64(len(tail)), crc: crc, adler: ad}
}

// zlib frames the stream (PDF's FlateDecode).
func (r repeated) zlib() []byte {
	out := append([]byte{0x78, 0xda}, r.deflate...)
	return binary.BigEndian.AppendUint32(out, r.adler)
}

// adlerCombine is zlib's adler32_combine: the checksum of A+B from those of
// A and B and B's length.
func adlerCombine(a1, a2 uint32, len2 int64) uint32 {
	const base = 65521
	rem := uint32(len2 % base)
	sum1 := a1 & 0xffff
	sum2 := uint32((uint64(rem) * uint64(sum1)) % base)
	sum1 += (a2 & 0xffff) + base - 1
	sum2 += (a1 >> 16) + (a2 >> 16) + base - rem
	for sum1 >= base {
		sum1 -= base
	}
	for sum2 >= base {
		sum2 -= base
	}
	return sum2<<16 | sum1
}

// adlerRepeat is the checksum of k copies of a block of length n whose
// checksum is a.
func adlerRepeat(a uint32, n, k int64) uint32 {
	res, resLen := uint32(1), int64(0)
	for ; k > 0; k >>= 1 {
		if k&1 == 1 {
			res = adlerCombine(res, a, n)
			resLen += n
		}
		a = adlerCombine(a, a, n)
		n *= 2
	}
	return res
}

// zipEntry is a file of a zip built by buildZip; a non-nil raw is stored
// as it is (already deflated).
type zipEntry struct {
	name string
	data string
	raw  *repeated
}

func buildZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		if e.raw != nil {
			w, err := zw.CreateRaw(&zip.FileHeader{Name: e.name, Method: zip.Deflate, CRC32: e.raw.crc,
				CompressedSize64: uint64(len(e.raw.deflate)), UncompressedSize64: uint64(e.raw.size)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(e.raw.deflate); err != nil {
				t.Fatal(err)
			}
			continue
		}
		method := zip.Deflate
		if e.name == "mimetype" {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// docx returns a minimal docx whose document.xml is doc, and whose
// document relationships are rels (if any).
func docx(t testing.TB, doc zipEntry, rels ...string) []byte {
	return docxWith(t, doc, rels)
}

// docxWith is docx with more parts (headers, notes, their relationships).
func docxWith(t testing.TB, doc zipEntry, rels []string, parts ...zipEntry) []byte {
	doc.name = "word/document.xml"
	extra := slices.Clone(parts)
	if len(rels) > 0 {
		extra = append(extra, zipEntry{name: "word/_rels/document.xml.rels", data: `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + strings.Join(rels, "") + `</Relationships>`})
	}
	return buildZip(t, append(extra,
		zipEntry{name: "[Content_Types].xml", data: `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`},
		zipEntry{name: "_rels/.rels", data: `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		doc,
	)...)
}

// TestRepeated checks the cheap large documents against the slow way.
func TestRepeated(t *testing.T) {
	r := makeRepeated(t, "<head>", "unit;", 300<<10, "</tail>")
	zr := flate.NewReader(bytes.NewReader(r.deflate))
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	want := "<head>" + strings.Repeat("unit;", (len(got)-len("<head></tail>"))/len("unit;")) + "</tail>"
	if string(got) != want || int64(len(got)) != r.size || len(got) < 300<<10 {
		t.Fatalf("%d bytes decoded, %d said, want %d", len(got), r.size, len(want))
	}
	if crc32.ChecksumIEEE(got) != r.crc || adler32.Checksum(got) != r.adler {
		t.Error("checksums differ")
	}
}
