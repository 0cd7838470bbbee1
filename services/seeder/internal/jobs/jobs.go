// Package jobs validates crawl-job requests of the seeder's API and builds
// their crawl specifications (crawlv1.CrawlSpec) and seeds. It is pure: no
// I/O, time and ids are passed in.
package jobs

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/fieldrules"
	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/services/seeder/internal/keywords"
	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
)

// Bounds of a request.
const (
	MaxCrawlID   = 64
	MaxName      = 200
	MaxSeeds     = 100000
	MaxListItems = 1000 // entries of one scope list
	MaxPattern   = 1000 // bytes of one regexp
)

// Request is the JSON body of POST /v1/crawls.
type Request struct {
	CrawlID    string      `json:"crawl_id,omitempty"` // generated when empty
	Name       string      `json:"name,omitempty"`
	Seeds      []string    `json:"seeds,omitempty"`      // errors name seeds[i]
	SeedsText  string      `json:"seeds_text,omitempty"` // a seeds file: errors name seeds_text line N
	SkipBad    bool        `json:"skip_invalid_seeds,omitempty"`
	Keywords   *Keywords   `json:"keywords,omitempty"`
	Scope      *Scope      `json:"scope,omitempty"`
	Limits     *Limits     `json:"limits,omitempty"`
	Politeness *Politeness `json:"politeness,omitempty"`
	Revisit    *Revisit    `json:"revisit,omitempty"`
	// Identity is who the crawl says it is to the sites it fetches.
	Identity *Identity `json:"identity,omitempty"`
	// Sitemaps also seeds from the sitemaps of every seed host (robots.txt
	// Sitemap lines and /sitemap.xml); SitemapURLs are sitemaps to read
	// as well (absolute http(s) URLs; errors name sitemap_urls[i]).
	Sitemaps    bool     `json:"sitemaps,omitempty"`
	SitemapURLs []string `json:"sitemap_urls,omitempty"`
	// PreviousCrawlID is an earlier crawl of the same sites that this
	// one re-crawls incrementally: its pages are seeded with their
	// validators and asked for conditionally, a 304 carrying the
	// earlier document over (CrawlSpec.previous_crawl_id).
	PreviousCrawlID string `json:"previous_crawl_id,omitempty"`
	// Priority ranks the crawl's URLs best first (CrawlSpec.priority,
	// libs/priority): rules that raise or lower URLs by pattern, or
	// breadth_first to ignore every signal.
	Priority *Priority `json:"priority,omitempty"`
	// Extract names the fields the parsers take from the crawl's HTML
	// pages (CrawlSpec.extract, libs/fieldrules).
	Extract *Extraction `json:"extract,omitempty"`
	// Documents lists what the crawl keeps beyond HTML and text
	// (CrawlSpec.documents, libs/doctypes).
	Documents *Documents `json:"documents,omitempty"`
	// Render says when the fetchers load the crawl's pages in a headless
	// browser (CrawlSpec.render): never, auto or always, for the crawl
	// and per site.
	Render *Render `json:"render,omitempty"`
}

// Render mirrors crawlv1.Render. Mode is never, auto or always (empty:
// the fetchers' --render); a page takes the mode of the first of Sites
// naming its host; OtherHosts lets a rendered page's requests to other
// hosts through.
type Render struct {
	Mode       string       `json:"mode,omitempty"`
	Sites      []RenderSite `json:"sites,omitempty"`
	OtherHosts bool         `json:"other_hosts,omitempty"`
}

// RenderSite mirrors crawlv1.RenderSite: the mode of the pages of Hosts
// (politeness keys, or names without the port).
type RenderSite struct {
	Hosts []string `json:"hosts"`
	Mode  string   `json:"mode"`
}

// Render modes as a request names them (Render.Mode, RenderSite.Mode).
const (
	RenderNever  = "never"
	RenderAuto   = "auto"
	RenderAlways = "always"
)

// RenderModes are the render modes a request may name.
var RenderModes = []string{RenderNever, RenderAuto, RenderAlways}

// renderModeOf reads a request's render mode; "" is UNSPECIFIED.
func renderModeOf(field, name string, errs *FieldErrors) crawlv1.RenderMode {
	switch strings.TrimSpace(name) {
	case "":
		return crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED
	case RenderNever:
		return crawlv1.RenderMode_RENDER_MODE_NEVER
	case RenderAuto:
		return crawlv1.RenderMode_RENDER_MODE_AUTO
	case RenderAlways:
		return crawlv1.RenderMode_RENDER_MODE_ALWAYS
	}
	errs.add(field, "%q, want %s, %s or %s", name, RenderNever, RenderAuto, RenderAlways)
	return crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED
}

// RenderModeName is the request's name of a spec's render mode; "" for
// UNSPECIFIED (the next level's).
func RenderModeName(m crawlv1.RenderMode) string {
	switch m {
	case crawlv1.RenderMode_RENDER_MODE_NEVER:
		return RenderNever
	case crawlv1.RenderMode_RENDER_MODE_AUTO:
		return RenderAuto
	case crawlv1.RenderMode_RENDER_MODE_ALWAYS:
		return RenderAlways
	}
	return ""
}

