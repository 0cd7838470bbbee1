package launcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

// DefaultMaxDepth is the deepest link depth a crawl admits when neither
// --max-depth nor the --spec file sets one (seeds are depth 0). It is the
// scheduler's own default (its --max-depth); the launcher writes it into
// the crawl's spec so that what -h says is what the crawl does.
const DefaultMaxDepth = 16

// Opt is a flag value that remembers whether the flag was given (on the
// command line or as its CRAWLER_ variable).
type Opt[T any] struct {
	V   T
	Set bool
}

// ScopeFlags are a crawl's scope, limits and identity as launcher flags;
// each is the field of the crawl request (the body of POST /v1/crawls)
// named in its help. A flag that is given replaces the --spec file's field (a list
// flag, given once or more, replaces the whole list); one that is not
// leaves the field alone.
type ScopeFlags struct {
	Mode          Opt[string]   // flag scope
	AllowHosts    Opt[[]string] // flag allow-host (repeatable)
	DenyHosts     Opt[[]string] // flag deny-host (repeatable)
	AllowDomains  Opt[[]string] // flag allow-domain (repeatable)
	DenyDomains   Opt[[]string] // flag deny-domain (repeatable)
	SameHostOnly  Opt[bool]     // flag same-host-only
	FollowTraps   Opt[bool]     // flag follow-traps
	AllowPatterns Opt[[]string] // flag allow-pattern (repeatable)
	DenyPatterns  Opt[[]string] // flag deny-pattern (repeatable)

	MaxDepth        Opt[uint32] // flag max-depth
	MaxPages        Opt[uint64] // flag max-pages
	MaxPagesPerHost Opt[uint64] // flag max-pages-per-host
	MaxDuration     Opt[string] // flag max-duration

	UserAgent Opt[string]   // flag user-agent
	Headers   Opt[[]string] // flag header (repeatable)

	Priority     Opt[[]crawlspec.PriorityRule] // flag priority (repeatable)
	BreadthFirst Opt[bool]                     // flag breadth-first

	// Extract (flag extract) is a file holding the crawl's extraction
	// rules, the request's extract object ({"rules": [...]}); it
	// replaces the spec file's. Documents (flag documents) are the media
	// types kept beyond HTML, expanded from the flag's comma-separated
	// names (libs/doctypes.Expand); they replace the spec file's.
	Extract   Opt[string]
	Documents Opt[[]string]
}

func listFlag(fs *flag.FlagSet, o *Opt[[]string], name, usage string) {
	fs.Func(name, usage, func(s string) error {
		o.V = append(o.V, s)
		o.Set = true
		return nil
	})
}

func boolFlag(fs *flag.FlagSet, o *Opt[bool], name, usage string) {
	fs.BoolFunc(name, usage, func(s string) error {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("want true or false")
		}
		o.V, o.Set = b, true
		return nil
	})
}

func uintFlag[T uint32 | uint64](fs *flag.FlagSet, o *Opt[T], bits int, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseUint(s, 10, bits)
		if err != nil {
			return fmt.Errorf("want a whole number from 0 to %d", uint64(1)<<bits-1)
		}
		o.V, o.Set = T(v), true
		return nil
	})
}

