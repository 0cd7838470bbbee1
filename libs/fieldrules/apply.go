package fieldrules

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
	"github.com/antchfx/xpath"
	"golang.org/x/net/html"
)

// Result is what a rule took from a page.
type Result struct {
	// Fields is one JSON object of the fields found ({"name": value}),
	// nil when the rule found none.
	Fields []byte
	// Found and Missing are the names of the rule's fields that matched
	// and that matched nothing (or nothing of their type), in the rule's
	// order.
	Found, Missing []string
}

// Apply takes the rule's fields from a parsed page. base is the page's URL
// (after redirects); a <base href> in the page is the caller's to apply.
func (r *Rule) Apply(doc *html.Node, base *url.URL) Result {
	var res Result
	var out bytes.Buffer
	var gq *goquery.Document
	for _, f := range r.fields {
		var vals []any
		if f.css != nil {
			if gq == nil {
				gq = goquery.NewDocumentFromNode(doc)
			}
			vals = f.fromCSS(gq.FindMatcher(f.css), base)
		} else {
			// A navigator of its own: one left on an attribute by
			// an earlier expression does not return to the root.
			vals = f.fromXPath(newNavigator(doc), base)
		}
		if len(vals) == 0 {
			res.Missing = append(res.Missing, f.name)
			continue
		}
		res.Found = append(res.Found, f.name)
		if out.Len() == 0 {
			out.WriteByte('{')
		} else {
			out.WriteByte(',')
		}
		writeJSON(&out, f.name)
		out.WriteByte(':')
		if f.list {
			writeJSON(&out, vals)
		} else {
			writeJSON(&out, vals[0])
		}
	}
	if out.Len() > 0 {
		out.WriteByte('}')
		res.Fields = out.Bytes()
	}
	return res
}

// writeJSON encodes v without HTML escaping (a field's values are text,
// read by people and programs, not embedded in a page).
func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)       // strings, float64s and slices of them always encode
	b.Truncate(b.Len() - 1) // Encode's newline
}

func (f field) fromCSS(sel *goquery.Selection, base *url.URL) []any {
	var vals []any
	sel.EachWithBreak(func(_ int, s *goquery.Selection) bool {
		var raw string
		var ok bool
		switch {
		case f.attr != "":
			raw, ok = s.Attr(f.attr)
		case f.html:
			h, err := s.Html()
			raw, ok = h, err == nil
		default:
			raw, ok = s.Text(), true
		}
		if ok {
			if v, good := f.convert(raw, base); good {
				vals = append(vals, v)
			}
		}
		return f.list && len(vals) < MaxListItems || !f.list && len(vals) == 0
	})
	return vals
}

func (f field) fromXPath(nav *navigator, base *url.URL) []any {
	var vals []any
	add := func(raw string) {
		if v, ok := f.convert(raw, base); ok {
			vals = append(vals, v)
		}
	}
	switch res := f.xp.Evaluate(nav).(type) {
	case *xpath.NodeIterator:
		for res.MoveNext() && (f.list && len(vals) < MaxListItems || !f.list && len(vals) == 0) {
			cur := res.Current()
			n, isHTML := cur.(*navigator)
			switch {
			case cur.NodeType() == xpath.AttributeNode || !isHTML:
				add(cur.Value())
			case f.attr != "":
				for _, a := range n.curr.Attr {
					if a.Key == f.attr {
						add(a.Val)
						break
					}
				}
			case f.html:
				add(innerHTML(n.curr))
			default:
				add(innerText(n.curr))
			}
		}
	case string:
		add(res)
	case float64:
		if !math.IsNaN(res) {
			add(strconv.FormatFloat(res, 'f', -1, 64))
		}
	case bool:
		add(strconv.FormatBool(res))
	}
	return vals
}

func innerHTML(n *html.Node) string {
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if err := html.Render(&b, c); err != nil {
			return ""
		}
	}
	return b.String()
}

// convert turns a raw value into the field's type; false when it holds
// none (empty, or not of the type).
func (f field) convert(raw string, base *url.URL) (any, bool) {
	switch {
	case f.html || f.attr != "" && f.typ == String:
		raw = strings.TrimSpace(raw)
	default:
		raw = strings.Join(strings.Fields(raw), " ")
	}
	if raw == "" {
		return nil, false
	}
	switch f.typ {
	case Number:
		n, ok := ParseNumber(raw)
		return n, ok
	case Date:
		t, ok := ParseDate(raw)
		if !ok {
			return nil, false
		}
		return t.Format(time.RFC3339), true
	case URL:
		return resolve(raw, base)
	}
	return cut(raw, MaxValueBytes), true
}