// buildRender checks a request's render setting: known modes, every site
// with hosts (each a host, not a URL) and a mode; nil when it sets
// nothing.
func buildRender(in Render, errs *FieldErrors) *crawlv1.Render {
	out := &crawlv1.Render{Mode: renderModeOf("render.mode", in.Mode, errs), OtherHosts: in.OtherHosts}
	if len(in.Sites) > MaxListItems {
		errs.add("render.sites", "%d entries, want at most %d", len(in.Sites), MaxListItems)
		return out
	}
	for i, site := range in.Sites {
		field := fmt.Sprintf("render.sites[%d]", i)
		if len(site.Hosts) == 0 {
			errs.add(field+".hosts", "no hosts")
		}
		checkLists([]scopeList{{field: field + ".hosts", items: site.Hosts}}, errs)
		if strings.TrimSpace(site.Mode) == "" {
			errs.add(field+".mode", "want %s, %s or %s", RenderNever, RenderAuto, RenderAlways)
		}
		out.Sites = append(out.Sites, &crawlv1.RenderSite{Hosts: lowerAll(site.Hosts), Mode: renderModeOf(field+".mode", site.Mode, errs)})
	}
	if out.Mode == crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED && len(out.Sites) == 0 && !out.OtherHosts {
		return nil
	}
	return out
}

// Extraction mirrors crawlv1.Extraction: a page takes the fields of the
// first rule that matches it.
type Extraction struct {
	Rules []ExtractRule `json:"rules"`
}

// ExtractRule mirrors crawlv1.ExtractRule: the fields of the pages whose
// canonical URL matches Pattern (RE2; empty: every page), on one of Hosts
// (none: every host).
type ExtractRule struct {
	Name    string         `json:"name"`
	Pattern string         `json:"pattern,omitempty"`
	Hosts   []string       `json:"hosts,omitempty"`
	Fields  []ExtractField `json:"fields"`
}

// ExtractField mirrors crawlv1.ExtractField: one of CSS and XPath selects;
// Attr takes an attribute (none: the text) or HTML the inner HTML; List
// takes every match (else the first); Type is string (default), number,
// date or url.
type ExtractField struct {
	Name  string `json:"name"`
	CSS   string `json:"css,omitempty"`
	XPath string `json:"xpath,omitempty"`
	Attr  string `json:"attr,omitempty"`
	HTML  bool   `json:"html,omitempty"`
	List  bool   `json:"list,omitempty"`
	Type  string `json:"type,omitempty"`
}

// Documents mirrors crawlv1.Documents. ContentTypes are media types, or
// the short names pdf, office, docx, xlsx, pptx, odt, ods, odp and all
// (libs/doctypes.Expand).
type Documents struct {
	ContentTypes []string `json:"content_types"`
}

