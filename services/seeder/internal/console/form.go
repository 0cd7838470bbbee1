package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/keywords"
)

// The crawl form's fields are named after the request's JSON fields
// (jobs.Request), so that the API's field errors ("scope.allow_patterns[2]",
// "seeds_text line 7") find their field by stripping the index or line.
// Lists are text areas with one entry a line; keywords.groups is one
// group a line, its terms comma-separated; keywords.templates one
// "name URL-template" a line; scope.sites is JSON as the API takes it;
// identity.headers one "Name: value" a line, as the API takes them;
// priority.rules one rule a line, "PATTERN=+N" as the launcher's --priority
// takes it, or "host1,host2 PATTERN=+N" for a rule of some hosts only
// (formatRule writes them back); extract is the JSON of the request's
// extract object, {"rules": [...]}, as the API and --extract FILE take it;
// documents.content_types is comma-separated (pdf, office, media types);
// render.mode is a choice of never, auto or always (none: the fetchers'),
// render.sites one "host1,host2 MODE" a line, as formatRenderSite writes
// them back.

// formErrors are a form's errors by field name; "" holds the ones that
// name no field of the form.
type formErrors map[string][]string

func (e formErrors) add(field, msg string) { e[field] = append(e[field], msg) }

// formFields are the form's fields, for mapping errors.
var formFields = map[string]bool{
	"crawl_id": true, "name": true, "seeds_text": true, "skip_invalid_seeds": true,
	"keywords.terms": true, "keywords.groups": true, "keywords.combine": true, "keywords.max_combination": true,
	"keywords.engines": true, "keywords.templates": true, "keywords.pages": true,
	"scope.mode": true, "scope.allow_hosts": true, "scope.deny_hosts": true, "scope.allow_domains": true, "scope.deny_domains": true,
	"scope.same_host_only": true, "scope.allow_patterns": true, "scope.deny_patterns": true,
	"scope.max_outlinks_per_page": true, "scope.max_url_length": true, "scope.max_repeated_segments": true,
	"scope.detail_patterns": true, "scope.detail_selector": true, "scope.follow_duplicates": true, "scope.follow_traps": true,
	"scope.sites": true, "scope.near_duplicate_distance": true,
	"limits.max_depth": true, "limits.max_pages": true, "limits.max_pages_per_host": true, "limits.max_duration": true,
	"identity.user_agent": true, "identity.headers": true,
	"politeness.delay": true, "politeness.max_crawl_delay": true, "politeness.serp_ignore_robots": true,
	"revisit.enabled": true, "revisit.min_interval": true, "revisit.max_interval": true, "revisit.initial_interval": true,
	"sitemaps": true, "sitemap_urls": true, "previous_crawl_id": true,
	"priority.rules": true, "priority.breadth_first": true,
	"extract": true, "documents.content_types": true,
	"render.mode": true, "render.sites": true, "render.other_hosts": true,
}

// fieldOf maps an API error's field to the form field showing it.
func fieldOf(apiField string) string {
	f := apiField
	if i := strings.IndexAny(f, "[ "); i >= 0 {
		f = f[:i]
	}
	switch f {
	case "seeds":
		return "seeds_text"
	case "keywords":
		return "keywords.terms"
	}
	if formFields[f] {
		return f
	}
	return ""
}

// mapErrors files the API's field errors under the form's fields; the
// message keeps the API's field name when it is more precise ("line 3").
func mapErrors(fe jobs.FieldErrors, into formErrors) {
	for _, e := range fe {
		f := fieldOf(e.Field)
		msg := e.Message
		if f != e.Field {
			msg = e.Field + ": " + msg
		}
		into.add(f, msg)
	}
}

