// Package scope decides, per crawl, which extracted links the crawl keeps
// and which pages are documents. It is pure: rules are compiled once per
// crawl specification revision (crawlv1.CrawlSpec.scope) and then consulted
// per link without I/O or shared mutable state.
//
// Max depth is the scheduler's rule and is not checked here.
package scope

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"golang.org/x/net/publicsuffix"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Reasons a link is dropped by the rules, label values of the parser's
// links_dropped_total metric.
const (
	DropOutOfScope = "out_of_scope" // host or domain not allowed, or other host under same_host_only
	DropFiltered   = "filtered"     // no allow pattern matched, or a deny pattern matched
	DropTrapGuard  = "trap_guard"   // a path segment repeats more than the limit
	DropTooLong    = "too_long"     // longer than the URL length cap
	DropOverCap    = "over_cap"     // beyond the crawl's max outlinks per page
)

// Defaults are the service's rules for what a spec leaves unset (and for
// crawls without a spec).
type Defaults struct {
	MaxOutlinks         int  // outlinks kept per page
	MaxURLLength        int  // bytes of a canonical URL; 0 = urlcanon.MaxLength
	MaxRepeatedSegments int  // occurrences of one path segment; 0 = no trap guard
	FollowDuplicates    bool // for crawls without a spec
	FollowTraps         bool // follow suspected traps in every crawl (a spec can only ask for it)
	NearDistance        int  // near-duplicate detection's simhash bits; 0 = off
}

// Rules are the compiled scope of one crawl. The zero value is not usable;
// build with Compile. Safe for concurrent use.
type Rules struct {
	allowHosts, denyHosts     map[string]bool
	allowDomains, denyDomains domainSet
	// seedScoped: a link must be on the seeds' sites (Scope.mode DOMAIN or
	// HOST): seedHosts or seedDomains.
	seedScoped       bool
	mode             crawlv1.ScopeMode
	seedHosts        map[string]bool
	seedDomains      domainSet
	sameHostOnly     bool
	allow, deny      []*regexp.Regexp
	maxOutlinks      int
	maxURLLength     int
	maxRepeated      int
	detail           []*regexp.Regexp
	detailSelector   goquery.Matcher
	followDuplicates bool
	followTraps      bool
	nearDistance     int
	sites            []site
}

// site is one compiled SiteRules.
type site struct {
	hosts       map[string]bool
	domains     domainSet
	allow, deny []*regexp.Regexp
}

// matches reports whether the rule names host (a politeness key) or its
// name without the port.
func (s *site) matches(host, name string) bool {
	return s.hosts[host] || s.hosts[name] || s.domains.match(name)
}

// domainSet is a set of domains, each standing for itself and its
// subdomains. A lookup walks the name's suffixes at its dots, so it costs
// the name's labels whatever the set's size (a crawl kept on the sites of
// 20 000 seeds checks every link against all of them).
type domainSet map[string]bool

// match reports whether name is one of the domains or a subdomain of one.
func (d domainSet) match(name string) bool {
	if len(d) == 0 {
		return false
	}
	for {
		if d[name] {
			return true
		}
		i := strings.IndexByte(name, '.')
		if i < 0 {
			return false
		}
		name = name[i+1:]
	}
}