// RegisterFlags binds the scope and limit flags.
func (s *ScopeFlags) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("scope", "how far the crawl goes from its seeds: `domain` (their registrable domains and subdomains), host (their hosts) or web (anywhere the other rules allow); scope.mode, default domain (web with keywords or allow lists)", func(v string) error {
		s.Mode = Opt[string]{V: v, Set: true}
		return nil
	})
	listFlag(fs, &s.AllowHosts, "allow-host", "follow links only to this `host` (repeatable; scope.allow_hosts: with allow-domain, a link must match one of them)")
	listFlag(fs, &s.DenyHosts, "deny-host", "never follow links to this `host` (repeatable; scope.deny_hosts)")
	listFlag(fs, &s.AllowDomains, "allow-domain", "follow links only to this `domain` and its subdomains (repeatable; scope.allow_domains)")
	listFlag(fs, &s.DenyDomains, "deny-domain", "never follow links to this `domain` or its subdomains (repeatable; scope.deny_domains)")
	boolFlag(fs, &s.SameHostOnly, "same-host-only", "on ordinary pages follow only links to the page's own host (scope.same_host_only)")
	boolFlag(fs, &s.FollowTraps, "follow-traps", "follow the links the parser suspects as a crawler trap (pages of one URL family that repeat one another and link nothing new but the next number: an empty calendar's months); by default they end as trap_suspected (scope.follow_traps)")
	listFlag(fs, &s.AllowPatterns, "allow-pattern", "RE2 `regexp` over the canonical URL; when any is given a link must match one (repeatable; scope.allow_patterns)")
	listFlag(fs, &s.DenyPatterns, "deny-pattern", "RE2 `regexp` over the canonical URL; a matching link is dropped (repeatable; scope.deny_patterns)")
	uintFlag(fs, &s.MaxDepth, 32, "max-depth", fmt.Sprintf("deepest link `depth` admitted, seeds being depth 0 and their links depth 1; at least 1 (limits.max_depth; default: the spec file's, else %d)", DefaultMaxDepth))
	uintFlag(fs, &s.MaxPages, 64, "max-pages", "most `pages` the crawl fetches, 0 = unlimited (limits.max_pages; default: the spec file's, else unlimited)")
	uintFlag(fs, &s.MaxPagesPerHost, 64, "max-pages-per-host", "most `pages` the crawl admits per host, 0 = unlimited (limits.max_pages_per_host; default: the spec file's, else unlimited)")
	fs.Func("max-duration", "time limit, a Go `duration` such as 30m: that long after its start the crawl is cancelled, its remaining URLs recorded as cancelled, and the run ends; 0 = none (limits.max_duration; default: the spec file's, else none)", func(v string) error {
		s.MaxDuration = Opt[string]{V: v, Set: true}
		return nil
	})
	fs.Func("user-agent", "the crawl's User-Agent: your crawler's product token, robots.txt groups are matched on it, and a contact in parentheses, e.g. \"examplebot/1.0 (+https://example.org/bot)\" (identity.user_agent; default: the spec file's, else the fetchers' --user-agent)", func(v string) error {
		s.UserAgent = Opt[string]{V: v, Set: true}
		return nil
	})
	fs.Func("priority", "a priority rule `PATTERN=+N`: every URL whose canonical form matches the RE2 PATTERN has N (-1000 to 1000, not 0; PATTERN=-N lowers) added to its priority, and each host fetches its highest priority first, then the shallowest (repeatable; priority.rules, replacing the spec file's; a rule of some hosts only goes in the spec file)", func(v string) error {
		r, err := priority.ParseRule(v)
		if err != nil {
			return err
		}
		s.Priority.V = append(s.Priority.V, crawlspec.PriorityRule{Pattern: r.GetPattern(), Delta: r.GetDelta()})
		s.Priority.Set = true
		return nil
	})
	boolFlag(fs, &s.BreadthFirst, "breadth-first", "ignore every priority signal (rules, sitemaps' <priority> and <lastmod>, in-links): each host's URLs go shallowest first (priority.breadth_first)")
	fs.Func("extract", "a JSON `file` of extraction rules, the crawl request's extract object: {\"rules\": [{\"name\": \"product\", \"pattern\": \"/product/\", \"fields\": [{\"name\": \"price\", \"css\": \".price\", \"type\": \"number\"}, …]}]}; each page takes the fields of the first rule whose pattern matches its URL into documents.fields (extract, replacing the spec file's)", func(v string) error {
		s.Extract = Opt[string]{V: v, Set: true}
		return nil
	})
	fs.Func("documents", "documents beyond HTML the crawl keeps and reads, comma separated: pdf, office (docx, xlsx, pptx, odt, ods, odp), any of those, all, or media types; \"\" keeps none (documents.content_types, replacing the spec file's)", func(v string) error {
		types, err := doctypes.Expand(strings.Split(v, ","))
		if err != nil {
			return err
		}
		s.Documents = Opt[[]string]{V: types, Set: true}
		return nil
	})
	listFlag(fs, &s.Headers, "header", "an extra request header `\"Name: value\"` sent with every request of the crawl, robots.txt included (repeatable; identity.headers; not Cookie, Host, Authorization or hop-by-hop headers)")
}