// lines returns the non-blank lines of a text area, trimmed.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// requestFromForm builds the API request a crawl form describes. Errors
// of the form itself (a number that is no number, unreadable JSON) are
// returned by field, the same way the API's are.
func requestFromForm(v url.Values) (jobs.Request, formErrors) {
	errs := formErrors{}
	num := func(field string, bits int) uint64 {
		s := strings.TrimSpace(v.Get(field))
		if s == "" {
			return 0
		}
		n, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			errs.add(field, "want a whole number from 0 to "+strconv.FormatUint(1<<bits-1, 10))
		}
		return n
	}
	on := func(field string) bool { return v.Get(field) != "" }
	req := jobs.Request{
		CrawlID:     strings.TrimSpace(v.Get("crawl_id")),
		Name:        strings.TrimSpace(v.Get("name")),
		SeedsText:   v.Get("seeds_text"),
		SkipBad:     on("skip_invalid_seeds"),
		Sitemaps:    on("sitemaps"),
		SitemapURLs: lines(v.Get("sitemap_urls")),
		// Validated by jobs.Build, its errors shown on the field.
		PreviousCrawlID: strings.TrimSpace(v.Get("previous_crawl_id")),
	}
	if strings.TrimSpace(req.SeedsText) == "" {
		req.SeedsText = ""
	}
	kw := jobs.Keywords{
		Terms:          lines(v.Get("keywords.terms")),
		Combine:        v.Get("keywords.combine"),
		MaxCombination: int(num("keywords.max_combination", 8)),
		Engines:        v["keywords.engines"],
		Pages:          int(num("keywords.pages", 16)),
	}
	for _, l := range lines(v.Get("keywords.groups")) {
		var g []string
		for _, t := range strings.Split(l, ",") {
			if t = strings.TrimSpace(t); t != "" {
				g = append(g, t)
			}
		}
		kw.Groups = append(kw.Groups, g)
	}
	for i, l := range lines(v.Get("keywords.templates")) {
		name, tmpl, ok := strings.Cut(l, " ")
		if !ok {
			errs.add("keywords.templates", "line "+strconv.Itoa(i+1)+": want a name, a space and a URL template with {query}")
			continue
		}
		kw.Templates = append(kw.Templates, keywords.Template{Name: name, URL: strings.TrimSpace(tmpl)})
	}
	if len(kw.Terms)+len(kw.Groups) > 0 || len(kw.Templates) > 0 {
		req.Keywords = &kw
	}
	sc := jobs.Scope{
		Mode:       strings.TrimSpace(v.Get("scope.mode")),
		AllowHosts: lines(v.Get("scope.allow_hosts")), DenyHosts: lines(v.Get("scope.deny_hosts")),
		AllowDomains: lines(v.Get("scope.allow_domains")), DenyDomains: lines(v.Get("scope.deny_domains")),
		SameHostOnly:  on("scope.same_host_only"),
		AllowPatterns: lines(v.Get("scope.allow_patterns")), DenyPatterns: lines(v.Get("scope.deny_patterns")),
		MaxOutlinksPerPage:    uint32(num("scope.max_outlinks_per_page", 32)),
		MaxURLLength:          uint32(num("scope.max_url_length", 32)),
		MaxRepeatedSegments:   uint32(num("scope.max_repeated_segments", 32)),
		DetailPatterns:        lines(v.Get("scope.detail_patterns")),
		DetailSelector:        strings.TrimSpace(v.Get("scope.detail_selector")),
		FollowDuplicates:      on("scope.follow_duplicates"),
		FollowTraps:           on("scope.follow_traps"),
		NearDuplicateDistance: uint32(num("scope.near_duplicate_distance", 32)),
	}
	if s := strings.TrimSpace(v.Get("scope.sites")); s != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc.Sites); err != nil {
			errs.add("scope.sites", "want a JSON array of {hosts, domains, allow_patterns, deny_patterns}: "+err.Error())
		}
	}
	req.Scope = &sc
	if p := priorityFromForm(v.Get("priority.rules"), on("priority.breadth_first"), errs); p != nil {
		req.Priority = p
	}
	if x := strings.TrimSpace(v.Get("extract")); x != "" {
		req.Extract = extractFromForm(x, errs)
	}
	if types := commaList(v.Get("documents.content_types")); len(types) > 0 {
		req.Documents = &jobs.Documents{ContentTypes: types}
	}
	req.Render = renderFromForm(v.Get("render.mode"), v.Get("render.sites"), on("render.other_hosts"), errs)
	req.Limits = &jobs.Limits{MaxDepth: uint32(num("limits.max_depth", 32)), MaxPages: num("limits.max_pages", 64),
		MaxPagesPerHost: num("limits.max_pages_per_host", 64), MaxDuration: strings.TrimSpace(v.Get("limits.max_duration"))}
	if id := (jobs.Identity{UserAgent: strings.TrimSpace(v.Get("identity.user_agent")), Headers: lines(v.Get("identity.headers"))}); id.UserAgent != "" || len(id.Headers) > 0 {
		req.Identity = &id
	}
	req.Politeness = &jobs.Politeness{Delay: strings.TrimSpace(v.Get("politeness.delay")),
		MaxCrawlDelay: strings.TrimSpace(v.Get("politeness.max_crawl_delay")), SerpIgnoreRobots: on("politeness.serp_ignore_robots")}
	if on("revisit.enabled") {
		req.Revisit = &jobs.Revisit{Enabled: true, MinInterval: strings.TrimSpace(v.Get("revisit.min_interval")),
			MaxInterval: strings.TrimSpace(v.Get("revisit.max_interval")), InitialInterval: strings.TrimSpace(v.Get("revisit.initial_interval"))}
	}
	return req, errs
}