// Compile builds the rules of a scope (nil: the defaults only). Invalid
// patterns or an invalid selector are reported in the error and left out;
// the returned rules are always usable.
func Compile(s *crawlv1.Scope, d Defaults, hasSpec bool) (*Rules, error) {
	r := &Rules{
		allowHosts:       set(s.GetAllowHosts()),
		denyHosts:        set(s.GetDenyHosts()),
		allowDomains:     domains(s.GetAllowDomains()),
		denyDomains:      domains(s.GetDenyDomains()),
		sameHostOnly:     s.GetSameHostOnly(),
		seedHosts:        set(s.GetSeedHosts()),
		seedDomains:      domains(s.GetSeedDomains()),
		maxOutlinks:      d.MaxOutlinks,
		maxURLLength:     d.MaxURLLength,
		maxRepeated:      d.MaxRepeatedSegments,
		followDuplicates: d.FollowDuplicates,
		followTraps:      d.FollowTraps || s.GetFollowTraps(),
		nearDistance:     d.NearDistance,
	}
	switch s.GetMode() {
	case crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, crawlv1.ScopeMode_SCOPE_MODE_HOST:
		r.seedScoped = true
		r.mode = s.GetMode()
	}
	if v := int(s.GetNearDuplicateDistance()); v > 0 {
		r.nearDistance = v
	}
	if hasSpec {
		r.followDuplicates = s.GetFollowDuplicates()
	}
	if v := int(s.GetMaxOutlinksPerPage()); v > 0 {
		r.maxOutlinks = v
	}
	if v := int(s.GetMaxUrlLength()); v > 0 {
		r.maxURLLength = v
	}
	if r.maxURLLength <= 0 || r.maxURLLength > urlcanon.MaxLength {
		r.maxURLLength = urlcanon.MaxLength
	}
	if v := int(s.GetMaxRepeatedSegments()); v > 0 {
		r.maxRepeated = v
	}
	var errs []error
	r.allow, errs = compileAll(s.GetAllowPatterns(), errs)
	r.deny, errs = compileAll(s.GetDenyPatterns(), errs)
	r.detail, errs = compileAll(s.GetDetailPatterns(), errs)
	for _, sr := range s.GetSites() {
		st := site{hosts: set(sr.GetHosts()), domains: domains(sr.GetDomains())}
		st.allow, errs = compileAll(sr.GetAllowPatterns(), errs)
		st.deny, errs = compileAll(sr.GetDenyPatterns(), errs)
		if st.hosts != nil || st.domains != nil {
			r.sites = append(r.sites, st)
		}
	}
	if sel := strings.TrimSpace(s.GetDetailSelector()); sel != "" {
		m, err := cascadia.Compile(sel)
		if err != nil {
			errs = append(errs, fmt.Errorf("compile detail selector %q: %w", sel, err))
		} else {
			r.detailSelector = m
		}
	}
	return r, errors.Join(errs...)
}

func compileAll(patterns []string, errs []error) ([]*regexp.Regexp, []error) {
	var out []*regexp.Regexp
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("compile pattern %q: %w", p, err))
			continue
		}
		out = append(out, re)
	}
	return out, errs
}

func set(hosts []string) map[string]bool {
	if len(hosts) == 0 {
		return nil
	}
	m := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		m[strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")] = true
	}
	return m
}

func domains(ds []string) domainSet {
	var out domainSet
	for _, d := range ds {
		d = strings.Trim(strings.ToLower(strings.TrimSpace(d)), ".")
		if d == "" {
			continue
		}
		if out == nil {
			out = make(domainSet, len(ds))
		}
		out[d] = true
	}
	return out
}

// MaxOutlinks is the number of outlinks a page keeps.
func (r *Rules) MaxOutlinks() int { return r.maxOutlinks }

// FollowDuplicates reports whether the links of a page whose content
// duplicates an earlier page are followed.
func (r *Rules) FollowDuplicates() bool { return r.followDuplicates }

// FollowTraps reports whether the links of pages suspected as a crawler
// trap are followed (Scope.follow_traps, or the service's default).
func (r *Rules) FollowTraps() bool { return r.followTraps }

// NearDistance is the simhash distance within which a document nearly
// duplicates an earlier one (0: no near-duplicate detection).
func (r *Rules) NearDistance() int { return r.nearDistance }

// DetailSelector is the compiled detail selector, or nil.
func (r *Rules) DetailSelector() goquery.Matcher { return r.detailSelector }

// HasDetailRules reports whether the crawl distinguishes detail pages from
// list pages; without rules every page is a document.
func (r *Rules) HasDetailRules() bool { return len(r.detail) > 0 || r.detailSelector != nil }

// DetailURL reports whether a URL matches a detail pattern.
func (r *Rules) DetailURL(u string) bool {
	for _, re := range r.detail {
		if re.MatchString(u) {
			return true
		}
	}
	return false
}

