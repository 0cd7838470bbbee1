package httpfetch

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
)

const (
	traditional = "中華民國是一個位於東亞的國家，首都臺北市是全國的政治、經濟與文化中心。" +
		"臺灣島上有高山、平原與海岸，氣候溫暖潮濕，物產豐富。夜市是臺灣著名的文化特色，" +
		"人們在這裡品嚐各式各樣的小吃，例如珍珠奶茶、蚵仔煎與牛肉麵。"
	japaneseText = "日本は東アジアに位置する島国で、首都は東京です。四季がはっきりしていて、" +
		"春には桜が咲き、秋には紅葉が美しく色づきます。日本料理は世界中で人気があり、" +
		"寿司やラーメン、天ぷらなどがよく知られています。新幹線は速くて正確な高速鉄道です。"
)

// TestToUTF8CJK: GBK, GB18030, Big5 and Shift_JIS pages reach the parser
// as UTF-8 whether the charset is in the header, in a <meta> placed after
// the first KiB, or not declared at all.
func TestToUTF8CJK(t *testing.T) {
	encs := []struct {
		label string
		enc   encoding.Encoding
		text  string
		want  []string // acceptable detected names (GB18030 is a superset of GBK)
	}{
		{"gbk", simplifiedchinese.GBK, chinese, []string{"gbk", "gb18030"}},
		{"gb18030", simplifiedchinese.GB18030, chinese + "€", []string{"gb18030"}},
		{"big5", traditionalchinese.Big5, traditional, []string{"big5"}},
		{"shift_jis", japanese.ShiftJIS, japaneseText, []string{"shift_jis"}},
	}
	for _, e := range encs {
		for _, mode := range []string{"header", "late-meta", "undeclared"} {
			t.Run(e.label+"/"+mode, func(t *testing.T) {
				head := "<html><head><title>t</title>"
				header := "text/html"
				switch mode {
				case "header":
					header = "text/html; charset=" + e.label
				case "late-meta":
					// a long <head> pushes the declaration past 1 KiB
					head += "<script>" + strings.Repeat("var x = 1;\n", 150) + "</script>" +
						`<meta http-equiv="Content-Type" content="text/html; charset=` + e.label + `">`
				}
				src := head + "</head><body><p>" + e.text + "</p></body></html>"
				if mode == "undeclared" && e.label == "gb18030" {
					// without a declaration GB18030 text is indistinguishable
					// from GBK unless it uses four-byte sequences
					src = head + "</head><body><p>" + chinese + "</p></body></html>"
				}
				body, err := e.enc.NewEncoder().Bytes([]byte(src))
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				out, cs := ToUTF8(body, header, "text/html")
				want := e.text
				if mode == "undeclared" && e.label == "gb18030" {
					want = chinese
				}
				if !strings.Contains(string(out), want) {
					t.Errorf("charset %q: text not recovered: %.80q", cs, out)
				}
				ok := false
				for _, w := range e.want {
					ok = ok || cs == w
				}
				if !ok {
					t.Errorf("charset = %q, want one of %v", cs, e.want)
				}
			})
		}
	}
}

func TestReadAllWithHint(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	for _, hint := range []int64{0, 1, 9999, 10000, 10001, 50000} {
		got, err := readAll(iotest.OneByteReader(bytes.NewReader(body)), hint)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("hint %d: %d bytes, %v; want the %d bytes", hint, len(got), err, len(body))
		}
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error = %v, want it returned", err)
	}
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		_, _ = readAll(r, int64(len(body)))
	})
	if allocs > 1 {
		t.Errorf("%v allocations for a body of its announced length, want 1", allocs)
	}
}
