// Package crawlspec is the seeder's crawl request — the JSON body of
// POST /v1/crawls — for other commands that take one (the local launcher's
// --spec): the same strict decoding and the same field-by-field validation
// as the crawl-jobs API, so a bad file gets the errors the API would
// answer. The types are the API's own (aliases of its internal package).
package crawlspec

import (
	"io"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// The request and its parts, as the API decodes them.
type (
	// Request is a crawl request, the body of POST /v1/crawls.
	Request = jobs.Request
	// Scope is a request's scope rules.
	Scope = jobs.Scope
	// Limits is a request's page limits.
	Limits = jobs.Limits
	// Politeness is a request's politeness overrides.
	Politeness = jobs.Politeness
	// Revisit is a request's revisit policy.
	Revisit = jobs.Revisit
	// Identity is a request's user agent and extra request headers.
	Identity = jobs.Identity
	// Keywords is a request's keyword search: queries and engines.
	Keywords = jobs.Keywords
	// SiteRules are a scope's filters of one site.
	SiteRules = jobs.SiteRules
	// Priority is a request's best-first ranking: rules and breadth_first.
	Priority = jobs.Priority
	// PriorityRule is one rule of a Priority.
	PriorityRule = jobs.PriorityRule
	// Render is a request's render setting: when the fetchers render
	// its pages in a headless browser, for the crawl and per site.
	Render = jobs.Render
	// RenderSite is the render mode of some sites of a Render.
	RenderSite = jobs.RenderSite
	// Extraction is a request's extraction rules (libs/fieldrules).
	Extraction = jobs.Extraction
	// ExtractRule is one rule of an Extraction.
	ExtractRule = jobs.ExtractRule
	// ExtractField is one field of an ExtractRule.
	ExtractField = jobs.ExtractField
	// Documents is what a request keeps beyond HTML (libs/doctypes).
	Documents = jobs.Documents
)

// MaxListItems is the most entries a scope list (allow_hosts, deny_hosts,
// …) may hold.
const MaxListItems = jobs.MaxListItems

// Scope modes (Scope.Mode).
const (
	ScopeDomain = jobs.ScopeDomain
	ScopeHost   = jobs.ScopeHost
	ScopeWeb    = jobs.ScopeWeb
)

// ModeOf is the request's scope mode, its default filled in: "domain" (the
// seeds' registrable domains and their subdomains) unless the request has
// keywords or allow lists ("web").
func ModeOf(req Request) string { return jobs.ModeOf(req) }

// FieldError is one problem of a request, naming its JSON field
// ("scope.deny_patterns[1]").
type FieldError = jobs.FieldError

// FieldErrors is every problem of a request at once.
type FieldErrors = jobs.FieldErrors

// Decode reads one request strictly: an unknown field or a wrong JSON type
// is a FieldErrors, anything else that is not one JSON object an error
// starting "malformed JSON: ". It does not validate values: Validate does.
func Decode(r io.Reader) (Request, error) { return jobs.Decode(r) }

// Validate checks req as POST /v1/crawls does, every problem at once as
// FieldErrors, except that it needs no seeds (the command may bring its
// own). A request without crawl_id is checked as if it had a valid one.
func Validate(req Request) error {
	_, err := jobs.BuildSpec(req, func() string { return "crawl" }, time.Time{})
	return err
}

// ValidCrawlID reports whether id is a crawl id the API accepts: 1-64
// letters, digits, '.', '_' and '-'.
func ValidCrawlID(id string) bool { return jobs.ValidCrawlID(id) }

// Delete returns the revision of spec that deletes its crawl, as DELETE
// /v1/crawls/{id} publishes it: cancelled for good, deleted_at now (a
// deleted spec is returned as it is).
func Delete(spec *crawlv1.CrawlSpec, now time.Time) *crawlv1.CrawlSpec { return jobs.Delete(spec, now) }