// ExtractionSpec turns a request's extraction rules into a specification's,
// checked (libs/fieldrules); nil when there are none.
func ExtractionSpec(x *Extraction) (*crawlv1.Extraction, error) {
	if x == nil || len(x.Rules) == 0 {
		return nil, nil
	}
	out := &crawlv1.Extraction{}
	for _, r := range x.Rules {
		xr := &crawlv1.ExtractRule{Name: r.Name, Pattern: r.Pattern, Hosts: lowerAll(r.Hosts)}
		for _, f := range r.Fields {
			xr.Fields = append(xr.Fields, &crawlv1.ExtractField{Name: f.Name, Css: f.CSS, Xpath: f.XPath,
				Attr: f.Attr, Html: f.HTML, List: f.List, Type: strings.ToLower(f.Type)})
		}
		out.Rules = append(out.Rules, xr)
	}
	if err := fieldrules.Validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

// ExtractionRequest is the inverse of ExtractionSpec (a crawl's rules as
// the API and the console show them); nil when there are none.
func ExtractionRequest(x *crawlv1.Extraction) *Extraction {
	if len(x.GetRules()) == 0 {
		return nil
	}
	out := &Extraction{}
	for _, r := range x.GetRules() {
		er := ExtractRule{Name: r.GetName(), Pattern: r.GetPattern(), Hosts: r.GetHosts()}
		for _, f := range r.GetFields() {
			er.Fields = append(er.Fields, ExtractField{Name: f.GetName(), CSS: f.GetCss(), XPath: f.GetXpath(),
				Attr: f.GetAttr(), HTML: f.GetHtml(), List: f.GetList(), Type: f.GetType()})
		}
		out.Rules = append(out.Rules, er)
	}
	return out
}

// Priority mirrors crawlv1.Priority.
type Priority struct {
	Rules []PriorityRule `json:"rules,omitempty"`
	// BreadthFirst ignores every signal (rules, sitemaps, in-links): each
	// host's URLs go shallowest first.
	BreadthFirst bool `json:"breadth_first,omitempty"`
}

// PriorityRule mirrors crawlv1.PriorityRule: every URL whose canonical
// form matches Pattern (RE2), on one of Hosts (none: every host), has
// Delta (-1000 to 1000, not 0) added to its priority.
type PriorityRule struct {
	Pattern string   `json:"pattern"`
	Delta   int32    `json:"delta"`
	Hosts   []string `json:"hosts,omitempty"`
}

// Keywords asks for result-page seeds.
type Keywords struct {
	Terms          []string            `json:"terms,omitempty"`
	Groups         [][]string          `json:"groups,omitempty"`
	Combine        string              `json:"combine,omitempty"` // each (default), combinations, product
	MaxCombination int                 `json:"max_combination,omitempty"`
	Engines        []string            `json:"engines,omitempty"` // preset names
	Templates      []keywords.Template `json:"templates,omitempty"`
	Pages          int                 `json:"pages,omitempty"` // result pages per query and engine; default 1
}

// Scope mirrors crawlv1.Scope.
type Scope struct {
	// Mode is how far the crawl may go from its seeds: "domain" (the
	// seeds' registrable domains and their subdomains), "host" (the
	// seeds' hosts) or "web" (anywhere the other rules allow). Empty: a
	// crawl that names no allow_hosts, allow_domains or keywords stays on
	// its seeds' domains; one that does is scoped by them ("web").
	Mode                string   `json:"mode,omitempty"`
	AllowHosts          []string `json:"allow_hosts,omitempty"`
	DenyHosts           []string `json:"deny_hosts,omitempty"`
	AllowDomains        []string `json:"allow_domains,omitempty"`
	DenyDomains         []string `json:"deny_domains,omitempty"`
	SameHostOnly        bool     `json:"same_host_only,omitempty"`
	AllowPatterns       []string `json:"allow_patterns,omitempty"`
	DenyPatterns        []string `json:"deny_patterns,omitempty"`
	MaxOutlinksPerPage  uint32   `json:"max_outlinks_per_page,omitempty"`
	MaxURLLength        uint32   `json:"max_url_length,omitempty"`
	MaxRepeatedSegments uint32   `json:"max_repeated_segments,omitempty"`
	DetailPatterns      []string `json:"detail_patterns,omitempty"`
	DetailSelector      string   `json:"detail_selector,omitempty"`
	FollowDuplicates    bool     `json:"follow_duplicates,omitempty"`
	// FollowTraps follows the links the parser suspects as a crawler trap
	// (url_events state trap_suspected): the crawl is allowed its traps.
	FollowTraps bool `json:"follow_traps,omitempty"`
	// Sites filter the links to one site each; the first rule naming a
	// link's host applies, after allow_patterns and deny_patterns.
	Sites []SiteRules `json:"sites,omitempty"`
	// NearDuplicateDistance turns on near-duplicate detection for the
	// crawl: simhash bits, 1 to simhash.MaxNearDistance (0: the parser's
	// default).
	NearDuplicateDistance uint32 `json:"near_duplicate_distance,omitempty"`
}

// SiteRules mirrors crawlv1.SiteRules.
type SiteRules struct {
	Hosts         []string `json:"hosts,omitempty"`
	Domains       []string `json:"domains,omitempty"`
	AllowPatterns []string `json:"allow_patterns,omitempty"`
	DenyPatterns  []string `json:"deny_patterns,omitempty"`
}

// Limits mirrors crawlv1.Limits.
type Limits struct {
	MaxDepth        uint32 `json:"max_depth,omitempty"`
	MaxPages        uint64 `json:"max_pages,omitempty"`
	MaxPagesPerHost uint64 `json:"max_pages_per_host,omitempty"`
	// MaxDuration is the crawl's time limit, a Go duration ("2h"): that
	// long after its creation the crawl is cancelled. "" or "0s": none.
	MaxDuration string `json:"max_duration,omitempty"`
}

// Identity mirrors crawlv1.Identity: the User-Agent of the crawl's
// requests (libs/identity.CheckUserAgent: a product token, a contact) and
// its extra headers, each "Name: value" (errors name identity.headers[i]).
// Without it the fetcher's --user-agent and no extra header.
type Identity struct {
	UserAgent string   `json:"user_agent,omitempty"`
	Headers   []string `json:"headers,omitempty"`
}

// Politeness mirrors crawlv1.Politeness; durations are Go durations ("1.5s").
type Politeness struct {
	Delay         string `json:"delay,omitempty"`
	MaxCrawlDelay string `json:"max_crawl_delay,omitempty"`
	// SerpIgnoreRobots fetches the result pages generated from the
	// request's keywords even where the engine's robots.txt disallows
	// them (crawlv1.Politeness.serp_ignore_robots); only with keywords.
	SerpIgnoreRobots bool `json:"serp_ignore_robots,omitempty"`
}

// Revisit mirrors crawlv1.Revisit; durations are Go durations ("6h").
type Revisit struct {
	Enabled         bool   `json:"enabled"`
	MinInterval     string `json:"min_interval,omitempty"`
	MaxInterval     string `json:"max_interval,omitempty"`
	InitialInterval string `json:"initial_interval,omitempty"`
}

// FieldError is one problem of a request, naming the JSON field
// ("seeds[3]", "seeds_text line 7", "scope.allow_patterns[0]").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// FieldErrors is every problem of a request.
type FieldErrors []FieldError

func (e FieldErrors) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid request: " + strings.Join(parts, "; ")
}