// Validate reports flag values that the crawl request cannot express.
func (s ScopeFlags) Validate() error {
	if s.MaxDepth.Set && s.MaxDepth.V == 0 {
		return fmt.Errorf("max-depth 0: want at least 1 (seeds are depth 0; leave the flag out for the default, %d)", DefaultMaxDepth)
	}
	return nil
}

// Apply overrides req's fields with the flags that were given.
func (s ScopeFlags) Apply(req *crawlspec.Request) {
	var scope crawlspec.Scope
	if req.Scope != nil {
		scope = *req.Scope
	}
	scopeSet := false
	lists := []struct {
		opt Opt[[]string]
		dst *[]string
	}{
		{s.AllowHosts, &scope.AllowHosts}, {s.DenyHosts, &scope.DenyHosts},
		{s.AllowDomains, &scope.AllowDomains}, {s.DenyDomains, &scope.DenyDomains},
		{s.AllowPatterns, &scope.AllowPatterns}, {s.DenyPatterns, &scope.DenyPatterns},
	}
	for _, l := range lists {
		if l.opt.Set {
			*l.dst = append([]string(nil), l.opt.V...)
			scopeSet = true
		}
	}
	if s.SameHostOnly.Set {
		scope.SameHostOnly = s.SameHostOnly.V
		scopeSet = true
	}
	if s.FollowTraps.Set {
		scope.FollowTraps = s.FollowTraps.V
		scopeSet = true
	}
	if s.Mode.Set {
		scope.Mode = s.Mode.V
		scopeSet = true
	}
	if scopeSet {
		req.Scope = &scope
	}

	var limits crawlspec.Limits
	if req.Limits != nil {
		limits = *req.Limits
	}
	limitsSet := false
	if s.MaxDepth.Set {
		limits.MaxDepth, limitsSet = s.MaxDepth.V, true
	}
	if s.MaxPages.Set {
		limits.MaxPages, limitsSet = s.MaxPages.V, true
	}
	if s.MaxPagesPerHost.Set {
		limits.MaxPagesPerHost, limitsSet = s.MaxPagesPerHost.V, true
	}
	if s.MaxDuration.Set {
		limits.MaxDuration, limitsSet = s.MaxDuration.V, true
	}
	if limitsSet {
		req.Limits = &limits
	}

	var id crawlspec.Identity
	if req.Identity != nil {
		id = *req.Identity
	}
	if s.UserAgent.Set {
		id.UserAgent = s.UserAgent.V
	}
	if s.Headers.Set {
		id.Headers = append([]string(nil), s.Headers.V...)
	}
	if s.UserAgent.Set || s.Headers.Set {
		req.Identity = &id
	}

	if s.Documents.Set {
		req.Documents = &crawlspec.Documents{ContentTypes: append([]string{}, s.Documents.V...)}
	}

	if s.Priority.Set || s.BreadthFirst.Set {
		var p crawlspec.Priority
		if req.Priority != nil {
			p = *req.Priority
		}
		if s.Priority.Set {
			p.Rules = append([]crawlspec.PriorityRule(nil), s.Priority.V...)
		}
		if s.BreadthFirst.Set {
			p.BreadthFirst = s.BreadthFirst.V
		}
		req.Priority = &p
	}
}

