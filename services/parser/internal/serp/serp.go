// Package serp recognises search engine result pages and knows, per
// engine, which elements hold the result links (seed 001: a result page
// yields only its results, not its navigation, ads or related searches).
//
// Engines come from built-in presets (Presets) and an optional JSON file
// (--serp-config) that adds engines or replaces presets by name:
//
//	[{"name": "google", "url_pattern": "^https?://www\\.google\\.[a-z.]+/search\\?", "results": "div.g a[href]:has(h3)"}]
package serp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
)

// Engine is one search engine's configuration.
type Engine struct {
	Name string `json:"name"`
	// URLPattern (RE2, optional) recognises the engine's result pages by
	// canonical URL when the record carries no serp_engine marker.
	URLPattern string `json:"url_pattern,omitempty"`
	// Results is the CSS selector of the result links: an <a href> or an
	// element whose first <a href> is the result.
	Results string `json:"results"`
}

// Presets are the built-in engines, tested against the result-page
// fixtures in testdata/.
var Presets = []Engine{
	{Name: "google", URLPattern: `^https?://(www\.)?google\.[a-z.]+/search\?`, Results: "div.g div.yuRUbf > a[href], div.g a[href]:has(h3)"},
	{Name: "bing", URLPattern: `^https?://(www\.|cn\.)?bing\.com/search\?`, Results: "li.b_algo h2 > a[href]"},
	{Name: "baidu", URLPattern: `^https?://(www\.)?baidu\.com/s\?`, Results: "div.result h3.t > a[href], div.result-op h3.t > a[href]"},
	{Name: "duckduckgo", URLPattern: `^https?://(html\.|lite\.)?duckduckgo\.com/(html/?|lite/?)?\?`, Results: "div.result:not(.result--ad) a.result__a[href]"},
}

// compiled is one engine ready to use.
type compiled struct {
	name    string
	url     *regexp.Regexp
	results goquery.Matcher
}

// Engines is a compiled set of engines. The zero value knows none. Safe
// for concurrent use (read-only after construction).
type Engines struct {
	list []compiled
}

// New compiles engines (later entries replace earlier ones of the same
// name).
func New(engines []Engine) (*Engines, error) {
	var (
		out  Engines
		errs []error
	)
	for _, e := range engines {
		if e.Name == "" || e.Results == "" {
			errs = append(errs, fmt.Errorf("engine %q: name and results are required", e.Name))
			continue
		}
		c := compiled{name: e.Name}
		m, err := cascadia.Compile(e.Results)
		if err != nil {
			errs = append(errs, fmt.Errorf("engine %q: compile results selector: %w", e.Name, err))
			continue
		}
		c.results = m
		if e.URLPattern != "" {
			re, err := regexp.Compile(e.URLPattern)
			if err != nil {
				errs = append(errs, fmt.Errorf("engine %q: compile url pattern: %w", e.Name, err))
				continue
			}
			c.url = re
		}
		out.list = slices.DeleteFunc(out.list, func(o compiled) bool { return o.name == e.Name })
		out.list = append(out.list, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &out, nil
}

// Load returns the presets extended by the engines of a JSON file (an
// array of Engine); an empty path means the presets only.
func Load(path string) (*Engines, error) {
	engines := slices.Clone(Presets)
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read serp config: %w", err)
		}
		var extra []Engine
		if err := json.Unmarshal(b, &extra); err != nil {
			return nil, fmt.Errorf("decode serp config %s: %w", path, err)
		}
		engines = append(engines, extra...)
	}
	e, err := New(engines)
	if err != nil {
		return nil, fmt.Errorf("compile serp config: %w", err)
	}
	return e, nil
}

// Match returns the engine of a page and its results selector: the named
// engine when marker is set (ok false when unknown), else the first engine
// whose URL pattern matches url.
func (e *Engines) Match(marker, url string) (name string, results goquery.Matcher, ok bool) {
	if e == nil {
		return "", nil, false
	}
	for _, c := range e.list {
		if marker != "" && c.name == marker || marker == "" && c.url != nil && c.url.MatchString(url) {
			return c.name, c.results, true
		}
	}
	return "", nil, false
}