func (e *FieldErrors) add(field, format string, args ...any) {
	*e = append(*e, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Seed is one seed to publish; Engine marks a search-engine result page,
// Sitemap a URL listed in a sitemap (with its Lastmod, zero when none, and
// its <priority> when HasPriority).
type Seed struct {
	URL         string
	Engine      string
	Sitemap     bool
	Lastmod     time.Time
	Priority    float32
	HasPriority bool
}

// Job is a validated request.
type Job struct {
	Spec    *crawlv1.CrawlSpec // revision 1, RUNNING
	Seeds   []Seed
	Invalid FieldErrors // seeds skipped under skip_invalid_seeds
	// Sitemaps asks for the sitemaps of the seed hosts, SitemapURLs
	// (absolute http(s)) are explicit sitemaps: the caller reads them and
	// adds their URLs with AddSitemapEntries.
	Sitemaps    bool
	SitemapURLs []string
}

// AddSitemapEntries appends the URLs read from sitemaps (canonical, with
// their lastmod and priority) that are not seeds already, marked Sitemap,
// and returns how many it added.
func (j *Job) AddSitemapEntries(entries []Seed) int {
	seen := make(map[string]bool, len(j.Seeds))
	for _, s := range j.Seeds {
		seen[s.URL] = true
	}
	n := 0
	urls := make([]string, 0, len(entries))
	for _, s := range entries {
		urls = append(urls, s.URL)
		if seen[s.URL] {
			continue
		}
		seen[s.URL] = true
		s.Sitemap, s.Engine = true, ""
		j.Seeds = append(j.Seeds, s)
		n++
	}
	KeepOnSeeds(j.Spec, urls)
	return n
}

// ValidCrawlID reports whether id is a usable crawl id: 1-64 letters,
// digits, '.', '_' and '-'.
func ValidCrawlID(id string) bool {
	if id == "" || len(id) > MaxCrawlID {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) < 0
}

// Build validates req and returns the job: the crawl spec (id from the
// request or newID, created now) and its seeds (explicit seeds first, then
// result pages). All problems are returned together as FieldErrors.
func Build(req Request, newID func() string, now time.Time) (Job, error) {
	return build(req, newID, now, true)
}

// BuildSpec is Build for a command that brings seeds of its own (the
// seeder's --seed and --seeds-file, the local launcher's demo site): a
// request without any seed source is valid. The seeds it has are validated
// and returned as Build does.
func BuildSpec(req Request, newID func() string, now time.Time) (Job, error) {
	return build(req, newID, now, false)
}

func build(req Request, newID func() string, now time.Time, needSeeds bool) (Job, error) {
	var errs, badSeeds FieldErrors
	id := req.CrawlID
	if id == "" {
		id = newID()
	} else if !ValidCrawlID(id) {
		errs.add("crawl_id", "want 1-%d letters, digits, '.', '_' or '-'", MaxCrawlID)
	}
	if len(req.Name) > MaxName {
		errs.add("name", "%d bytes, want at most %d", len(req.Name), MaxName)
	}
	switch prev := req.PreviousCrawlID; {
	case prev == "":
	case !ValidCrawlID(prev):
		errs.add("previous_crawl_id", "want 1-%d letters, digits, '.', '_' or '-'", MaxCrawlID)
	case prev == id:
		errs.add("previous_crawl_id", "%q is the crawl itself, want an earlier crawl", prev)
	}

	var out []Seed
	seen := make(map[string]bool)
	addSeed := func(s Seed) {
		if !seen[s.URL] {
			seen[s.URL] = true
			out = append(out, s)
		}
	}
	if len(req.Seeds) > MaxSeeds {
		errs.add("seeds", "%d seeds, want at most %d", len(req.Seeds), MaxSeeds)
	} else {
		for i, raw := range req.Seeds {
			u, err := seeds.Parse(raw)
			if err != nil {
				badSeeds.add(fmt.Sprintf("seeds[%d]", i), "%v", err)
				continue
			}
			addSeed(Seed{URL: u})
		}
	}
	if req.SeedsText != "" {
		fromText, bad, err := seeds.Read(strings.NewReader(req.SeedsText))
		if err != nil { // a strings.Reader does not fail
			errs.add("seeds_text", "%v", err)
		}
		for _, b := range bad {
			badSeeds.add(fmt.Sprintf("seeds_text line %d", b.Line), "%v", b.Err)
		}
		for _, s := range fromText {
			addSeed(Seed{URL: s.URL})
		}
	}
	if req.Keywords != nil {
		for _, p := range buildKeywords(*req.Keywords, &errs) {
			u, err := seeds.Parse(p.URL)
			if err != nil {
				errs.add("keywords", "result page %q: %v", p.URL, err)
				continue
			}
			addSeed(Seed{URL: u, Engine: p.Engine})
		}
	}
	if !req.SkipBad {
		errs = append(errs, badSeeds...)
	}
	var sitemapURLs []string
	if len(req.SitemapURLs) > MaxListItems {
		errs.add("sitemap_urls", "%d sitemaps, want at most %d", len(req.SitemapURLs), MaxListItems)
	} else {
		for i, raw := range req.SitemapURLs {
			u, err := url.Parse(strings.TrimSpace(raw))
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs.add(fmt.Sprintf("sitemap_urls[%d]", i), "want an absolute http(s) URL")
				continue
			}
			sitemapURLs = append(sitemapURLs, u.String())
		}
	}
	if needSeeds && len(out) == 0 && len(sitemapURLs) == 0 && len(errs) == 0 {
		errs.add("seeds", "no valid seeds: give seeds, seeds_text, keywords or sitemap_urls")
	}

	spec := &crawlv1.CrawlSpec{
		CrawlId:   id,
		State:     crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Revision:  1,
		Name:      req.Name,
		CreatedAt: timestamppb.New(now),
		UpdatedAt: timestamppb.New(now),
		// Checked above.
		PreviousCrawlId: req.PreviousCrawlID,
	}
	if req.Scope != nil {
		spec.Scope = buildScope(*req.Scope, &errs)
	}
	if mode, ok := scopeMode(req, &errs); ok {
		if spec.Scope == nil {
			spec.Scope = &crawlv1.Scope{}
		}
		spec.Scope.Mode = mode
		var urls []string
		for _, sd := range out {
			if sd.Engine == "" {
				urls = append(urls, sd.URL)
			}
		}
		KeepOnSeeds(spec, urls)
	}
	if p := req.Priority; p != nil {
		spec.Priority = buildPriority(*p, &errs)
	}
	if x, err := ExtractionSpec(req.Extract); err != nil {
		errs.add("extract", "%s", err)
	} else {
		spec.Extract = x
	}
	if d := req.Documents; d != nil {
		if types, err := doctypes.Expand(d.ContentTypes); err != nil {
			errs.add("documents.content_types", "%s", err)
		} else if len(types) > 0 {
			spec.Documents = &crawlv1.Documents{ContentTypes: types}
		}
	}
	if r := req.Render; r != nil {
		spec.Render = buildRender(*r, &errs)
	}
	if l := req.Limits; l != nil {
		spec.Limits = &crawlv1.Limits{MaxDepth: l.MaxDepth, MaxPages: l.MaxPages, MaxPagesPerHost: l.MaxPagesPerHost,
			MaxDuration: timeLimit("limits.max_duration", l.MaxDuration, &errs)}
	}
	if id := req.Identity; id != nil {
		spec.Identity = buildIdentity(*id, &errs)
	}
	if p := req.Politeness; p != nil {
		spec.Politeness = &crawlv1.Politeness{
			Delay:            duration("politeness.delay", p.Delay, &errs),
			MaxCrawlDelay:    duration("politeness.max_crawl_delay", p.MaxCrawlDelay, &errs),
			SerpIgnoreRobots: p.SerpIgnoreRobots,
		}
		if p.SerpIgnoreRobots && req.Keywords == nil {
			// an exception to robots.txt is only for result pages the
			// user asked for by keywords; without them it would be a
			// flag waiting to apply to something else
			errs.add("politeness.serp_ignore_robots", "applies only to the result pages of keywords; the request has none")
		}
	}
	if r := req.Revisit; r != nil {
		spec.Revisit = &crawlv1.Revisit{
			Enabled:         r.Enabled,
			MinInterval:     duration("revisit.min_interval", r.MinInterval, &errs),
			MaxInterval:     duration("revisit.max_interval", r.MaxInterval, &errs),
			InitialInterval: duration("revisit.initial_interval", r.InitialInterval, &errs),
		}
		if mn, mx := spec.Revisit.MinInterval, spec.Revisit.MaxInterval; mn != nil && mx != nil && mx.AsDuration() < mn.AsDuration() {
			errs.add("revisit.max_interval", "%v is below min_interval %v", mx.AsDuration(), mn.AsDuration())
		}
	}
	if len(errs) > 0 {
		return Job{}, errs
	}
	return Job{Spec: spec, Seeds: out, Invalid: badSeeds, Sitemaps: req.Sitemaps, SitemapURLs: sitemapURLs}, nil
}

// Scope modes as the request names them (Scope.Mode).
const (
	ScopeDomain = "domain"
	ScopeHost   = "host"
	ScopeWeb    = "web"
)

// ModeOf is the request's scope mode: Scope.Mode, or when empty its
// default: "web" for a crawl with keywords (result pages link to other
// sites) or allow lists (a scope of their own), else "domain". An unknown
// mode is returned as given (BuildSpec refuses it).
func ModeOf(req Request) string {
	if req.Scope != nil && req.Scope.Mode != "" {
		return req.Scope.Mode
	}
	if req.Keywords != nil || (req.Scope != nil && len(req.Scope.AllowHosts)+len(req.Scope.AllowDomains) > 0) {
		return ScopeWeb
	}
	return ScopeDomain
}

// scopeMode is the crawl's scope mode (ModeOf). ok is false when the mode
// is invalid (reported in errs).
func scopeMode(req Request, errs *FieldErrors) (crawlv1.ScopeMode, bool) {
	switch mode := ModeOf(req); mode {
	case ScopeDomain:
		return crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, true
	case ScopeHost:
		return crawlv1.ScopeMode_SCOPE_MODE_HOST, true
	case ScopeWeb:
		return crawlv1.ScopeMode_SCOPE_MODE_WEB, true
	default:
		errs.add("scope.mode", "%q, want %s, %s or %s", mode, ScopeDomain, ScopeHost, ScopeWeb)
		return 0, false
	}
}

// ScopeModeName is the request's name of a spec's scope mode.
func ScopeModeName(m crawlv1.ScopeMode) string {
	switch m {
	case crawlv1.ScopeMode_SCOPE_MODE_DOMAIN:
		return ScopeDomain
	case crawlv1.ScopeMode_SCOPE_MODE_HOST:
		return ScopeHost
	default:
		return ScopeWeb
	}
}

// KeepOnSeeds adds the sites of seeds (canonical URLs, no search-engine
// result pages) to the seed sites of spec's scope when its mode keeps the
// crawl on them (scope.SeedSites): call it with every seed before the
// spec is published, those of a seeds file and of sitemaps included.
func KeepOnSeeds(spec *crawlv1.CrawlSpec, seeds []string) {
	sc := spec.GetScope()
	hosts, domains := scope.SeedSites(sc.GetMode(), seeds)
	if len(hosts)+len(domains) == 0 {
		return
	}
	sc.SeedHosts = mergeSorted(sc.SeedHosts, hosts)
	sc.SeedDomains = mergeSorted(sc.SeedDomains, domains)
}

// mergeSorted returns the sorted union of a and b (b sorted, without
// repeats).
func mergeSorted(a, b []string) []string {
	if len(a) == 0 {
		return b
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

func buildKeywords(k Keywords, errs *FieldErrors) []keywords.Page {
	n := len(*errs)
	queries, err := keywords.Queries(k.Combine, k.Terms, k.Groups, k.MaxCombination)
	if err != nil {
		field := "keywords.terms"
		if k.Combine == keywords.ModeProduct {
			field = "keywords.groups"
		}
		if k.Combine != "" && k.Combine != keywords.ModeEach && k.Combine != keywords.ModeCombinations && k.Combine != keywords.ModeProduct {
			field = "keywords.combine"
		}
		errs.add(field, "%v", err)
	}
	if k.MaxCombination < 0 || k.MaxCombination > 5 {
		errs.add("keywords.max_combination", "%d, want 0-5", k.MaxCombination)
	}
	if k.Pages < 0 || k.Pages > keywords.MaxPages {
		errs.add("keywords.pages", "%d, want 0-%d", k.Pages, keywords.MaxPages)
	}
	var templates []keywords.Template
	for i, e := range k.Engines {
		t, ok := keywords.Preset(e)
		if !ok {
			errs.add(fmt.Sprintf("keywords.engines[%d]", i), "unknown engine %q (presets: %s; or give a template)", e, strings.Join(keywords.PresetNames(), ", "))
			continue
		}
		templates = append(templates, t)
	}
	for i, t := range k.Templates {
		if err := t.Validate(); err != nil {
			errs.add(fmt.Sprintf("keywords.templates[%d]", i), "%v", err)
			continue
		}
		templates = append(templates, t)
	}
	if len(k.Engines)+len(k.Templates) == 0 {
		errs.add("keywords.engines", "give at least one engine or template")
	}
	if len(*errs) > n {
		return nil
	}
	pages := max(k.Pages, 1)
	if len(queries)*len(templates)*pages > MaxSeeds {
		errs.add("keywords", "%d result pages, want at most %d", len(queries)*len(templates)*pages, MaxSeeds)
		return nil
	}
	return keywords.Expand(queries, templates, pages)
}

// scopeList is one list field of a scope: hosts or domains, or RE2
// patterns (re).
type scopeList struct {
	field string
	items []string
	re    bool
}

func buildScope(s Scope, errs *FieldErrors) *crawlv1.Scope {
	lists := []scopeList{
		{"scope.allow_hosts", s.AllowHosts, false},
		{"scope.deny_hosts", s.DenyHosts, false},
		{"scope.allow_domains", s.AllowDomains, false},
		{"scope.deny_domains", s.DenyDomains, false},
		{"scope.allow_patterns", s.AllowPatterns, true},
		{"scope.deny_patterns", s.DenyPatterns, true},
		{"scope.detail_patterns", s.DetailPatterns, true},
	}
	checkLists(lists, errs)
	if s.NearDuplicateDistance > simhash.MaxNearDistance {
		errs.add("scope.near_duplicate_distance", "%d bits, want 1 to %d (0: the parser's default)", s.NearDuplicateDistance, simhash.MaxNearDistance)
	}
	if len(s.Sites) > MaxListItems {
		errs.add("scope.sites", "%d entries, want at most %d", len(s.Sites), MaxListItems)
	}
	var sites []*crawlv1.SiteRules
	for i, sr := range s.Sites {
		if i >= MaxListItems {
			break
		}
		field := fmt.Sprintf("scope.sites[%d]", i)
		if len(sr.Hosts)+len(sr.Domains) == 0 {
			errs.add(field, "name at least one of hosts and domains")
		}
		checkLists([]scopeList{
			{field + ".hosts", sr.Hosts, false},
			{field + ".domains", sr.Domains, false},
			{field + ".allow_patterns", sr.AllowPatterns, true},
			{field + ".deny_patterns", sr.DenyPatterns, true},
		}, errs)
		sites = append(sites, &crawlv1.SiteRules{Hosts: lowerAll(sr.Hosts), Domains: lowerAll(sr.Domains),
			AllowPatterns: sr.AllowPatterns, DenyPatterns: sr.DenyPatterns})
	}
	return &crawlv1.Scope{
		AllowHosts: lowerAll(s.AllowHosts), DenyHosts: lowerAll(s.DenyHosts),
		AllowDomains: lowerAll(s.AllowDomains), DenyDomains: lowerAll(s.DenyDomains),
		SameHostOnly:  s.SameHostOnly,
		AllowPatterns: s.AllowPatterns, DenyPatterns: s.DenyPatterns,
		MaxOutlinksPerPage: s.MaxOutlinksPerPage, MaxUrlLength: s.MaxURLLength,
		MaxRepeatedSegments: s.MaxRepeatedSegments,
		DetailPatterns:      s.DetailPatterns, DetailSelector: s.DetailSelector,
		FollowDuplicates:      s.FollowDuplicates,
		FollowTraps:           s.FollowTraps,
		Sites:                 sites,
		NearDuplicateDistance: s.NearDuplicateDistance,
	}
}

// buildPriority checks a request's priority rules (priority.Validate, rule
// by rule, so that each error names its rule) and returns them as the
// spec's; nil when it sets nothing.
func buildPriority(p Priority, errs *FieldErrors) *crawlv1.Priority {
	if len(p.Rules) > priority.MaxRules {
		errs.add("priority.rules", "%d rules, want at most %d", len(p.Rules), priority.MaxRules)
		return nil
	}
	out := &crawlv1.Priority{BreadthFirst: p.BreadthFirst}
	for i, r := range p.Rules {
		field := fmt.Sprintf("priority.rules[%d]", i)
		if len(r.Pattern) > MaxPattern {
			errs.add(field+".pattern", "%d bytes, want at most %d", len(r.Pattern), MaxPattern)
			continue
		}
		if len(r.Hosts) > MaxListItems {
			errs.add(field+".hosts", "%d entries, want at most %d", len(r.Hosts), MaxListItems)
			continue
		}
		pr := &crawlv1.PriorityRule{Pattern: r.Pattern, Delta: r.Delta, Hosts: lowerAll(r.Hosts)}
		if err := priority.Validate(&crawlv1.Priority{Rules: []*crawlv1.PriorityRule{pr}}); err != nil {
			errs.add(field, "%s", strings.TrimPrefix(err.Error(), "priority rule 1: "))
			continue
		}
		out.Rules = append(out.Rules, pr)
	}
	if len(out.Rules) == 0 && !out.BreadthFirst {
		return nil
	}
	return out
}

// lowerAll returns the items trimmed and in lower case.
func lowerAll(in []string) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = strings.ToLower(strings.TrimSpace(v))
	}
	return out
}

// checkLists reports the problems of scope lists: too many entries, empty
// ones, and entries that are not a host or domain, or not a valid RE2
// pattern of at most MaxPattern bytes.
func checkLists(lists []scopeList, errs *FieldErrors) {
	for _, l := range lists {
		if len(l.items) > MaxListItems {
			errs.add(l.field, "%d entries, want at most %d", len(l.items), MaxListItems)
			continue
		}
		for i, item := range l.items {
			field := fmt.Sprintf("%s[%d]", l.field, i)
			switch {
			case strings.TrimSpace(item) == "":
				errs.add(field, "empty")
			case l.re && len(item) > MaxPattern:
				errs.add(field, "%d bytes, want at most %d", len(item), MaxPattern)
			case l.re:
				if _, err := regexp.Compile(item); err != nil {
					errs.add(field, "invalid RE2 regexp: %v", err)
				}
			case strings.ContainsAny(item, "/ ?#"):
				errs.add(field, "%q is not a host or domain", item)
			}
		}
	}
}

// duration parses an optional Go duration field; it must be positive.
func duration(field, v string, errs *FieldErrors) *durationpb.Duration {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		errs.add(field, "%q is not a duration like \"1.5s\" or \"6h\"", v)
		return nil
	case d <= 0:
		errs.add(field, "%v, want a positive duration", d)
		return nil
	}
	return durationpb.New(d)
}