// Check returns the reason a link (canonical, with politeness key host)
// found on a page of pageHost is dropped, or "" when it is kept.
// sameHost applies same_host_only (false on search result pages).
func (r *Rules) Check(pageHost, link, host string, sameHost bool) string {
	return r.check(pageHost, link, host, sameHost, Site{})
}

// CheckJoining judges a URL (canonical, with politeness key host) that a
// seed's redirect chain led to, for a crawl kept on its seeds' sites: the
// reason it is dropped ("" when kept), and the site that joins the scope
// for it (ok false when none: the crawl is not kept on its seeds' sites,
// the host is on them already, or the URL is dropped). Every other rule
// (deny and allow hosts and domains, patterns, sites' filters, trap guard,
// length) still applies: only the seed-site rule gives way.
func (r *Rules) CheckJoining(link, host string) (reason string, joined Site, ok bool) {
	if !r.seedScoped || r.OnSeedSites(host) {
		return r.Check("", link, host, false), Site{}, false
	}
	site, ok := SiteOf(r.mode, host)
	if !ok {
		return r.Check("", link, host, false), Site{}, false
	}
	if reason := r.check("", link, host, false, site); reason != "" {
		return reason, Site{}, false
	}
	return "", site, true
}

// OnSeedSites reports whether host (a politeness key) is on the sites the
// crawl stays on: always for a crawl not kept on its seeds' sites.
func (r *Rules) OnSeedSites(host string) bool {
	if !r.seedScoped {
		return true
	}
	name := urlcanon.Hostname(host)
	return r.seedHosts[host] || r.seedHosts[name] || r.seedDomains.match(name)
}

// check is Check with joined counted among the seed sites.
func (r *Rules) check(pageHost, link, host string, sameHost bool, joined Site) string {
	if len(link) > r.maxURLLength {
		return DropTooLong
	}
	name := urlcanon.Hostname(host)
	switch {
	case r.denyHosts[host] || r.denyHosts[name] || r.denyDomains.match(name):
		return DropOutOfScope
	case (r.allowHosts != nil || r.allowDomains != nil) &&
		!(r.allowHosts[host] || r.allowHosts[name] || r.allowDomains.match(name)):
		return DropOutOfScope
	case r.seedScoped && !(r.seedHosts[host] || r.seedHosts[name] || r.seedDomains.match(name)) && !joined.has(host, name):
		return DropOutOfScope
	case sameHost && r.sameHostOnly && host != pageHost:
		return DropOutOfScope
	}
	if !patternsKeep(link, r.allow, r.deny) {
		return DropFiltered
	}
	for i := range r.sites {
		if st := &r.sites[i]; st.matches(host, name) {
			if !patternsKeep(link, st.allow, st.deny) {
				return DropFiltered
			}
			break
		}
	}
	if r.maxRepeated > 0 && RepeatedSegments(link) > r.maxRepeated {
		return DropTrapGuard
	}
	return ""
}

