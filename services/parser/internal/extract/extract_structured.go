package extract

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Structured data: the JSON-LD blocks of a page (<script
// type="application/ld+json">) and its OpenGraph and Twitter card
// properties (<meta property="og:…" content> and <meta name="twitter:…"
// content>), kept as sites publish them, without rules that pick fields,
// and its microdata items (extract_microdata.go).
// Both paths collect them (the stream in the same pass as the other
// metadata, the DOM path from the tree) into a structuredSink.

// MaxStructuredBytes bounds the structured data kept of a page: the
// lengths of Result.JSONLDText(), Result.OpenGraphText() and
// Result.MicrodataText() together.
// What would go past it is dropped and counted (StructuredDropped).
const MaxStructuredBytes = 256 << 10

// Caps of one structured item.
const (
	// maxJSONLDBlockBytes is the longest JSON-LD block parsed: a longer
	// one could not fit the cap once compacted unless it were mostly
	// white space, and parsing it would cost more than it could give.
	maxJSONLDBlockBytes = 4 * MaxStructuredBytes
	maxPropKeyBytes     = 128
	maxPropValueBytes   = 2048
	maxStructuredErr    = 256 // bytes of Result.StructuredError
)

// Property is one OpenGraph or Twitter card property: its key lower-cased
// ("og:title", "twitter:card", "article:published_time"), its content
// with white space collapsed.
type Property struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// structuredSink collects a page's structured data within
// MaxStructuredBytes.
type structuredSink struct {
	items   []string
	props   []Property
	micro   []string        // microdata items (extract_microdata.go)
	nmicro  int             // microdata items kept so far
	seen    map[string]bool // props' keys: the first value of a key wins
	bytes   int             // of the rendered texts, brackets included
	errs    int
	err     string
	dropped int
	buf     bytes.Buffer
}

// emptyTexts is what the brackets of the three rendered texts cost,
// counted once something is kept.
const emptyTexts = 6

// fits reserves n bytes (n counts the separator before the item) of the
// cap, or reports that they do not fit.
func (s *structuredSink) fits(n int) bool { return reserve(&s.bytes, n) }

// reserve is fits on a count of bytes used.
func reserve(used *int, n int) bool {
	if *used == 0 {
		n += emptyTexts
	}
	if *used+n > MaxStructuredBytes {
		return false
	}
	*used += n
	return true
}

// errMalformed is the error of a block that is JSON but neither an object
// nor an array.
var errMalformed = errors.New("json-ld: not an object or array")

// jsonLD adds the items of one JSON-LD block: the block itself when it is
// an object, its elements when it is an array, the elements of its @graph
// when it is an object with one. A block that is not valid JSON counts as
// a structured error; an empty block is ignored.
func (s *structuredSink) jsonLD(block []byte) {
	block = bytes.TrimSpace(block)
	if len(block) == 0 {
		return
	}
	if len(block) > maxJSONLDBlockBytes || s.bytes >= MaxStructuredBytes {
		s.dropped++
		return
	}
	if !utf8.Valid(block) {
		block = bytes.ToValidUTF8(block, []byte("\uFFFD"))
	}
	var items []json.RawMessage
	var err error
	switch block[0] {
	case '[':
		err = json.Unmarshal(block, &items)
	case '{':
		var g struct {
			Graph json.RawMessage `json:"@graph"`
		}
		if err = json.Unmarshal(block, &g); err != nil {
			break
		}
		switch g.Graph = bytes.TrimSpace(g.Graph); {
		case len(g.Graph) > 0 && g.Graph[0] == '[':
			err = json.Unmarshal(g.Graph, &items)
		case len(g.Graph) > 0 && g.Graph[0] == '{':
			items = []json.RawMessage{g.Graph}
		default:
			items = []json.RawMessage{block}
		}
	default:
		err = errMalformed
		if !json.Valid(block) {
			err = json.Unmarshal(block, new(json.RawMessage))
		}
	}
	if err != nil {
		s.errs++
		if s.err == "" {
			s.err = cutUTF8(err.Error(), maxStructuredErr)
		}
		return
	}
	for _, it := range items {
		if string(it) == "null" {
			continue
		}
		s.buf.Reset()
		if err := json.Compact(&s.buf, it); err != nil {
			continue // unreachable: Unmarshal validated it
		}
		if !s.fits(s.buf.Len() + min(len(s.items), 1)) {
			s.dropped++
			continue
		}
		s.items = append(s.items, s.buf.String())
	}
}

// property adds a <meta> whose property (or name) is key, if key is an
// OpenGraph or Twitter card property and the first of its name.
func (s *structuredSink) property(key, content string) {
	key = strings.TrimSpace(key)
	if !structuredKey(key) {
		return
	}
	key = strings.ToValidUTF8(strings.ToLower(key), "\uFFFD")
	if s.seen[key] {
		return
	}
	if len(key) > maxPropKeyBytes {
		s.dropped++
		return
	}
	value := strings.ToValidUTF8(collapseString(content, maxPropValueBytes), "\uFFFD")
	sep := min(len(s.props), 1)
	if !s.fits(jsonStringLen(key) + 1 + jsonStringLen(value) + sep) {
		s.dropped++
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]bool)
	}
	s.seen[key] = true
	s.props = append(s.props, Property{Key: key, Value: value})
}