// timeLimit parses an optional Go duration field where 0 means "none":
// negative is refused, zero gives nil.
func timeLimit(field, v string, errs *FieldErrors) *durationpb.Duration {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		errs.add(field, "%q is not a duration like \"30m\" or \"6h\"", v)
		return nil
	case d < 0:
		errs.add(field, "%v, want a positive duration (or 0 for no time limit)", d)
		return nil
	case d == 0:
		return nil
	}
	return durationpb.New(d)
}

// buildIdentity checks a request's identity: the user agent
// (identity.CheckUserAgent) and every header (identity.ParseHeader), each
// name once; nil when it sets nothing.
func buildIdentity(in Identity, errs *FieldErrors) *crawlv1.Identity {
	out := &crawlv1.Identity{UserAgent: strings.TrimSpace(in.UserAgent)}
	if out.UserAgent != "" {
		if err := identity.CheckUserAgent(out.UserAgent); err != nil {
			errs.add("identity.user_agent", "%v", err)
		}
	}
	if len(in.Headers) > identity.MaxHeaders {
		errs.add("identity.headers", "%d headers, want at most %d", len(in.Headers), identity.MaxHeaders)
		return out
	}
	first := make(map[string]int)
	for i, raw := range in.Headers {
		field := fmt.Sprintf("identity.headers[%d]", i)
		h, err := identity.ParseHeader(raw)
		if err != nil {
			errs.add(field, "%v", err)
			continue
		}
		if j, ok := first[h.Name]; ok {
			errs.add(field, "header %s given twice (also identity.headers[%d]): give it once, values joined by \", \"", h.Name, j)
			continue
		}
		first[h.Name] = i
		out.Headers = append(out.Headers, &crawlv1.Header{Name: h.Name, Value: h.Value})
	}
	if out.UserAgent == "" && len(out.Headers) == 0 {
		return nil
	}
	return out
}

