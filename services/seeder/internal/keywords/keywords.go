// Package keywords turns a user's keywords into search-engine result-page
// seeds (seed 001's QueryBuilder): keywords are combined into queries
// (each keyword, combinations up to a size, or the product of keyword
// groups) and every query is expanded into result-page URLs from a
// per-engine template with pagination. It is pure: no I/O.
package keywords

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Combine modes.
const (
	ModeEach         = "each"         // every keyword is a query
	ModeCombinations = "combinations" // every combination of 1..MaxCombination distinct keywords
	ModeProduct      = "product"      // one keyword of each group, joined
)

// Limits that keep an expansion bounded.
const (
	MaxQueries = 10000 // queries one expansion may produce
	MaxPages   = 100   // result pages per query and engine
)

// Template is one engine's result-page URL template. URL contains
// {query} (the query, URL-escaped as a query-string value) and may contain
// {page} (1-based page number), {page0} (0-based), {offset} ((page-1) *
// PerPage) and {offset1} (offset + 1).
type Template struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	PerPage int    `json:"per_page,omitempty"` // results per page for {offset}; default 10
}

// DefaultPerPage is the page size used when a template does not set one.
const DefaultPerPage = 10

// Presets are the built-in engines, by name.
var presets = map[string]Template{
	"google":     {Name: "google", URL: "https://www.google.com/search?q={query}&start={offset}", PerPage: 10},
	"bing":       {Name: "bing", URL: "https://www.bing.com/search?q={query}&first={offset1}", PerPage: 10},
	"baidu":      {Name: "baidu", URL: "https://www.baidu.com/s?wd={query}&pn={offset}", PerPage: 10},
	"duckduckgo": {Name: "duckduckgo", URL: "https://html.duckduckgo.com/html/?q={query}&s={offset}", PerPage: 30},
}

// Preset returns the built-in template of an engine name.
func Preset(name string) (Template, bool) {
	t, ok := presets[strings.ToLower(name)]
	return t, ok
}

// PresetNames returns the names of the built-in engines, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Errors of Validate and Queries.
var (
	ErrNoQuery      = errors.New("template has no {query} placeholder")
	ErrNoName       = errors.New("template has no name")
	ErrTooMany      = fmt.Errorf("expansion exceeds %d queries", MaxQueries)
	ErrUnknownMode  = errors.New("unknown combine mode")
	ErrNoKeywords   = errors.New("no keywords")
	ErrBadTemplate  = errors.New("template is not an absolute http(s) URL")
	ErrBadPlacehold = errors.New("unknown placeholder")
)

var placeholders = []string{"{query}", "{page}", "{page0}", "{offset}", "{offset1}"}

// Validate checks a template: a name, an absolute http(s) URL once the
// placeholders are filled, {query} present, no unknown {placeholder}.
func (t Template) Validate() error {
	if strings.TrimSpace(t.Name) == "" {
		return ErrNoName
	}
	if !strings.Contains(t.URL, "{query}") {
		return ErrNoQuery
	}
	if t.PerPage < 0 {
		return fmt.Errorf("per_page %d: want at least 1", t.PerPage)
	}
	rest := t.URL
	for _, p := range placeholders {
		rest = strings.ReplaceAll(rest, p, "")
	}
	if i := strings.IndexByte(rest, '{'); i >= 0 && strings.IndexByte(rest[i:], '}') >= 0 {
		return fmt.Errorf("%w in %q", ErrBadPlacehold, t.URL)
	}
	u, err := url.Parse(t.fill("q", 1))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ErrBadTemplate
	}
	return nil
}

// fill returns the URL of a page (1-based) of query.
func (t Template) fill(query string, page int) string {
	per := t.PerPage
	if per <= 0 {
		per = DefaultPerPage
	}
	offset := (page - 1) * per
	return strings.NewReplacer(
		"{query}", url.QueryEscape(query),
		"{page}", strconv.Itoa(page),
		"{page0}", strconv.Itoa(page-1),
		"{offset}", strconv.Itoa(offset),
		"{offset1}", strconv.Itoa(offset+1),
	).Replace(t.URL)
}

// Queries combines keywords by mode: ModeEach uses every keyword alone;
// ModeCombinations every set of 1..maxSize distinct keywords (in the given
// order, joined by a space); ModeProduct one keyword from each group, in
// group order. Blank keywords are ignored, duplicates kept once. It fails
// with ErrTooMany rather than producing more than MaxQueries.
func Queries(mode string, keywords []string, groups [][]string, maxSize int) ([]string, error) {
	switch mode {
	case "", ModeEach:
		kw := clean(keywords)
		if len(kw) == 0 {
			return nil, ErrNoKeywords
		}
		if len(kw) > MaxQueries {
			return nil, ErrTooMany
		}
		return kw, nil
	case ModeCombinations:
		kw := clean(keywords)
		if len(kw) == 0 {
			return nil, ErrNoKeywords
		}
		if maxSize <= 0 {
			maxSize = 1
		}
		// Shorter combinations first, each size in keyword order.
		var out []string
		var rec func(start, size int, cur []string) error
		rec = func(start, size int, cur []string) error {
			if len(cur) == size {
				if len(out) == MaxQueries {
					return ErrTooMany
				}
				out = append(out, strings.Join(cur, " "))
				return nil
			}
			for i := start; i < len(kw); i++ {
				if err := rec(i+1, size, append(cur, kw[i])); err != nil {
					return err
				}
			}
			return nil
		}
		for size := 1; size <= min(maxSize, len(kw)); size++ {
			if err := rec(0, size, make([]string, 0, size)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case ModeProduct:
		out := []string{""}
		for _, g := range groups {
			kw := clean(g)
			if len(kw) == 0 {
				continue
			}
			if len(out)*len(kw) > MaxQueries {
				return nil, ErrTooMany
			}
			next := make([]string, 0, len(out)*len(kw))
			for _, prefix := range out {
				for _, k := range kw {
					next = append(next, strings.TrimSpace(prefix+" "+k))
				}
			}
			out = next
		}
		if len(out) == 1 && out[0] == "" {
			return nil, ErrNoKeywords
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w %q (want %s, %s or %s)", ErrUnknownMode, mode, ModeEach, ModeCombinations, ModeProduct)
	}
}

// clean trims keywords, drops blank ones and repeats.
func clean(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, k := range in {
		k = strings.Join(strings.Fields(k), " ")
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	return out
}

// Page is one result-page seed.
type Page struct {
	Engine string // template name, the DiscoveredURL serp_engine marker
	Query  string
	Page   int // 1-based
	URL    string
}

// Expand returns pages 1..pages of every query on every template, engine
// by engine, query by query. Templates must be valid.
func Expand(queries []string, templates []Template, pages int) []Page {
	if pages <= 0 {
		pages = 1
	}
	pages = min(pages, MaxPages)
	out := make([]Page, 0, len(queries)*len(templates)*pages)
	for _, t := range templates {
		for _, q := range queries {
			for p := 1; p <= pages; p++ {
				out = append(out, Page{Engine: t.Name, Query: q, Page: p, URL: t.fill(q, p)})
			}
		}
	}
	return out
}
