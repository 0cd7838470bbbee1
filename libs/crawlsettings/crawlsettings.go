// Package crawlsettings is the one place a crawl's effective settings are
// resolved: what its specification sets, else the fleet's flags. The
// fetchers (page budget, politeness, identity, kept document types, render
// mode, the result pages' robots.txt exemption), the schedulers (page
// budget, depth, per-host pages) and the seeder's console (what it says
// applies) all call Resolve, or read it through a Cache once per
// specification revision, so that what a console page shows is what the
// services do and a new setting is defaulted in one place.
//
// It is pure: no I/O; its inputs are a specification and the fleet's
// flags, its output a value.
package crawlsettings

import (
	"math"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// DefaultMaxDepth is the default of the fleet's --max-depth (the
// schedulers' and the seeder's flags).
const DefaultMaxDepth = 16

// Fleet is the services' own flags that a crawl's specification may
// override. The same environment variables set them on every service
// (CRAWLER_MAX_PAGES, CRAWLER_MAX_DEPTH, CRAWLER_DELAY,
// CRAWLER_MAX_CRAWL_DELAY), so a deployment that sets them once sets them
// alike everywhere.
type Fleet struct {
	MaxPages   int64           // --max-pages: 0 = unlimited
	MaxDepth   uint32          // --max-depth: 0 admits the seeds only
	Politeness hostdelay.Fleet // --delay, --max-crawl-delay
	// Render is the fetchers' --render (CRAWLER_RENDER): which pages of a
	// crawl whose specification says nothing are rendered; UNSPECIFIED is
	// NEVER.
	Render crawlv1.RenderMode
}

// WithDefaults returns f with its politeness defaulted and a negative
// MaxPages made 0 (unlimited).
func (f Fleet) WithDefaults() Fleet {
	f.MaxPages = max(f.MaxPages, 0)
	f.Politeness = f.Politeness.WithDefaults()
	if f.Render == crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED {
		f.Render = crawlv1.RenderMode_RENDER_MODE_NEVER
	}
	return f
}

// Source says where an effective setting comes from.
type Source uint8

const (
	// Unset means neither the specification nor the fleet sets it (an
	// unlimited budget).
	Unset Source = iota
	// FromSpec means the crawl's specification sets it.
	FromSpec
	// FromFleet means the fleet's flag applies, the specification
	// setting none.
	FromFleet
)

// String names the source as the console and the logs say it.
func (s Source) String() string {
	switch s {
	case FromSpec:
		return "spec"
	case FromFleet:
		return "fleet"
	default:
		return "unset"
	}
}

// Settings is a crawl's effective settings.
type Settings struct {
	// Pages is the page budget (0: unlimited), from limits.max_pages,
	// else the fleet's --max-pages.
	Pages     int64
	PagesFrom Source
	// PagesPerHost is the per-host page budget (0: unlimited), from
	// limits.max_pages_per_host; the fleet has no flag for it.
	PagesPerHost int64
	// Depth is the deepest link depth admitted (seeds are 0), from
	// limits.max_depth, else the fleet's --max-depth.
	Depth     uint32
	DepthFrom Source
	// Politeness is the crawl's own politeness (zero fields where its
	// specification sets none); Fleet the fleet's, defaulted. Delay
	// combines them with a host's robots.txt.
	Politeness hostdelay.Crawl
	Fleet      hostdelay.Fleet
	// Render is which of the crawl's pages are rendered in a browser
	// (never, auto or always; never UNSPECIFIED), from render.mode, else
	// the fleet's --render; render.sites may say otherwise for some hosts
	// (RenderOf). RenderOtherHosts lets a rendered page's requests to other
	// hosts through (render.other_hosts).
	Render           crawlv1.RenderMode
	RenderFrom       Source
	RenderOtherHosts bool
	render           *crawlv1.Render // the specification's, for RenderOf's sites
	// Identity is how the crawl's requests present it (identity), as far
	// as libs/identity's rules let it; IdentityRefused says what of it
	// may not be sent, and why (a specification published by something
	// other than the seeder, which refuses it).
	Identity        Identity
	IdentityRefused []string
	// Documents are the media types beyond text whose bodies the crawl
	// keeps for the parsers (documents.content_types): PDFs, office files.
	Documents []string
	// SERPIgnoreRobots fetches the result pages the seeder generated from
	// the crawl's keywords although robots.txt disallows them
	// (politeness.serp_ignore_robots; decide.SERPExempt says which).
	SERPIgnoreRobots bool
}

// Identity is how a crawl's requests present it, robots.txt's included.
// The zero value is the fleet's own: its --user-agent, no extra header.
type Identity struct {
	UserAgent string            // "": the fleet's --user-agent
	Agent     string            // UserAgent's robots.txt product token; "": the fleet's
	Headers   []identity.Header // extra headers, checked
}

// identityOf returns what of p may be sent (libs/identity's rules) and
// why the rest may not.
func identityOf(p *crawlv1.Identity) (id Identity, refused []string) {
	if ua := strings.TrimSpace(p.GetUserAgent()); ua != "" {
		if err := identity.CheckUserAgent(ua); err != nil {
			refused = append(refused, "user agent: "+err.Error())
		} else {
			id.UserAgent, id.Agent = ua, identity.ProductToken(ua)
		}
	}
	for _, h := range p.GetHeaders() {
		checked, err := identity.CheckHeader(h.GetName(), h.GetValue())
		if err != nil {
			refused = append(refused, err.Error())
			continue
		}
		id.Headers = append(id.Headers, checked)
	}
	return id, refused
}

// Resolve returns the effective settings of a crawl with specification
// spec (nil: a crawl without one, every setting the fleet's) on fleet f.
func Resolve(spec *crawlv1.CrawlSpec, f Fleet) Settings {
	f = f.WithDefaults()
	lim := spec.GetLimits()
	s := Settings{
		Pages: f.MaxPages, Depth: f.MaxDepth, DepthFrom: FromFleet,
		PagesPerHost: clampInt64(lim.GetMaxPagesPerHost()),
		Politeness:   PolitenessOf(spec),
		Fleet:        f.Politeness,
	}
	if s.Pages > 0 {
		s.PagesFrom = FromFleet
	}
	if n := lim.GetMaxPages(); n > 0 {
		s.Pages, s.PagesFrom = clampInt64(n), FromSpec
	}
	if d := lim.GetMaxDepth(); d > 0 {
		s.Depth, s.DepthFrom = d, FromSpec
	}
	r := spec.GetRender()
	s.Render, s.RenderFrom = f.Render, FromFleet
	if m := r.GetMode(); knownRender(m) {
		s.Render, s.RenderFrom = m, FromSpec
	}
	s.RenderOtherHosts = r.GetOtherHosts()
	if len(r.GetSites()) > 0 {
		s.render = r
	}
	s.Identity, s.IdentityRefused = identityOf(spec.GetIdentity())
	s.Documents = spec.GetDocuments().GetContentTypes()
	s.SERPIgnoreRobots = spec.GetPoliteness().GetSerpIgnoreRobots()
	return s
}

// RenderOf returns the render mode of a page of host (a politeness key,
// "name:port" or a name): that of the first of render.sites naming host
// or its name without the port, else the crawl's (Render).
func (s Settings) RenderOf(host string) crawlv1.RenderMode {
	if s.render == nil {
		return s.Render
	}
	host = strings.ToLower(host)
	name := urlcanon.Hostname(host)
	for _, site := range s.render.GetSites() {
		for _, h := range site.GetHosts() {
			if h = strings.ToLower(h); h == host || h == name {
				if m := site.GetMode(); knownRender(m) {
					return m
				}
				return s.Render
			}
		}
	}
	return s.Render
}

// knownRender reports whether m is a mode (not UNSPECIFIED, nor a value
// from a newer specification this build does not know).
func knownRender(m crawlv1.RenderMode) bool {
	return m >= crawlv1.RenderMode_RENDER_MODE_NEVER && m <= crawlv1.RenderMode_RENDER_MODE_ALWAYS
}

// PolitenessOf returns what a specification sets of its crawl's
// politeness (zero fields: nothing set).
func PolitenessOf(spec *crawlv1.CrawlSpec) hostdelay.Crawl {
	p := spec.GetPoliteness()
	return hostdelay.Crawl{Delay: p.GetDelay().AsDuration(), MaxCrawlDelay: p.GetMaxCrawlDelay().AsDuration()}
}

// Delay returns the delay between two requests to a host whose robots.txt
// asks for crawlDelay (0: none), and whether the crawl's cap cut that
// Crawl-delay (libs/hostdelay's rule).
func (s Settings) Delay(crawlDelay time.Duration) (d time.Duration, capped bool) {
	return hostdelay.Effective(s.Fleet, s.Politeness, crawlDelay)
}

// MaxCrawlDelay returns the cap of a robots.txt Crawl-delay in the crawl.
func (s Settings) MaxCrawlDelay() time.Duration { return hostdelay.Cap(s.Fleet, s.Politeness) }

func clampInt64(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