// Transition returns the next revision of spec with state, updated at now,
// or ErrFinal when spec is cancelled (a cancelled crawl stays cancelled).
// spec is not modified.
func Transition(spec *crawlv1.CrawlSpec, state crawlv1.CrawlState, now time.Time) (*crawlv1.CrawlSpec, error) {
	if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED && state != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		return nil, ErrFinal
	}
	next := proto.Clone(spec).(*crawlv1.CrawlSpec)
	next.State = state
	next.Revision = spec.GetRevision() + 1
	next.UpdatedAt = timestamppb.New(now)
	return next, nil
}

// Delete returns the next revision of spec that deletes its crawl:
// CANCELLED (final, like a cancel), deleted_at and updated_at now. A spec
// already deleted is returned as it is (a second deletion changes
// nothing). spec is not modified.
func Delete(spec *crawlv1.CrawlSpec, now time.Time) *crawlv1.CrawlSpec {
	if spec.GetDeletedAt() != nil {
		return spec
	}
	next := proto.Clone(spec).(*crawlv1.CrawlSpec)
	next.State = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	next.Revision = spec.GetRevision() + 1
	next.UpdatedAt = timestamppb.New(now)
	next.DeletedAt = timestamppb.New(now)
	return next
}

// Revise returns spec as the next revision of old, the specification the
// crawl already has: spec's name, scope, limits, politeness, revisit
// policy, identity, priority, extraction rules and documents with old's state and creation time, revision old+1, updated at
// now. A cancelled crawl stays cancelled: ErrFinal. Neither argument is
// modified.
func Revise(old, spec *crawlv1.CrawlSpec, now time.Time) (*crawlv1.CrawlSpec, error) {
	if old.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		return nil, ErrFinal
	}
	next := proto.Clone(spec).(*crawlv1.CrawlSpec)
	next.State = old.GetState()
	next.CreatedAt = nil
	if at := old.GetCreatedAt(); at != nil {
		next.CreatedAt = timestamppb.New(at.AsTime())
	}
	next.Revision = old.GetRevision() + 1
	next.UpdatedAt = timestamppb.New(now)
	return next, nil
}