// given returns, per request field, the flag that set it.
func (s ScopeFlags) given() map[string]string {
	out := map[string]string{}
	for _, f := range []struct {
		set         bool
		flag, field string
	}{
		{s.Mode.Set, "scope", "scope.mode"},
		{s.AllowHosts.Set, "allow-host", "scope.allow_hosts"},
		{s.DenyHosts.Set, "deny-host", "scope.deny_hosts"},
		{s.AllowDomains.Set, "allow-domain", "scope.allow_domains"},
		{s.DenyDomains.Set, "deny-domain", "scope.deny_domains"},
		{s.AllowPatterns.Set, "allow-pattern", "scope.allow_patterns"},
		{s.DenyPatterns.Set, "deny-pattern", "scope.deny_patterns"},
		{s.MaxDepth.Set, "max-depth", "limits.max_depth"},
		{s.MaxPages.Set, "max-pages", "limits.max_pages"},
		{s.MaxPagesPerHost.Set, "max-pages-per-host", "limits.max_pages_per_host"},
		{s.MaxDuration.Set, "max-duration", "limits.max_duration"},
		{s.UserAgent.Set, "user-agent", "identity.user_agent"},
		{s.Headers.Set, "header", "identity.headers"},
		{s.Priority.Set, "priority", "priority.rules"},
		{s.Extract.Set, "extract " + s.Extract.V, "extract"},
		{s.Documents.Set, "documents", "documents.content_types"},
	} {
		if f.set {
			out[f.field] = f.flag
		}
	}
	return out
}

// CrawlRequest returns the crawl's request: the --spec file's (decoded and
// validated exactly as POST /v1/crawls does, without needing seeds since
// the launcher brings its own) with the scope flags applied, the crawl id
// (--crawl-id, else the file's crawl_id, else crawl-<UTC time of now>) and
// the default max depth filled in. A problem is returned before anything
// is built or started: crawlspec.FieldErrors as the API would answer,
// fields set by a flag naming the flag too.
func (c Config) CrawlRequest(now time.Time) (crawlspec.Request, error) {
	req, _, err := c.crawlRequest(now)
	return req, err
}

// crawlRequest is CrawlRequest, also reporting whether the crawl id was
// chosen (--crawl-id, the file's crawl_id) rather than generated.
func (c Config) crawlRequest(now time.Time) (req crawlspec.Request, chosen bool, err error) {
	req, err = c.readRequest(now)
	return req, c.CrawlID != "" || req.CrawlID != generatedID(now), err
}

// generatedID is the crawl id generated at now.
func generatedID(now time.Time) string { return "crawl-" + now.UTC().Format("20060102-150405") }

func (c Config) readRequest(now time.Time) (crawlspec.Request, error) {
	var req crawlspec.Request
	if c.SpecFile != "" {
		f, err := os.Open(c.SpecFile)
		if err != nil {
			return req, fmt.Errorf("open spec: %w", err)
		}
		req, err = crawlspec.Decode(f)
		_ = f.Close() // read only
		if err != nil {
			return req, fmt.Errorf("read spec %s: %w", c.SpecFile, listed(err))
		}
	}
	if c.Scope.Extract.Set {
		x, err := readExtract(c.Scope.Extract.V)
		if err != nil {
			return req, err
		}
		req.Extract = x
	}
	c.Scope.Apply(&req)
	switch {
	case c.CrawlID != "":
		req.CrawlID = c.CrawlID
	case req.CrawlID == "":
		req.CrawlID = generatedID(now)
	}
	if req.Limits == nil {
		req.Limits = &crawlspec.Limits{}
	}
	if req.Limits.MaxDepth == 0 {
		req.Limits.MaxDepth = DefaultMaxDepth
	}
	if err := crawlspec.Validate(req); err != nil {
		var fe crawlspec.FieldErrors
		if errors.As(err, &fe) {
			given := c.Scope.given()
			if c.CrawlID != "" {
				given["crawl_id"] = "crawl-id"
			}
			err = listed(nameFlags(fe, given))
		}
		what := "flags"
		if c.SpecFile != "" {
			what = "spec " + c.SpecFile + " with the flags"
		}
		return req, fmt.Errorf("check %s: %w", what, err)
	}
	if !c.Demo && !c.Web && len(c.Seeds) == 0 && c.SeedsFile == "" &&
		len(req.Seeds) == 0 && req.SeedsText == "" && req.Keywords == nil && len(req.SitemapURLs) == 0 {
		return req, errors.New("nothing to crawl: give -seed, -seeds-file, -demo, -web or seeds in -spec")
	}
	return req, nil
}

