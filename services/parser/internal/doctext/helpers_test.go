package doctext

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// buildPDF writes a one-page PDF whose page content is content (deflated
// when deflate is set), with Helvetica as /F1, and a correct xref table.
func buildPDF(t testing.TB, content []byte, deflate bool) []byte {
	t.Helper()
	stream, filter := content, ""
	if deflate {
		var buf bytes.Buffer
		zw, err := flate.NewWriter(&buf, flate.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		// zlib framing: PDF's FlateDecode is zlib, header 78 DA.
		zw.Write(content)
		zw.Close()
		stream = append([]byte{0x78, 0xda}, buf.Bytes()...)
		stream = append(stream, adler32(content)...)
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

func adler32(b []byte) []byte {
	const mod = 65521
	a, s := uint32(1), uint32(0)
	for len(b) > 0 {
		n := min(len(b), 5552)
		for _, c := range b[:n] {
			a += uint32(c)
			s += a
		}
		a %= mod
		s %= mod
		b = b[n:]
	}
	v := s<<16 | a
	return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

// zipEntry is a file of a zip built by buildZip; a non-nil r streams the
// content (for large generated entries).
type zipEntry struct {
	name string
	data string
	r    io.Reader
}

func buildZip(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		method := zip.Deflate
		if e.name == "mimetype" {
			method = zip.Store
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if e.r != nil {
			_, err = io.Copy(w, e.r)
		} else {
			_, err = io.WriteString(w, e.data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// docx returns a minimal docx whose document.xml is doc.
func docx(t testing.TB, doc io.Reader) []byte {
	return buildZip(t,
		zipEntry{name: "[Content_Types].xml", data: `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`},
		zipEntry{name: "_rels/.rels", data: `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		zipEntry{name: "word/document.xml", r: doc},
	)
}

// repeat is a reader of s repeated n times, then tail.
func repeat(head, s string, n int, tail string) io.Reader {
	return io.MultiReader(strings.NewReader(head), &repeater{s: s, n: n}, strings.NewReader(tail))
}

type repeater struct {
	s    string
	n    int
	left string
}

func (r *repeater) Read(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		if r.left == "" {
			if r.n == 0 {
				break
			}
			r.n--
			r.left = r.s
		}
		k := copy(p, r.left)
		r.left = r.left[k:]
		p = p[k:]
		total += k
	}
	if total == 0 {
		return 0, io.EOF
	}
	return total, nil
}