// ErrFinal reports a change to a cancelled crawl.
var ErrFinal = fmt.Errorf("crawl is cancelled")

// Counts is a crawl's progress, from ClickHouse.
type Counts struct {
	Admitted uint64 `json:"admitted"` // distinct URLs admitted by the scheduler
	// Terminal of those reached a terminal state (fetched, redirected,
	// robots-denied, failed after the last retry, cancelled); Pending did
	// not: Retrying of them wait for a scheduled retry, Queued have no
	// attempt yet.
	Terminal  uint64 `json:"terminal"`
	Pending   uint64 `json:"pending"`
	Retrying  uint64 `json:"retrying"`
	Queued    uint64 `json:"queued"`
	Fetched   uint64 `json:"fetched"`   // distinct URLs fetched without error
	Errors    uint64 `json:"errors"`    // failed fetch attempts
	Documents uint64 `json:"documents"` // distinct documents extracted
	// Finished: URLs were admitted and none is pending (exact, from
	// ClickHouse; outlinks of the last pages may still be on their way,
	// which InFlight sees).
	Finished bool `json:"finished"`
	// InFlight is the records the scheduler, fetcher and parser groups
	// have not finished (consumer-group lag): every partition of the
	// discovered topic, and the partitions of the crawl's hosts on the
	// fetch and fetched topics (other crawls sharing those partitions
	// count too); -1 when unknown.
	InFlight int64 `json:"in_flight"`
}