// structuredPrefixes are the properties kept: OpenGraph's own and those
// of its object types, and Twitter cards'.
var structuredPrefixes = []string{"og:", "twitter:", "article:", "book:", "profile:", "product:", "music:", "video:"}

func structuredKey(key string) bool {
	for _, p := range structuredPrefixes {
		if len(key) > len(p) && strings.EqualFold(key[:len(p)], p) {
			return true
		}
	}
	return false
}

// isJSONLDType reports whether a <script> type attribute is JSON-LD's.
func isJSONLDType(t []byte) bool {
	t = bytes.TrimSpace(t)
	if i := bytes.IndexByte(t, ';'); i >= 0 {
		t = bytes.TrimSpace(t[:i])
	}
	return bytes.EqualFold(t, []byte("application/ld+json"))
}

// structuredDOM collects the structured data of a DOM: the HTML <script>
// elements (not inside a <template>) and <meta> elements, as the stream
// does.
func structuredDOM(root *goquery.Selection, sd *structuredSink) {
	root.Find("script[type], meta[content]").Each(func(_ int, sel *goquery.Selection) {
		n := sel.Get(0)
		if n.Namespace != "" {
			return
		}
		if n.DataAtom == atom.Meta {
			content, _ := sel.Attr("content")
			if p, ok := sel.Attr("property"); ok {
				sd.property(p, content)
			}
			if name, ok := sel.Attr("name"); ok {
				sd.property(name, content)
			}
			return
		}
		t, _ := sel.Attr("type")
		if !isJSONLDType([]byte(t)) {
			return
		}
		for a := n.Parent; a != nil; a = a.Parent {
			if a.DataAtom == atom.Template {
				return
			}
		}
		var b []byte
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b = append(b, c.Data...)
			}
		}
		sd.jsonLD(b)
	})
}

// result moves what was collected into res.
func (s *structuredSink) result(res *Result) {
	res.JSONLD, res.OpenGraph, res.Microdata = s.items, s.props, s.micro
	res.StructuredErrors, res.StructuredError, res.StructuredDropped = s.errs, s.err, s.dropped
}

// JSONLDText is the page's JSON-LD items as one JSON array, or "" when it
// has none.
func (r Result) JSONLDText() string {
	if len(r.JSONLD) == 0 {
		return ""
	}
	return "[" + strings.Join(r.JSONLD, ",") + "]"
}

// MicrodataText is the page's microdata items as one JSON array, or ""
// when it has none.
func (r Result) MicrodataText() string {
	if len(r.Microdata) == 0 {
		return ""
	}
	return "[" + strings.Join(r.Microdata, ",") + "]"
}

// OpenGraphText is the page's OpenGraph and Twitter card properties as
// one JSON object, keys in document order, or "" when it has none.
func (r Result) OpenGraphText() string {
	if len(r.OpenGraph) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range r.OpenGraph {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSONString(&b, p.Key)
		b.WriteByte(':')
		writeJSONString(&b, p.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// jsonStringLen is the length of s written by writeJSONString.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

const hexDigits = "0123456789abcdef"

// writeJSONString writes s (valid UTF-8) as a JSON string, escaping only
// what JSON requires (no HTML escapes: the text is not for a page).
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}