// readExtract reads a file of extraction rules, the request's extract
// object, strictly: an unknown field or a wrong type is an error naming
// the file and the rule. The rules' values (selectors, patterns, types)
// are checked with the rest of the request.
func readExtract(path string) (*crawlspec.Extraction, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read extract rules: %w", err)
	}
	var top struct {
		Rules []json.RawMessage `json:"rules"`
	}
	if err := strictJSON(b, &top); err != nil {
		return nil, fmt.Errorf("extract rules %s: %w (want {\"rules\": [...]})", path, err)
	}
	if len(top.Rules) == 0 {
		return nil, fmt.Errorf("extract rules %s: no rules", path)
	}
	x := &crawlspec.Extraction{}
	for i, raw := range top.Rules {
		var r crawlspec.ExtractRule
		if err := strictJSON(raw, &r); err != nil {
			var named struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(raw, &named) // the name is for the message only
			return nil, fmt.Errorf("extract rules %s: rule %d (%q): %w", path, i+1, named.Name, err)
		}
		x.Rules = append(x.Rules, r)
	}
	return x, nil
}

// strictJSON decodes exactly one JSON value into v, no unknown field.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// fieldErrors shows a request's problems one per line, for a terminal;
// errors.As still finds the crawlspec.FieldErrors.
type fieldErrors struct{ crawlspec.FieldErrors }

func (e fieldErrors) Error() string {
	var b strings.Builder
	b.WriteString("invalid request:")
	for _, f := range e.FieldErrors {
		b.WriteString("\n  " + f.Field + ": " + f.Message)
	}
	return b.String()
}

func (e fieldErrors) Unwrap() error { return e.FieldErrors }

// listed returns err with its field errors, if any, one per line.
func listed(err error) error {
	var fe crawlspec.FieldErrors
	if errors.As(err, &fe) {
		return fieldErrors{fe}
	}
	return err
}

// nameFlags adds the flag to the field of every problem a flag caused:
// "scope.deny_patterns[0] (--deny-pattern)".
func nameFlags(fe crawlspec.FieldErrors, given map[string]string) crawlspec.FieldErrors {
	out := make(crawlspec.FieldErrors, len(fe))
	for i, f := range fe {
		field := f.Field
		if j := strings.IndexByte(field, '['); j >= 0 {
			field = field[:j]
		}
		if fl, ok := given[field]; ok {
			f.Field += " (--" + fl + ")"
		}
		out[i] = f
	}
	return out
}

// writeSpec writes req as JSON into dir for the seeder's --spec and
// returns the file's path.
func writeSpec(dir string, req crawlspec.Request) (string, error) {
	b, err := json.MarshalIndent(req, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode crawl spec: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create spec dir: %w", err)
	}
	path := filepath.Join(dir, req.CrawlID+".json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write crawl spec: %w", err)
	}
	return path, nil
}

