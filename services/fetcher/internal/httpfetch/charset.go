package httpfetch

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"
)

// ToUTF8 converts a text body to UTF-8 and returns the name of the charset
// it was decoded from. The charset comes, in order, from a byte-order mark,
// the Content-Type header, a <meta> declaration (HTML prescan), and for
// undeclared pages: valid UTF-8, then statistical detection (chardet),
// then windows-1252 (the HTML default). Invalid sequences become U+FFFD.
func ToUTF8(body []byte, contentTypeHeader, mediaType string) ([]byte, string) {
	return toUTF8(body, contentTypeHeader, mediaType, newBuffer)
}

// toUTF8 is ToUTF8 decoding a body that needs converting into a buffer
// from get (empty, with room for the given number of bytes); it returns
// body itself when it is valid UTF-8 already.
func toUTF8(body []byte, contentTypeHeader, mediaType string, get func(int) []byte) ([]byte, string) {
	enc, name := detect(body, contentTypeHeader, mediaType)
	if name == "utf-8" {
		if utf8.Valid(body) {
			return body, name // the common case: nothing to copy
		}
		return bytes.ToValidUTF8(body, []byte("\uFFFD")), name
	}
	// Room for two-byte sequences becoming three (GBK's Chinese).
	out, _, err := transform.Append(enc.NewDecoder(), get(len(body)+len(body)/2), body)
	if err != nil {
		return bytes.ToValidUTF8(body, []byte("\uFFFD")), "utf-8"
	}
	return out, name
}

func newBuffer(n int) []byte { return make([]byte, 0, n) }

func detect(body []byte, contentTypeHeader, mediaType string) (encoding.Encoding, string) {
	// DetermineEncoding: certain for a BOM or a header charset; for a
	// <meta> declaration it returns the declared name uncertain; without
	// any it falls back to windows-1252.
	enc, name, certain := charset.DetermineEncoding(body, contentTypeHeader)
	if certain || (name != "windows-1252" && name != "") {
		return enc, name
	}
	// The standard prescan stops at 1 KiB; pages with long heads declare
	// later. Look further for a <meta> declaration before guessing.
	if mediaType == "text/html" || mediaType == "application/xhtml+xml" {
		if m := lateMeta.FindSubmatch(body[:min(len(body), metaScanBytes)]); m != nil {
			if e, n := lookup(string(m[1])); e != nil {
				return e, n
			}
		}
	}
	if utf8.Valid(trimIncompleteRune(body)) {
		return encoding.Nop, "utf-8"
	}
	det := chardet.NewTextDetector()
	if mediaType == "text/html" || mediaType == "application/xhtml+xml" {
		det = chardet.NewHtmlDetector()
	}
	if r, err := det.DetectBest(body); err == nil && r.Confidence >= 30 {
		if e, n := lookup(r.Charset); e != nil {
			return e, n
		}
	}
	return enc, name
}

// metaScanBytes is how far into an HTML body a <meta> charset is looked for.
const metaScanBytes = 64 << 10

// lateMeta finds <meta charset=x> and <meta http-equiv content="...; charset=x">.
var lateMeta = regexp.MustCompile(`(?i)<meta\s[^>]*charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)`)

// lookup maps a chardet label to an encoding and its canonical name.
func lookup(label string) (encoding.Encoding, string) {
	switch strings.ToLower(label) {
	case "gb-18030", "gb18030":
		return simplifiedchinese.GB18030, "gb18030"
	case "gb2312", "gbk":
		return simplifiedchinese.GBK, "gbk"
	}
	if e, err := htmlindex.Get(label); err == nil {
		n, _ := htmlindex.Name(e)
		return e, n
	}
	if e, err := ianaindex.IANA.Encoding(label); err == nil && e != nil {
		n, _ := ianaindex.IANA.Name(e)
		return e, strings.ToLower(n)
	}
	return nil, ""
}

// trimIncompleteRune drops a multi-byte sequence cut at the end of b (a
// truncated body), so that it does not make valid UTF-8 look invalid.
func trimIncompleteRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
