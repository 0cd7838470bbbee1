package admit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/dedup"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// hostPartitions assigns partitions by host for the test: "other.example"
// lives on partition 1, every other host on partition 0.
func hostPartitions(canonical string) ([]byte, int, error) {
	host := strings.SplitN(strings.TrimPrefix(strings.TrimPrefix(canonical, "https://"), "http://"), "/", 2)[0]
	if host == "other.example" {
		return []byte(host), 1, nil
	}
	return []byte(host), 0, nil
}

// specDepths is the depth limit of the crawls "deep" (8) and "shallow"
// (1), which have a specification; other crawls take the fleet's 5.
func specDepths(crawlID string) uint32 {
	switch crawlID {
	case "deep":
		return 8
	case "shallow":
		return 1
	}
	return 5
}

// specStates is the state of the crawls "paused" and "cancelled"; other
// crawls run.
func specStates(crawlID string) crawlv1.CrawlState {
	switch crawlID {
	case "paused":
		return crawlv1.CrawlState_CRAWL_STATE_PAUSED
	case "cancelled":
		return crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	}
	return crawlv1.CrawlState_CRAWL_STATE_RUNNING
}

// budget is a page budget of left pages for every crawl.
type budget struct{ left int }

func (b *budget) Reserve(int, string) bool {
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

func (b *budget) Unreserve(_ int, _ string, n int64) { b.left += int(n) }

// decide is Decide without per-host budgets, which never fails.
func decide(t *testing.T, p Policy, u *crawlv1.DiscoveredURL, partition int, seen Seen, b Budget) Decision {
	t.Helper()
	d, err := p.Decide(t.Context(), u, partition, seen, b, nil)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	discovered := timestamppb.New(now.Add(-time.Minute))
	seen := dedup.New(0)
	seen.Add(fingerprint.URL("c1", "http://seen.example/"))

	tests := []struct {
		name          string
		in            *crawlv1.DiscoveredURL
		partition     int
		budget        int
		wantReason    Reason // "" = admitted
		wantCanonical string
		wantHold      bool
	}{
		{
			name:          "admitted and canonicalized",
			in:            &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "HTTP://Example.COM:80/a/../b#frag", Depth: 3, ParentUrl: "http://example.com/", AnchorText: "b", DiscoveredAt: discovered},
			budget:        1,
			wantCanonical: "http://example.com/b",
		},
		{name: "empty crawl", in: &crawlv1.DiscoveredURL{Url: "http://example.com/"}, budget: 1, wantReason: InvalidCrawl},
		{name: "nul in crawl", in: &crawlv1.DiscoveredURL{CrawlId: "c\x001", Url: "http://example.com/"}, budget: 1, wantReason: InvalidCrawl},
		{name: "not a url", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "::not a url"}, budget: 1, wantReason: InvalidURL},
		{name: "relative url", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "/relative/path"}, budget: 1, wantReason: InvalidURL},
		{name: "mailto", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "mailto:a@example.com"}, budget: 1, wantReason: UnsupportedScheme},
		{name: "too long", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/" + strings.Repeat("a", 5000)}, budget: 1, wantReason: URLTooLong},
		{name: "other partition", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://other.example/x"}, budget: 1, wantReason: WrongPartition, wantCanonical: "http://other.example/x"},
		{name: "owned on its partition", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://other.example/x"}, partition: 1, budget: 1, wantCanonical: "http://other.example/x"},
		{name: "at max depth", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/", Depth: 5}, budget: 1, wantCanonical: "http://example.com/"},
		{name: "too deep", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/", Depth: 6}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/"},
		{name: "duplicate", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://SEEN.example#x"}, budget: 1, wantReason: Duplicate, wantCanonical: "http://seen.example/"},
		{name: "same url other crawl", in: &crawlv1.DiscoveredURL{CrawlId: "c2", Url: "http://seen.example/"}, budget: 1, wantCanonical: "http://seen.example/"},
		{name: "budget exhausted", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/"}, budget: 0, wantReason: BudgetExhausted, wantCanonical: "http://example.com/"},
		{name: "spec allows deeper", in: &crawlv1.DiscoveredURL{CrawlId: "deep", Url: "http://example.com/", Depth: 8}, budget: 1, wantCanonical: "http://example.com/"},
		{name: "beyond the spec's depth", in: &crawlv1.DiscoveredURL{CrawlId: "deep", Url: "http://example.com/", Depth: 9}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/"},
		{name: "spec limits shallower", in: &crawlv1.DiscoveredURL{CrawlId: "shallow", Url: "http://example.com/", Depth: 2}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/"},
		{name: "redirect hops carried", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/moved", Source: crawlv1.Source_SOURCE_REDIRECT, RedirectHops: 2, ParentUrl: "http://example.com/old"}, budget: 1, wantCanonical: "http://example.com/moved"},
		{name: "redirect into a seen page", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/?", Source: crawlv1.Source_SOURCE_REDIRECT, RedirectHops: 1}, budget: 1, wantReason: Duplicate, wantCanonical: "http://seen.example/?"},
		{name: "previous crawl's validators carried", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/old", Depth: 2, Source: crawlv1.Source_SOURCE_PREVIOUS_CRAWL, Etag: `"v1"`, LastModified: "Thu, 01 Jan 2026 00:00:00 GMT", DocumentCrawlId: "c0"}, budget: 1, wantCanonical: "http://example.com/old"},
		{name: "previous crawl's page seen already", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/", Source: crawlv1.Source_SOURCE_PREVIOUS_CRAWL, Etag: `"v1"`}, budget: 1, wantReason: Duplicate, wantCanonical: "http://seen.example/"},
		{name: "previous crawl's page too deep now", in: &crawlv1.DiscoveredURL{CrawlId: "shallow", Url: "http://example.com/deep", Depth: 4, Source: crawlv1.Source_SOURCE_PREVIOUS_CRAWL}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/deep"},
		{name: "serp engine carried", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/search?q=x", SerpEngine: "demo"}, budget: 1, wantCanonical: "http://example.com/search?q=x"},
		{name: "cancelled crawl", in: &crawlv1.DiscoveredURL{CrawlId: "cancelled", Url: "http://example.com/"}, budget: 1, wantReason: Cancelled, wantCanonical: "http://example.com/"},
		{name: "cancelled wins over depth", in: &crawlv1.DiscoveredURL{CrawlId: "cancelled", Url: "http://example.com/", Depth: 99}, budget: 1, wantReason: Cancelled, wantCanonical: "http://example.com/"},
		{name: "paused crawl held", in: &crawlv1.DiscoveredURL{CrawlId: "paused", Url: "http://example.com/"}, budget: 1, wantCanonical: "http://example.com/", wantHold: true},
		{name: "paused crawl still deduplicated", in: &crawlv1.DiscoveredURL{CrawlId: "paused", Url: "http://example.com/", Depth: 6}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/"},
		{name: "suspected trap", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/cal/2027/1", Depth: 4, TrapFamily: "http://example.com/cal/#/#"}, budget: 1, wantReason: TrapSuspected, wantCanonical: "http://example.com/cal/2027/1"},
		{name: "suspected trap seen already is a duplicate", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/", TrapFamily: "http://seen.example/"}, budget: 1, wantReason: Duplicate, wantCanonical: "http://seen.example/"},
		{name: "suspected trap too deep", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://example.com/cal/2027/1", Depth: 6, TrapFamily: "http://example.com/cal/#/#"}, budget: 1, wantReason: TooDeep, wantCanonical: "http://example.com/cal/2027/1"},
		{name: "duplicate wins over budget", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/"}, budget: 0, wantReason: Duplicate, wantCanonical: "http://seen.example/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Depth: specDepths, State: specStates, Partition: hostPartitions, Now: func() time.Time { return now }}
			b := &budget{left: tt.budget}
			d := decide(t, p, tt.in, tt.partition, seen, b)
			if d.Reason != tt.wantReason {
				t.Fatalf("Reason = %q, want %q", d.Reason, tt.wantReason)
			}
			if d.Admit != (tt.wantReason == "") {
				t.Fatalf("Admit = %v with reason %q", d.Admit, d.Reason)
			}
			if d.Hold != tt.wantHold {
				t.Errorf("Hold = %v, want %v", d.Hold, tt.wantHold)
			}
			if d.Canonical != tt.wantCanonical {
				t.Errorf("Canonical = %q, want %q", d.Canonical, tt.wantCanonical)
			}
			if d.Canonical != "" && d.FP != fingerprint.URL(tt.in.CrawlId, d.Canonical) {
				t.Errorf("FP = %x, want fingerprint of crawl and canonical url", d.FP)
			}
			spent := tt.budget - b.left
			if !d.Admit {
				if d.Fetch != nil || spent != 0 {
					t.Fatalf("dropped URL has Fetch=%v and spent %d pages", d.Fetch, spent)
				}
				return
			}
			if spent != 1 {
				t.Errorf("admission spent %d pages, want 1", spent)
			}
			f := d.Fetch
			if f.CrawlId != tt.in.CrawlId || f.Url != d.Canonical || f.UrlFp != d.FP || f.Depth != tt.in.Depth ||
				f.ParentUrl != tt.in.ParentUrl || f.AnchorText != tt.in.AnchorText || f.SerpEngine != tt.in.SerpEngine || f.Attempt != 0 ||
				f.RedirectHops != tt.in.RedirectHops || f.Etag != tt.in.Etag || f.LastModified != tt.in.LastModified ||
				f.DocumentCrawlId != tt.in.DocumentCrawlId {
				t.Errorf("Fetch = %v, does not match input %v", f, tt.in)
			}
			if !f.ScheduledAt.AsTime().Equal(now) {
				t.Errorf("ScheduledAt = %v, want %v", f.ScheduledAt.AsTime(), now)
			}
			if tt.in.DiscoveredAt != nil && !f.DiscoveredAt.AsTime().Equal(tt.in.DiscoveredAt.AsTime()) {
				t.Errorf("DiscoveredAt = %v, want %v", f.DiscoveredAt.AsTime(), tt.in.DiscoveredAt.AsTime())
			}
		})
	}
}

func TestUnlimited(t *testing.T) {
	for i := range 1000 {
		if !(Unlimited{}).Reserve(i%3, "c") {
			t.Fatal("Unlimited.Reserve = false")
		}
	}
}

// FuzzDecide feeds arbitrary crawl ids, URLs and depths to the policy.
// Invariants: never panics; an admitted URL's canonical form is stable
// (deciding it again yields the same canonical URL and fingerprint) and
// its fetch request carries exactly that URL and fingerprint; a URL is
// never admitted twice once its fingerprint is recorded.
func FuzzDecide(f *testing.F) {
	f.Add("c1", "HTTP://Example.COM:80/a/../b#frag", uint32(1))
	f.Add("c1", "http://other.example/x", uint32(0))
	f.Add("", "::", uint32(99))
	f.Add("c\x00", "https://xn--bcher-kva.example/ä?q=1", uint32(3))
	f.Fuzz(func(t *testing.T, crawl, url string, depth uint32) {
		p := Policy{Depth: FixedDepth(5), Partition: hostPartitions, Now: time.Now}
		seen := dedup.New(0)
		in := &crawlv1.DiscoveredURL{CrawlId: crawl, Url: url, Depth: depth}
		d := decide(t, p, in, 0, seen, Unlimited{})
		if !d.Admit {
			if d.Reason == "" || d.Fetch != nil {
				t.Fatalf("dropped without a reason or with a fetch request: %+v", d)
			}
			return
		}
		if d.Fetch.Url != d.Canonical || d.Fetch.UrlFp != d.FP || d.FP != fingerprint.URL(crawl, d.Canonical) {
			t.Fatalf("fetch request %v does not match decision %+v", d.Fetch, d)
		}
		seen.Add(d.FP)
		again := decide(t, p, &crawlv1.DiscoveredURL{CrawlId: crawl, Url: d.Canonical, Depth: depth}, 0, seen, Unlimited{})
		if again.Reason != Duplicate || again.Canonical != d.Canonical {
			t.Fatalf("canonical %q decided again: %+v, want duplicate of itself", d.Canonical, again)
		}
	})
}

// TestDecideScope checks that the URLs nobody judged before (redirect
// targets, sitemaps' URLs) meet the crawl's scope, while links (judged by
// the parser with their page) and seeds (the user's own) pass.
func TestDecideScope(t *testing.T) {
	rules, err := scope.Compile(&crawlv1.Scope{
		AllowDomains:        []string{"example.com"},
		DenyPatterns:        []string{"/private/"},
		SameHostOnly:        true,
		MaxRepeatedSegments: 2,
	}, scope.Defaults{}, true)
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{
		Depth:     FixedDepth(5),
		Partition: hostPartitions,
		Now:       time.Now,
		Scope: func(crawlID string) (*scope.Rules, bool) {
			return rules, crawlID == "scoped"
		},
	}
	tests := []struct {
		crawl  string
		source crawlv1.Source
		url    string
		want   Reason
	}{
		{"scoped", crawlv1.Source_SOURCE_REDIRECT, "http://elsewhere.org/a", OutOfScope},
		{"scoped", crawlv1.Source_SOURCE_REDIRECT, "http://www.example.com/private/x", Filtered},
		{"scoped", crawlv1.Source_SOURCE_REDIRECT, "http://sub.example.com/a", ""}, // same_host_only is about links
		{"scoped", crawlv1.Source_SOURCE_SITEMAP, "http://example.com/a/b/a/b/a", TrapGuard},
		{"scoped", crawlv1.Source_SOURCE_SITEMAP, "http://elsewhere.org/sitemap.xml", OutOfScope},
		{"scoped", crawlv1.Source_SOURCE_PREVIOUS_CRAWL, "http://elsewhere.org/a", OutOfScope}, // judged by the previous crawl's scope
		{"scoped", crawlv1.Source_SOURCE_PREVIOUS_CRAWL, "http://example.com/private/x", Filtered},
		{"scoped", crawlv1.Source_SOURCE_PREVIOUS_CRAWL, "http://example.com/a", ""},
		{"scoped", crawlv1.Source_SOURCE_LINK, "http://elsewhere.org/a", ""}, // judged by the parser
		{"scoped", crawlv1.Source_SOURCE_SEED, "http://elsewhere.org/", ""},
		{"unscoped", crawlv1.Source_SOURCE_REDIRECT, "http://elsewhere.org/a", ""},
	}
	for _, tt := range tests {
		t.Run(tt.crawl+" "+tt.source.String()+" "+tt.url, func(t *testing.T) {
			d := decide(t, p, &crawlv1.DiscoveredURL{CrawlId: tt.crawl, Url: tt.url, Depth: 1, Source: tt.source}, 0, dedup.New(0), &budget{left: 1})
			if d.Reason != tt.want || d.Admit != (tt.want == "") {
				t.Errorf("Decide = admit %v, reason %q; want reason %q", d.Admit, d.Reason, tt.want)
			}
		})
	}
}

// TestDecideSeedRedirect: a seed's redirect target (depth 0, 1 to 3
// hops, no result page) off the seeds' sites is admitted with the grant
// of its site (its host in HOST mode, its registrable domain in DOMAIN
// mode); a redirect from any other page to another site is dropped as
// before, and so is a seed's target that another scope rule drops.
func TestDecideSeedRedirect(t *testing.T) {
	compile := func(s *crawlv1.Scope) *scope.Rules {
		r, err := scope.Compile(s, scope.Defaults{}, true)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	crawls := map[string]*scope.Rules{
		"domain": compile(&crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"golang.org"},
			DenyDomains: []string{"denied.example"}, DenyPatterns: []string{`/private/`}}),
		"host": compile(&crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"example.com"}}),
		"web":  compile(&crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_WEB}),
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	p := Policy{Depth: FixedDepth(5), Partition: hostPartitions, Now: func() time.Time { return now },
		Scope: func(crawlID string) (*scope.Rules, bool) { r, ok := crawls[crawlID]; return r, ok }}
	redirect := func(crawl, url string, depth, hops uint32) *crawlv1.DiscoveredURL {
		return &crawlv1.DiscoveredURL{CrawlId: crawl, Url: url, Depth: depth, RedirectHops: hops, Source: crawlv1.Source_SOURCE_REDIRECT,
			ParentUrl: "http://golang.org/"}
	}
	tests := []struct {
		name       string
		in         *crawlv1.DiscoveredURL
		wantReason Reason
		wantHost   string
		wantDomain string
	}{
		{name: "domain: seed to another domain joins it", in: redirect("domain", "https://go.dev/", 0, 1), wantDomain: "go.dev"},
		{name: "domain: third hop joins", in: redirect("domain", "https://www.go.dev/", 0, 3), wantDomain: "go.dev"},
		{name: "domain: fourth hop is dropped", in: redirect("domain", "https://go.dev/", 0, 4), wantReason: OutOfScope},
		{name: "domain: on the seeds' domain grants nothing", in: redirect("domain", "https://www.golang.org/", 0, 1)},
		{name: "domain: a page's redirect to another site is dropped", in: redirect("domain", "https://go.dev/", 1, 1), wantReason: OutOfScope},
		{name: "domain: deny domain still applies", in: redirect("domain", "https://www.denied.example/", 0, 1), wantReason: OutOfScope},
		{name: "domain: deny pattern still applies", in: redirect("domain", "https://go.dev/private/", 0, 1), wantReason: Filtered},
		{name: "domain: a result page's redirect widens nothing",
			in: &crawlv1.DiscoveredURL{CrawlId: "domain", Url: "https://go.dev/", Source: crawlv1.Source_SOURCE_REDIRECT, RedirectHops: 1, SerpEngine: "bing"}, wantReason: OutOfScope},
		{name: "domain: a sitemap's url widens nothing", in: &crawlv1.DiscoveredURL{CrawlId: "domain", Url: "https://go.dev/", Source: crawlv1.Source_SOURCE_SITEMAP}, wantReason: OutOfScope},
		{name: "domain: redirect without hops widens nothing", in: redirect("domain", "https://go.dev/", 0, 0), wantReason: OutOfScope},
		{name: "host: www joins as a host", in: redirect("host", "https://www.example.com/", 0, 2), wantHost: "www.example.com"},
		{name: "host: the seed's host grants nothing", in: redirect("host", "https://example.com/", 0, 1)},
		{name: "web: nothing to grant", in: redirect("web", "https://go.dev/", 0, 1)},
		{name: "no scope: nothing to grant", in: redirect("none", "https://go.dev/", 0, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decide(t, p, tt.in, 0, dedup.New(0), &budget{left: 1})
			if d.Reason != tt.wantReason || d.Admit != (tt.wantReason == "") {
				t.Fatalf("Decide = admit %v, reason %q; want reason %q", d.Admit, d.Reason, tt.wantReason)
			}
			g := d.Grant
			if tt.wantHost == "" && tt.wantDomain == "" {
				if g != nil {
					t.Fatalf("grant %v, want none", g)
				}
				return
			}
			if g.GetHost() != tt.wantHost || g.GetDomain() != tt.wantDomain || g.GetCrawlId() != tt.in.GetCrawlId() ||
				g.GetTargetUrl() != d.Canonical || g.GetRedirectedFrom() != tt.in.GetParentUrl() ||
				g.GetRedirectHops() != tt.in.GetRedirectHops() || !g.GetGrantedAt().AsTime().Equal(now) {
				t.Errorf("grant = %v, want host %q domain %q", g, tt.wantHost, tt.wantDomain)
			}
		})
	}
	// A target admitted without a grant (the budget is spent) leaves none.
	if d := decide(t, p, redirect("domain", "https://go.dev/", 0, 1), 0, dedup.New(0), &budget{}); d.Admit || d.Grant != nil {
		t.Errorf("over budget: admit %v grant %v", d.Admit, d.Grant)
	}
}

// TestParentOffSites: a judged URL whose parent is off the known sites
// tells the caller to catch up with the control topic first.
func TestParentOffSites(t *testing.T) {
	rules, _ := scope.Compile(&crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"a.example"}}, scope.Defaults{}, true)
	p := Policy{Scope: func(crawlID string) (*scope.Rules, bool) { return rules, crawlID == "c" }}
	tests := []struct {
		name string
		in   *crawlv1.DiscoveredURL
		want bool
	}{
		{name: "redirect from a granted site not known yet", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_REDIRECT, ParentUrl: "http://b.example/x"}, want: true},
		{name: "sitemap url named by a site not known yet", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_SITEMAP, ParentUrl: "http://b.example/robots.txt"}, want: true},
		{name: "redirect from a seed site", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_REDIRECT, ParentUrl: "http://a.example/x"}},
		{name: "link: judged by the parser", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_LINK, ParentUrl: "http://b.example/x"}},
		{name: "no parent", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_SITEMAP}},
		{name: "bad parent", in: &crawlv1.DiscoveredURL{CrawlId: "c", Source: crawlv1.Source_SOURCE_REDIRECT, ParentUrl: "::bad"}},
		{name: "crawl without scope", in: &crawlv1.DiscoveredURL{CrawlId: "other", Source: crawlv1.Source_SOURCE_REDIRECT, ParentUrl: "http://b.example/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.ParentOffSites(tt.in); got != tt.want {
				t.Errorf("ParentOffSites = %v, want %v", got, tt.want)
			}
		})
	}
}

// hostBudget is a HostBudget of left pages per host, failing on "broken".
type hostBudget struct {
	left  map[string]int
	asked []string
}

func (h *hostBudget) Take(_ context.Context, crawlID, host string) (bool, error) {
	h.asked = append(h.asked, host)
	if crawlID == "broken" {
		return false, errors.New("url_seen unreachable")
	}
	if h.left[host] <= 0 {
		return false, nil
	}
	h.left[host]--
	return true, nil
}

// TestDecideHostBudget: the per-host budget is the last check, after the
// crawl's budget, whose page it gives back when the host has none left or
// its counts cannot be loaded; URLs dropped earlier never ask for it.
func TestDecideHostBudget(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seen := dedup.New(0)
	seen.Add(fingerprint.URL("c1", "http://seen.example/"))
	tests := []struct {
		name       string
		crawl, url string
		budget     int
		hostLeft   int
		wantReason Reason
		wantErr    bool
		wantAsked  bool
		wantBudget int // left after the decision
	}{
		{name: "admitted", crawl: "c1", url: "http://example.com/a", budget: 1, hostLeft: 1, wantAsked: true, wantBudget: 0},
		{name: "host budget exhausted", crawl: "c1", url: "http://example.com/a", budget: 1, hostLeft: 0, wantReason: HostBudgetExhausted, wantAsked: true, wantBudget: 1},
		{name: "crawl budget first", crawl: "c1", url: "http://example.com/a", budget: 0, hostLeft: 0, wantReason: BudgetExhausted, wantBudget: 0},
		{name: "duplicate never asks", crawl: "c1", url: "http://seen.example/", budget: 1, hostLeft: 1, wantReason: Duplicate, wantBudget: 1},
		{name: "too deep never asks", crawl: "c1", url: "http://example.com/deep", budget: 1, hostLeft: 1, wantReason: TooDeep, wantBudget: 1},
		{name: "counts unavailable", crawl: "broken", url: "http://example.com/a", budget: 1, hostLeft: 1, wantErr: true, wantAsked: true, wantBudget: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Depth: FixedDepth(5), Partition: hostPartitions, Now: func() time.Time { return now }}
			b := &budget{left: tt.budget}
			hb := &hostBudget{left: map[string]int{"example.com": tt.hostLeft, "seen.example": tt.hostLeft}}
			depth := uint32(1)
			if strings.HasSuffix(tt.url, "/deep") {
				depth = 6
			}
			d, err := p.Decide(t.Context(), &crawlv1.DiscoveredURL{CrawlId: tt.crawl, Url: tt.url, Depth: depth}, 0, seen, b, hb)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if err == nil && (d.Reason != tt.wantReason || d.Admit != (tt.wantReason == "")) {
				t.Errorf("reason %q admit %v, want %q", d.Reason, d.Admit, tt.wantReason)
			}
			if got := len(hb.asked) > 0; got != tt.wantAsked {
				t.Errorf("host budget asked: %v, want %v", got, tt.wantAsked)
			}
			if b.left != tt.wantBudget {
				t.Errorf("crawl budget left %d, want %d", b.left, tt.wantBudget)
			}
			if d.Reason == HostBudgetExhausted && (d.Fetch != nil || d.Canonical == "" || d.FP == 0) {
				t.Errorf("host-budget drop %+v: no request, but the URL and its fingerprint for its event", d)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	want := map[Reason]string{
		Duplicate: StateDuplicate, TooDeep: StateOutOfScope, OutOfScope: StateOutOfScope, Filtered: StateOutOfScope,
		TrapGuard: StateOutOfScope, ScopeTooLong: StateOutOfScope, BudgetExhausted: StateBudgetExhausted,
		HostBudgetExhausted: StateBudgetExhausted, Cancelled: StateCancelled, TrapSuspected: StateTrapSuspected, InvalidCrawl: StateInvalid,
		InvalidURL: StateInvalid, UnsupportedScheme: StateInvalid, URLTooLong: StateInvalid,
	}
	for _, r := range Reasons {
		got, ok := StateOf(r)
		if r == WrongPartition {
			if ok {
				t.Errorf("%s is terminal (%s), want not", r, got)
			}
			continue
		}
		if !ok || got != want[r] {
			t.Errorf("StateOf(%s) = %q, %v; want %q", r, got, ok, want[r])
		}
	}
}