// patternsKeep reports whether link matches no deny pattern and, when
// there are allow patterns, one of them.
func patternsKeep(link string, allow, deny []*regexp.Regexp) bool {
	for _, re := range deny {
		if re.MatchString(link) {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, re := range allow {
		if re.MatchString(link) {
			return true
		}
	}
	return false
}

// Site is one site a crawl of mode DOMAIN or HOST stays on: a host (a
// politeness key) or a registrable domain (with its subdomains). Exactly
// one is set; the zero Site is none.
type Site struct {
	Host, Domain string
}

// has reports whether the site holds the host key (or its name).
func (s Site) has(key, name string) bool {
	switch {
	case s.Host != "":
		return s.Host == key || s.Host == name
	case s.Domain != "":
		return domainSet{s.Domain: true}.match(name)
	default:
		return false
	}
}

// String is the host or the domain.
func (s Site) String() string { return s.Host + s.Domain }

// SiteOf returns the site of a politeness key under mode: with HOST the
// key itself; with DOMAIN its registrable domain by the public suffix list
// (example.co.uk for www.example.co.uk), or the key when its host has none
// (an IP address, a single label such as localhost, a public suffix
// itself). ok is false for WEB and UNSPECIFIED, and for an empty key.
func SiteOf(mode crawlv1.ScopeMode, key string) (Site, bool) {
	if key == "" {
		return Site{}, false
	}
	switch mode {
	case crawlv1.ScopeMode_SCOPE_MODE_HOST:
		return Site{Host: key}, true
	case crawlv1.ScopeMode_SCOPE_MODE_DOMAIN:
		if d, ok := registrable(urlcanon.Hostname(key)); ok {
			return Site{Domain: d}, true
		}
		return Site{Host: key}, true
	default:
		return Site{}, false
	}
}

// SeedSites returns the sites a crawl of mode stays on, from its seeds
// (canonical URLs; search-engine result pages are not seeds of a site),
// each seed's SiteOf: with HOST the seeds' politeness keys; with DOMAIN
// the seeds' registrable domains, and the politeness key of a seed whose
// host has none. WEB and UNSPECIFIED return nothing. The lists are sorted
// and free of repeats; a seed that does not parse is left out.
func SeedSites(mode crawlv1.ScopeMode, seeds []string) (hosts, domains []string) {
	if mode != crawlv1.ScopeMode_SCOPE_MODE_HOST && mode != crawlv1.ScopeMode_SCOPE_MODE_DOMAIN {
		return nil, nil
	}
	hs, ds := map[string]bool{}, map[string]bool{}
	for _, u := range seeds {
		key, err := urlcanon.PolitenessKey(u)
		if err != nil {
			continue
		}
		site, ok := SiteOf(mode, key)
		if !ok {
			continue
		}
		if site.Host != "" {
			hs[site.Host] = true
		} else {
			ds[site.Domain] = true
		}
	}
	return sortedKeys(hs), sortedKeys(ds)
}

// registrable returns the registrable domain (eTLD+1) of a host name, or
// false for an IP address, a single label or a public suffix.
func registrable(name string) (string, bool) {
	name = strings.Trim(name, "[]")
	if net.ParseIP(name) != nil || !strings.Contains(name, ".") {
		return "", false
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil {
		return "", false
	}
	return d, true
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// RepeatedSegments is the highest number of times one non-empty path
// segment occurs in a URL's path ("/a/b/a/b/a" → 3).
func RepeatedSegments(u string) int {
	p := u
	if i := strings.Index(p, "://"); i >= 0 {
		p = p[i+3:]
		if j := strings.IndexByte(p, '/'); j >= 0 {
			p = p[j:]
		} else {
			return 0
		}
	}
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	var buf [32]string // most paths: no allocation
	segs := buf[:0]
	for seg := range strings.SplitSeq(p, "/") {
		segs = append(segs, seg)
	}
	maxN := 0
	for i, s := range segs {
		if s == "" {
			continue
		}
		n := 0
		for _, t := range segs[i:] {
			if t == s {
				n++
			}
		}
		maxN = max(maxN, n)
	}
	return maxN
}

// Cache holds the compiled rules of each crawl, recompiled when the spec's
// revision changes (crawlsettings.Compiled). Safe for concurrent use.
type Cache struct {
	compiled *crawlsettings.Compiled[*Rules]
	none     *Rules
}

// NewCache returns a cache compiling with d; onError (may be nil) is called
// once per revision whose patterns do not all compile.
func NewCache(d Defaults, onError func(crawlID string, err error)) *Cache {
	none, _ := Compile(nil, d, false)
	compile := func(spec *crawlv1.CrawlSpec) (*Rules, error) { return Compile(spec.GetScope(), d, true) }
	return &Cache{compiled: crawlsettings.NewCompiled(compile, onError), none: none}
}

// Rules returns the rules of a crawl whose current spec is spec (nil: the
// defaults).
func (c *Cache) Rules(crawlID string, spec *crawlv1.CrawlSpec) *Rules {
	if spec == nil {
		return c.none
	}
	return c.compiled.Get(crawlID, spec)
}