// Document is one exported document (a line of the NDJSON export).
type Document struct {
	URL         string    `json:"url"`
	Host        string    `json:"host"`
	FetchedAt   time.Time `json:"fetched_at"`
	Status      uint16    `json:"status"`
	Title       string    `json:"title"`
	Text        string    `json:"text"`
	ContentType string    `json:"content_type"`
	Language    string    `json:"language"`
	Outlinks    uint32    `json:"outlinks"`
	// The page's structured data and what the crawl took from it, as JSON
	// values (the documents table's texts, `[]` and `{}` when empty):
	// JSON-LD items, OpenGraph and Twitter card properties, microdata
	// items, the language detected from the text, the fields of the
	// crawl's extraction rule, and a PDF's or office file's properties.
	JSONLD           chexport.JSONArray  `json:"json_ld"`
	OpenGraph        chexport.JSONObject `json:"opengraph"`
	Microdata        chexport.JSONArray  `json:"microdata"`
	LanguageDetected string              `json:"language_detected"`
	Fields           chexport.JSONObject `json:"fields"`
	Properties       chexport.JSONObject `json:"properties"`
}

// StatusDeleted is the status of a deleted crawl (CrawlSpec.deleted_at):
// cancelled for good, its rows removed from ClickHouse.
const StatusDeleted = "deleted"

// Status names a crawl's status from its state and counts: running,
// paused, cancelled, or drained (running, finished: URLs admitted and
// none pending, and nothing in flight in the pipeline). A deleted crawl
// shows StatusDeleted instead, whatever its state (the API's view).
func Status(state crawlv1.CrawlState, c Counts, haveCounts bool) string {
	switch state {
	case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
		return "paused"
	case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		return "cancelled"
	}
	if haveCounts && c.Finished && c.InFlight == 0 {
		return "drained"
	}
	return "running"
}