// cut shortens s to at most n bytes at a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func resolve(raw string, base *url.URL) (any, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "ftp", "mailto", "tel":
	default:
		return nil, false // javascript:, data: and relative URLs without a base
	}
	return cut(u.String(), MaxValueBytes), true
}

var numberRun = regexp.MustCompile(`[-+−]?\d[\d.,'’\x{00a0}\x{202f} ]*`)

// ParseNumber reads the first number of a text ("$1,299.00", "1.299,00 €",
// "12 345", "-3.5e2" is read as -3.5): a group separator is a comma, a
// dot, an apostrophe or a space that is followed by exactly three digits
// and is not the last separator of another kind; the decimal separator is
// the last dot or comma followed by other than three digits, or the last
// of two kinds.
func ParseNumber(s string) (float64, bool) {
	m := numberRun.FindString(s)
	if m == "" {
		return 0, false
	}
	neg := strings.HasPrefix(m, "-") || strings.HasPrefix(m, "−")
	m = strings.TrimLeft(m, "+-−")
	m = strings.TrimRight(m, ".,'’\u00a0\u202f ")
	// The decimal separator: the last '.' or ',' when the text has both;
	// with one kind, that separator when it occurs once and is not
	// followed by exactly three digits.
	lastDot, lastComma := strings.LastIndexByte(m, '.'), strings.LastIndexByte(m, ',')
	dec := -1
	switch {
	case lastDot >= 0 && lastComma >= 0:
		dec = max(lastDot, lastComma)
	case lastDot >= 0 && strings.Count(m, ".") == 1 && digitsAfter(m, lastDot) != 3:
		dec = lastDot
	case lastComma >= 0 && strings.Count(m, ",") == 1 && digitsAfter(m, lastComma) != 3:
		dec = lastComma
	}
	var b strings.Builder
	for i, r := range m {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case i == dec:
			b.WriteByte('.')
		}
	}
	v, err := strconv.ParseFloat(b.String(), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

func digitsAfter(s string, i int) int {
	n := 0
	for _, r := range s[i+1:] {
		if r < '0' || r > '9' {
			break
		}
		n++
	}
	return n
}

var dateLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05",
	"2006-01-02T15:04",
	"2006-01-02 15:04:05",
	"2006-01-02 15:04",
	"2006-01-02",
	"2006/01/02",
	time.RFC1123Z,
	time.RFC1123,
	time.RFC850,
	time.ANSIC,
	"January 2, 2006",
	"January 2 2006",
	"Jan 2, 2006",
	"Jan. 2, 2006",
	"2 January 2006",
	"2 Jan 2006",
	"02 Jan 2006",
	"Monday, January 2, 2006",
	"Mon, Jan 2, 2006",
	"2.1.2006",
	"02.01.2006",
	"2006年1月2日",
	"2006年01月02日",
}

// ParseDate reads a date or a time in the common forms of pages (RFC 3339,
// ISO 8601 dates, HTTP dates, "January 2, 2006", "2 January 2006",
// "02.01.2006", "2006年1月2日"); a time without a zone is UTC. Numeric
// forms whose day and month cannot be told apart ("01/02/2006") are not
// read: a wrong date is worse than none.
func ParseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	// A datetime attribute or text with trailing words ("2024-03-01 by Ann").
	if len(s) > 10 {
		if t, err := time.Parse("2006-01-02", s[:10]); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// BaseOf is the URL a page's relative URLs resolve against: its first
// <base href> resolved against the page's URL, else the page's URL.
func BaseOf(doc *html.Node, page *url.URL) *url.URL {
	var href string
	var find func(*html.Node) bool
	find = func(n *html.Node) bool {
		if n.Type == html.ElementNode && n.Data == "base" {
			for _, a := range n.Attr {
				if a.Key == "href" && strings.TrimSpace(a.Val) != "" {
					href = strings.TrimSpace(a.Val)
					return true
				}
			}
		}
		if n.Type == html.ElementNode && n.Data == "body" {
			return false // <base> belongs in the head
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if find(c) {
				return true
			}
		}
		return false
	}
	if !find(doc) {
		return page
	}
	u, err := url.Parse(href)
	if err != nil {
		return page
	}
	if page != nil {
		u = page.ResolveReference(u)
	}
	if !u.IsAbs() {
		return page
	}
	return u
}