// specLine is the spec's scope and limits in one line of JSON, for the
// start of a crawl; a list of more than 5 hosts or patterns shows its
// first 3 and its length.
func specLine(req crawlspec.Request) string {
	if req.Scope != nil {
		sc := *req.Scope
		for _, l := range []*[]string{&sc.AllowHosts, &sc.DenyHosts, &sc.AllowDomains, &sc.DenyDomains, &sc.AllowPatterns, &sc.DenyPatterns} {
			if n := len(*l); n > 5 {
				*l = append((*l)[:3:3], fmt.Sprintf("… (%d in all)", n))
			}
		}
		req.Scope = &sc
	}
	b, err := json.Marshal(struct {
		Scope      *crawlspec.Scope      `json:"scope,omitempty"`
		Limits     *crawlspec.Limits     `json:"limits,omitempty"`
		Politeness *crawlspec.Politeness `json:"politeness,omitempty"`
		Revisit    *crawlspec.Revisit    `json:"revisit,omitempty"`
		Identity   *crawlspec.Identity   `json:"identity,omitempty"`
		Render     *crawlspec.Render     `json:"render,omitempty"`
	}{req.Scope, req.Limits, req.Politeness, req.Revisit, req.Identity, req.Render})
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// describeScope says in a line or two which sites the crawl of req stays
// on, from the seeds the launcher knows of (the seeder derives the sites
// from every seed, a sitemap's too: scope.SeedSites), and warns about a
// crawl of the web without a page budget.
func describeScope(req crawlspec.Request, seeds []string) string {
	mode := crawlspec.ModeOf(req)
	switch mode {
	case crawlspec.ScopeDomain, crawlspec.ScopeHost:
		m := crawlv1.ScopeMode_SCOPE_MODE_DOMAIN
		what := "the seeds' registrable domains and their subdomains"
		if mode == crawlspec.ScopeHost {
			m, what = crawlv1.ScopeMode_SCOPE_MODE_HOST, "the seeds' hosts"
		}
		hosts, domains := scope.SeedSites(m, seeds)
		sites := append(domains, hosts...)
		list := strings.Join(sites, ", ")
		if len(sites) > 5 {
			list = strings.Join(sites[:3], ", ") + fmt.Sprintf(", … (%d in all)", len(sites))
		}
		if len(sites) == 0 {
			list = "those of the spec's seeds and sitemaps"
		}
		return fmt.Sprintf("scope: %s — the crawl stays on %s: %s (--scope web to follow links anywhere)", mode, what, list)
	default:
		line := "scope: web — links are followed to any site the rules allow"
		if req.Limits == nil || req.Limits.MaxPages == 0 {
			line += "\nwarning: a crawl of the web without a page budget (--max-pages) may never end: give --max-pages, or --scope domain to stay on the seeds' sites"
		}
		return line
	}
}

// describeContent says what the crawl takes beyond links and text: its
// extraction rules (from file, when --extract gave them) and the
// documents it keeps; "" when neither.
func describeContent(req crawlspec.Request, file string) string {
	var parts []string
	if x := req.Extract; x != nil && len(x.Rules) > 0 {
		var names []string
		for _, r := range x.Rules {
			plural := "s"
			if len(r.Fields) == 1 {
				plural = ""
			}
			names = append(names, fmt.Sprintf("%s (%d field%s)", r.Name, len(r.Fields), plural))
		}
		line := "extraction rules: " + strings.Join(names, ", ")
		if file != "" {
			line += " from " + file
		}
		parts = append(parts, line+"; documents.fields holds what they take")
	}
	if d := req.Documents; d != nil && len(d.ContentTypes) > 0 {
		short := make([]string, len(d.ContentTypes))
		for i, t := range d.ContentTypes {
			short[i] = doctypes.Short(t)
		}
		parts = append(parts, "documents kept beyond HTML: "+strings.Join(short, ", "))
	}
	return strings.Join(parts, "\n")
}

// knownSeeds returns the seeds the launcher knows of: the flags', the
// seeds file's (one URL a line; blank lines and # comments skipped), the
// spec's; each canonicalized, those that do not parse left out (the seeder
// reports them).
func knownSeeds(seeds []string, seedsFile string, req crawlspec.Request) []string {
	raw := append(append([]string(nil), seeds...), req.Seeds...)
	raw = append(raw, strings.Split(req.SeedsText, "\n")...)
	if seedsFile != "" {
		if b, err := os.ReadFile(seedsFile); err == nil {
			raw = append(raw, strings.Split(string(b), "\n")...)
		}
	}
	var out []string
	for _, r := range raw {
		r = strings.TrimSpace(r)
		if r == "" || strings.HasPrefix(r, "#") {
			continue
		}
		if u, err := urlcanon.Canonicalize(r); err == nil {
			out = append(out, u)
		}
	}
	return out
}