// priorityFromForm reads the form's priority rules, one a line:
// "PATTERN=+N", or "host1,host2 PATTERN=+N" (the hosts, comma-separated,
// before the first space; a canonical URL holds no space, so a pattern
// needs none). A line that is no rule is a form error naming its line;
// jobs.Build checks the rest. nil when the form sets nothing.
func priorityFromForm(text string, breadthFirst bool, errs formErrors) *jobs.Priority {
	p := &jobs.Priority{BreadthFirst: breadthFirst}
	for i, l := range lines(text) {
		var hosts []string
		if h, rest, ok := strings.Cut(l, " "); ok {
			for _, host := range strings.Split(h, ",") {
				if host = strings.TrimSpace(host); host != "" {
					hosts = append(hosts, host)
				}
			}
			l = strings.TrimSpace(rest)
		}
		pr, err := priority.ParseRule(l)
		if err != nil {
			errs.add("priority.rules", "line "+strconv.Itoa(i+1)+": "+err.Error())
			continue
		}
		p.Rules = append(p.Rules, jobs.PriorityRule{Pattern: pr.GetPattern(), Delta: pr.GetDelta(), Hosts: hosts})
	}
	if len(p.Rules) == 0 && !p.BreadthFirst {
		return nil
	}
	return p
}

// renderFromForm reads the form's render setting: its mode, and its sites
// one "host1,host2 MODE" a line (the hosts comma-separated, the mode
// after the last space). A line without both is a form error naming its
// line; jobs.Build checks the rest. nil when the form sets nothing.
func renderFromForm(mode, sites string, otherHosts bool, errs formErrors) *jobs.Render {
	r := &jobs.Render{Mode: strings.TrimSpace(mode), OtherHosts: otherHosts}
	for n, l := range lines(sites) {
		cut := strings.LastIndexByte(l, ' ')
		if cut < 0 || strings.TrimSpace(l[:cut]) == "" {
			errs.add("render.sites", "line "+strconv.Itoa(n+1)+`: want "host1,host2 MODE" (MODE: never, auto or always)`)
			continue
		}
		hosts := strings.FieldsFunc(l[:cut], func(r rune) bool { return r == ',' || r == ' ' })
		r.Sites = append(r.Sites, jobs.RenderSite{Hosts: hosts, Mode: l[cut+1:]})
	}
	if r.Mode == "" && len(r.Sites) == 0 && !r.OtherHosts {
		return nil
	}
	return r
}

// formatRenderSite writes a render site as the form reads it: "host1,host2 MODE".
func formatRenderSite(s *crawlv1.RenderSite) string {
	return strings.Join(s.GetHosts(), ",") + " " + jobs.RenderModeName(s.GetMode())
}

// formatRule writes a priority rule as the form reads it: "PATTERN=+N",
// its hosts first when it has any.
func formatRule(r *crawlv1.PriorityRule) string {
	s := r.GetPattern() + "=" + fmt.Sprintf("%+d", r.GetDelta())
	if len(r.GetHosts()) > 0 {
		s = strings.Join(r.GetHosts(), ",") + " " + s
	}
	return s
}

// extractFromForm reads the form's extraction rules: the JSON of the
// request's extract object, {"rules": [...]}, unknown keys refused as the
// API refuses them. JSON that does not read is a form error; jobs.Build
// checks the rules.
func extractFromForm(text string, errs formErrors) *jobs.Extraction {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var x jobs.Extraction
	if err := dec.Decode(&x); err != nil {
		errs.add("extract", `want a JSON object {"rules": [{"name", "pattern", "hosts", "fields": [{"name", "css" or "xpath", "attr", "html", "list", "type"}]}]}: `+err.Error())
		return nil
	}
	if dec.More() {
		errs.add("extract", "want one JSON object: text follows it")
		return nil
	}
	return &x
}

// commaList returns the comma-separated items of s, trimmed, blanks left
// out.
func commaList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
