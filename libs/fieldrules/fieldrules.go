// Package fieldrules takes named fields from a crawl's HTML pages (seed
// 004: the workers "parse and extract the data" of detail pages; issue
// 37). A crawl's specification (CrawlSpec.extract) lists rules; a rule
// matches pages by an RE2 pattern over the canonical URL and, optionally,
// by host, and names fields, each selected by a CSS selector (goquery's
// cascadia) or an XPath 1.0 expression, taking the element's text, an
// attribute or its inner HTML, the first match or every match, as a
// string, a number, a date or a URL resolved against the page.
//
// A page takes the fields of the first rule that matches it. The result
// is one JSON object (documents.fields) and the names of the rule's fields
// that matched nothing (document_meta.extract_missing), so that a broken
// selector shows in the counts within minutes.
//
// The package is pure: no I/O; its inputs are values.
package fieldrules

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Bounds of a crawl's rules, so that a specification cannot make a page's
// extraction unbounded.
const (
	MaxRules      = 64
	MaxFields     = 64    // per rule
	MaxSelector   = 1024  // bytes of a selector or an expression
	MaxValueBytes = 65536 // bytes of one value; a longer one is cut at a rune boundary
	MaxListItems  = 1000  // values of a list field
)

// Type is what a field's values are converted to.
type Type uint8

// The types of a field.
const (
	String Type = iota // the text, whitespace collapsed (an attribute or inner HTML: trimmed)
	Number             // the first number in the text, as a JSON number
	Date               // a date or time, as RFC 3339 (UTC when the text has no zone)
	URL                // resolved against the page's URL; javascript: and data: are dropped
)

var typeNames = map[string]Type{"": String, "string": String, "number": Number, "date": Date, "url": URL}

// Set is a crawl's compiled rules.
type Set struct {
	rules []*Rule
}

// Rule is one compiled rule.
type Rule struct {
	name   string
	re     *regexp.Regexp // nil: every page
	hosts  map[string]bool
	fields []field
}

type field struct {
	name string
	css  cascadia.Selector // nil for xpath
	xp   *xpath.Expr       // nil for css
	attr string
	html bool
	list bool
	typ  Type
}

// Name is the rule's name.
func (r *Rule) Name() string { return r.name }

// Fields are the names of the rule's fields, in the rule's order.
func (r *Rule) Fields() []string {
	out := make([]string, len(r.fields))
	for i, f := range r.fields {
		out[i] = f.name
	}
	return out
}

// Compile checks a crawl's extraction rules and compiles them. A nil or
// empty Extraction compiles to nil: no page takes fields.
func Compile(x *crawlv1.Extraction) (*Set, error) {
	if len(x.GetRules()) == 0 {
		return nil, nil
	}
	if len(x.GetRules()) > MaxRules {
		return nil, fmt.Errorf("%d rules, want at most %d", len(x.GetRules()), MaxRules)
	}
	s := &Set{}
	names := make(map[string]bool, len(x.GetRules()))
	for i, xr := range x.GetRules() {
		r, err := compileRule(xr)
		if err != nil {
			return nil, fmt.Errorf("rule %d (%q): %w", i+1, xr.GetName(), err)
		}
		if names[r.name] {
			return nil, fmt.Errorf("rule %d: name %q used twice", i+1, r.name)
		}
		names[r.name] = true
		s.rules = append(s.rules, r)
	}
	return s, nil
}

// Validate reports what is wrong with a crawl's extraction rules, nil when
// nothing is.
func Validate(x *crawlv1.Extraction) error {
	_, err := Compile(x)
	return err
}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

func compileRule(xr *crawlv1.ExtractRule) (*Rule, error) {
	if !namePattern.MatchString(xr.GetName()) {
		return nil, errors.New("name: want 1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'")
	}
	r := &Rule{name: xr.GetName()}
	if p := xr.GetPattern(); p != "" {
		if len(p) > MaxSelector {
			return nil, fmt.Errorf("pattern: %d bytes, want at most %d", len(p), MaxSelector)
		}
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("pattern: %w", err)
		}
		r.re = re
	}
	for _, h := range xr.GetHosts() {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			return nil, errors.New("hosts: an empty host")
		}
		if r.hosts == nil {
			r.hosts = make(map[string]bool, len(xr.GetHosts()))
		}
		r.hosts[h] = true
	}
	if len(xr.GetFields()) == 0 {
		return nil, errors.New("no fields")
	}
	if len(xr.GetFields()) > MaxFields {
		return nil, fmt.Errorf("%d fields, want at most %d", len(xr.GetFields()), MaxFields)
	}
	seen := make(map[string]bool, len(xr.GetFields()))
	for i, xf := range xr.GetFields() {
		f, err := compileField(xf)
		if err != nil {
			return nil, fmt.Errorf("field %d (%q): %w", i+1, xf.GetName(), err)
		}
		if seen[f.name] {
			return nil, fmt.Errorf("field %d: name %q used twice", i+1, f.name)
		}
		seen[f.name] = true
		r.fields = append(r.fields, f)
	}
	return r, nil
}

func compileField(xf *crawlv1.ExtractField) (field, error) {
	f := field{name: xf.GetName(), attr: strings.TrimSpace(xf.GetAttr()), html: xf.GetHtml(), list: xf.GetList()}
	if !namePattern.MatchString(f.name) {
		return f, errors.New("name: want 1-64 letters, digits, '_', '.' or '-', starting with a letter or '_'")
	}
	typ, ok := typeNames[strings.ToLower(xf.GetType())]
	if !ok {
		return f, fmt.Errorf("type %q: want string, number, date or url", xf.GetType())
	}
	f.typ = typ
	if f.html && f.attr != "" {
		return f, errors.New("html and attr: take one of them")
	}
	if f.html && typ != String {
		return f, errors.New("html: only of type string")
	}
	css, xp := strings.TrimSpace(xf.GetCss()), strings.TrimSpace(xf.GetXpath())
	switch {
	case css != "" && xp != "":
		return f, errors.New("css and xpath: give one of them")
	case css == "" && xp == "":
		return f, errors.New("no css nor xpath")
	case len(css) > MaxSelector || len(xp) > MaxSelector:
		return f, fmt.Errorf("selector: want at most %d bytes", MaxSelector)
	case css != "":
		sel, err := cascadia.Compile(css)
		if err != nil {
			return f, fmt.Errorf("css %q: %w", css, err)
		}
		f.css = sel
	default:
		expr, err := xpath.Compile(xp)
		if err != nil {
			return f, fmt.Errorf("xpath %q: %w", xp, err)
		}
		f.xp = expr
	}
	return f, nil
}

// Match returns the first rule that matches a page, nil when none does.
// host is the page's politeness key (host[:port]); url its canonical URL.
func (s *Set) Match(host, url string) *Rule {
	if s == nil {
		return nil
	}
	host = strings.ToLower(host)
	name := urlcanon.Hostname(host)
	for _, r := range s.rules {
		if r.hosts != nil && !r.hosts[host] && !r.hosts[name] {
			continue
		}
		if r.re != nil && !r.re.MatchString(url) {
			continue
		}
		return r
	}
	return nil
}

// Len is how many rules the set holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}
