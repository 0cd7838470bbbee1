package scope_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// sites has one rule per site: news.test keeps only /2024/ and never
// /print/, blog.test and its subdomains drop /tag/ (but special.blog.test,
// named first, keeps everything).
var sites = &crawlv1.Scope{Sites: []*crawlv1.SiteRules{
	{Hosts: []string{"special.blog.test"}},
	{Hosts: []string{"News.test"}, AllowPatterns: []string{`/2024/`}, DenyPatterns: []string{`/print/`}},
	{Domains: []string{"blog.test"}, DenyPatterns: []string{`/tag/`}},
}}

var sitesAndCrawl = &crawlv1.Scope{AllowHosts: []string{"news.test"}, DenyPatterns: []string{`print=1`}, Sites: sites.Sites}

func TestCheck(t *testing.T) {
	defaults := scope.Defaults{MaxOutlinks: 100, MaxURLLength: 60, MaxRepeatedSegments: 2}
	tests := []struct {
		name     string
		scope    *crawlv1.Scope
		page     string
		link     string
		sameHost bool
		want     string
	}{
		{name: "no rules", page: "a.example.com", link: "http://b.example.org/x", want: ""},
		{name: "default length cap", page: "a.example.com", link: "http://b.example.org/" + strings.Repeat("x", 60), want: scope.DropTooLong},
		{name: "spec length cap", scope: &crawlv1.Scope{MaxUrlLength: 20}, link: "http://b.example.org/abcdef", want: scope.DropTooLong},
		{name: "allow host", scope: &crawlv1.Scope{AllowHosts: []string{"b.example.org"}}, link: "http://b.example.org/x", want: ""},
		{name: "allow host miss", scope: &crawlv1.Scope{AllowHosts: []string{"b.example.org"}}, link: "http://c.example.org/x", want: scope.DropOutOfScope},
		{name: "allow host with port key", scope: &crawlv1.Scope{AllowHosts: []string{"127.0.0.2:8080"}}, link: "http://127.0.0.2:8080/x", want: ""},
		{name: "allow host without port matches any port", scope: &crawlv1.Scope{AllowHosts: []string{"127.0.0.2"}}, link: "http://127.0.0.2:8080/x", want: ""},
		{name: "deny host", scope: &crawlv1.Scope{DenyHosts: []string{"B.Example.org"}}, link: "http://b.example.org/x", want: scope.DropOutOfScope},
		{name: "allow domain subdomain", scope: &crawlv1.Scope{AllowDomains: []string{"example.org"}}, link: "http://deep.b.example.org/x", want: ""},
		{name: "allow domain itself", scope: &crawlv1.Scope{AllowDomains: []string{".example.org"}}, link: "http://example.org/x", want: ""},
		{name: "allow domain suffix is not a domain", scope: &crawlv1.Scope{AllowDomains: []string{"example.org"}}, link: "http://badexample.org/x", want: scope.DropOutOfScope},
		{name: "deny domain wins over allow", scope: &crawlv1.Scope{AllowDomains: []string{"example.org"}, DenyDomains: []string{"ads.example.org"}}, link: "http://x.ads.example.org/", want: scope.DropOutOfScope},
		{name: "allow host or domain", scope: &crawlv1.Scope{AllowHosts: []string{"h.test"}, AllowDomains: []string{"example.org"}}, link: "http://h.test/", want: ""},
		{name: "same host only keeps same host", scope: &crawlv1.Scope{SameHostOnly: true}, page: "a.example.com", link: "http://a.example.com/x", sameHost: true, want: ""},
		{name: "same host only drops other host", scope: &crawlv1.Scope{SameHostOnly: true}, page: "a.example.com", link: "http://b.example.com/x", sameHost: true, want: scope.DropOutOfScope},
		{name: "same host only off on result pages", scope: &crawlv1.Scope{SameHostOnly: true}, page: "a.example.com", link: "http://b.example.com/x", sameHost: false, want: ""},
		{name: "same host only other port", scope: &crawlv1.Scope{SameHostOnly: true}, page: "a.example.com", link: "http://a.example.com:81/x", sameHost: true, want: scope.DropOutOfScope},
		{name: "deny pattern", scope: &crawlv1.Scope{DenyPatterns: []string{`\.(jpg|png)$`}}, link: "http://a.test/i.png", want: scope.DropFiltered},
		{name: "allow pattern match", scope: &crawlv1.Scope{AllowPatterns: []string{`/news/`, `/blog/`}}, link: "http://a.test/blog/1", want: ""},
		{name: "allow pattern miss", scope: &crawlv1.Scope{AllowPatterns: []string{`/news/`}}, link: "http://a.test/shop/1", want: scope.DropFiltered},
		{name: "deny beats allow", scope: &crawlv1.Scope{AllowPatterns: []string{`/news/`}, DenyPatterns: []string{`print=1`}}, link: "http://a.test/news/1?print=1", want: scope.DropFiltered},
		{name: "site deny drops on its host", scope: sites, link: "http://news.test/print/1", want: scope.DropFiltered},
		{name: "site allow keeps on its host", scope: sites, link: "http://news.test/2024/story", want: ""},
		{name: "site allow misses on its host", scope: sites, link: "http://news.test/shop/1", want: scope.DropFiltered},
		{name: "site rule of another host does not apply", scope: sites, link: "http://other.test/shop/1", want: ""},
		{name: "site domain rule on a subdomain", scope: sites, link: "http://a.blog.test/tag/x", want: scope.DropFiltered},
		{name: "site domain rule keeps the rest", scope: sites, link: "http://a.blog.test/post/1", want: ""},
		{name: "first naming rule applies", scope: sites, link: "http://special.blog.test/tag/x", want: ""},
		{name: "site rule by name matches any port", scope: sites, link: "http://news.test:8080/print/1", want: scope.DropFiltered},
		{name: "crawl deny applies before site allow", scope: sitesAndCrawl, link: "http://news.test/2024/story?print=1", want: scope.DropFiltered},
		{name: "site rule does not widen the scope", scope: sitesAndCrawl, link: "http://other.test/2024/x", want: scope.DropOutOfScope},
		{name: "trap guard default", link: "http://a.test/a/b/a/b/a/", want: scope.DropTrapGuard},
		{name: "trap guard at limit", link: "http://a.test/a/b/a/b", want: ""},
		{name: "trap guard from spec", scope: &crawlv1.Scope{MaxRepeatedSegments: 5}, link: "http://a.test/a/b/a/b/a/", want: ""},
		{name: "trap guard ignores query", link: "http://a.test/a?x=/a/a/a", want: ""},
		{name: "seeds' domains keep a subdomain", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN), link: "http://blog.example.co.uk/x", want: ""},
		{name: "seeds' domains keep the domain", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN), link: "http://example.co.uk/", want: ""},
		{name: "seeds' domains drop another site", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN), link: "http://other.co.uk/", want: scope.DropOutOfScope},
		{name: "seeds' domains keep an IP seed's host", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN), link: "http://127.0.0.9:8080/p", want: ""},
		{name: "seeds' domains drop the IP's other port", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN), link: "http://127.0.0.9:8081/p", want: scope.DropOutOfScope},
		{name: "seeds' hosts drop a subdomain", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_HOST), link: "http://blog.example.co.uk/x", want: scope.DropOutOfScope},
		{name: "seeds' hosts keep a seed's host", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_HOST), link: "http://www.example.co.uk/x", want: ""},
		{name: "web keeps another site", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_WEB), link: "http://other.co.uk/", want: ""},
		{name: "a spec before modes is the web", scope: seedScope(crawlv1.ScopeMode_SCOPE_MODE_UNSPECIFIED), link: "http://other.co.uk/", want: ""},
		{name: "seeds' sites and an allow list both apply", scope: func() *crawlv1.Scope {
			s := seedScope(crawlv1.ScopeMode_SCOPE_MODE_DOMAIN)
			s.AllowDomains = []string{"other.co.uk"}
			return s
		}(), link: "http://other.co.uk/", want: scope.DropOutOfScope},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := scope.Compile(tt.scope, defaults, tt.scope != nil)
			if err != nil {
				t.Fatal(err)
			}
			link, err := urlcanon.Canonicalize(tt.link)
			if err != nil {
				t.Fatal(err)
			}
			host, err := urlcanon.PolitenessKey(link)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Check(tt.page, link, host, tt.sameHost); got != tt.want {
				t.Errorf("Check(%q) = %q, want %q", link, got, tt.want)
			}
		})
	}
}

// seedScope is the scope a crawl of mode gets from two seeds: a page of
// www.example.co.uk and an IP-literal host with a port.
func seedScope(mode crawlv1.ScopeMode) *crawlv1.Scope {
	hosts, domains := scope.SeedSites(mode, []string{"http://www.example.co.uk/start", "http://127.0.0.9:8080/"})
	return &crawlv1.Scope{Mode: mode, SeedHosts: hosts, SeedDomains: domains}
}

func TestSeedSites(t *testing.T) {
	seeds := []string{
		"http://www.example.co.uk/a", "https://shop.example.co.uk/", "http://example.org/", "http://a.b.example.org:8080/",
		"http://127.0.0.9:8080/", "http://localhost/", "http://[::1]:9000/", "http://co.uk/", "not a url",
	}
	tests := []struct {
		mode           crawlv1.ScopeMode
		hosts, domains []string
	}{
		{crawlv1.ScopeMode_SCOPE_MODE_DOMAIN,
			[]string{"127.0.0.9:8080", "[::1]:9000", "co.uk", "localhost"},
			[]string{"example.co.uk", "example.org"}},
		{crawlv1.ScopeMode_SCOPE_MODE_HOST,
			[]string{"127.0.0.9:8080", "[::1]:9000", "a.b.example.org:8080", "co.uk", "example.org", "localhost", "shop.example.co.uk", "www.example.co.uk"},
			nil},
		{crawlv1.ScopeMode_SCOPE_MODE_WEB, nil, nil},
		{crawlv1.ScopeMode_SCOPE_MODE_UNSPECIFIED, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			hosts, domains := scope.SeedSites(tt.mode, seeds)
			if !slices.Equal(hosts, tt.hosts) || !slices.Equal(domains, tt.domains) {
				t.Errorf("SeedSites = %q, %q; want %q, %q", hosts, domains, tt.hosts, tt.domains)
			}
		})
	}
}

func TestCompile(t *testing.T) {
	d := scope.Defaults{MaxOutlinks: 1000, FollowDuplicates: true, NearDistance: 2}
	tests := []struct {
		name          string
		scope         *crawlv1.Scope
		hasSpec       bool
		wantErr       bool
		maxOutlinks   int
		followDup     bool
		detail        bool
		detailURL     string
		detailMatches bool
		near          int // 0: the defaults' 2
	}{
		{name: "no spec", maxOutlinks: 1000, followDup: true},
		{name: "spec without follow_duplicates", scope: &crawlv1.Scope{}, hasSpec: true, maxOutlinks: 1000, followDup: false},
		{name: "spec options", scope: &crawlv1.Scope{MaxOutlinksPerPage: 7, FollowDuplicates: true}, hasSpec: true, maxOutlinks: 7, followDup: true},
		{name: "bad pattern reported, rest kept", scope: &crawlv1.Scope{DetailPatterns: []string{`(`, `/item/\d+$`}}, hasSpec: true, wantErr: true,
			maxOutlinks: 1000, detail: true, detailURL: "http://a.test/item/12", detailMatches: true},
		{name: "near-duplicate distance from the defaults", scope: &crawlv1.Scope{}, hasSpec: true, maxOutlinks: 1000, near: 2},
		{name: "near-duplicate distance from the spec", scope: &crawlv1.Scope{NearDuplicateDistance: 3}, hasSpec: true, maxOutlinks: 1000, near: 3},
		{name: "bad site pattern reported", scope: &crawlv1.Scope{Sites: []*crawlv1.SiteRules{{Hosts: []string{"a.test"}, DenyPatterns: []string{`[`}}}},
			hasSpec: true, wantErr: true, maxOutlinks: 1000},
		{name: "detail miss", scope: &crawlv1.Scope{DetailPatterns: []string{`/item/\d+$`}}, hasSpec: true,
			maxOutlinks: 1000, detail: true, detailURL: "http://a.test/list?page=2", detailMatches: false},
		{name: "bad selector", scope: &crawlv1.Scope{DetailSelector: "div[[["}, hasSpec: true, wantErr: true, maxOutlinks: 1000},
		{name: "selector", scope: &crawlv1.Scope{DetailSelector: "article.product"}, hasSpec: true, maxOutlinks: 1000, detail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := scope.Compile(tt.scope, d, tt.hasSpec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if r.MaxOutlinks() != tt.maxOutlinks || r.FollowDuplicates() != tt.followDup || r.HasDetailRules() != tt.detail {
				t.Errorf("maxOutlinks %d followDup %v detail %v, want %d %v %v",
					r.MaxOutlinks(), r.FollowDuplicates(), r.HasDetailRules(), tt.maxOutlinks, tt.followDup, tt.detail)
			}
			wantNear := d.NearDistance
			if tt.near != 0 {
				wantNear = tt.near
			}
			if r.NearDistance() != wantNear {
				t.Errorf("NearDistance %d, want %d", r.NearDistance(), wantNear)
			}
			if tt.detailURL != "" && r.DetailURL(tt.detailURL) != tt.detailMatches {
				t.Errorf("DetailURL(%q) = %v", tt.detailURL, !tt.detailMatches)
			}
		})
	}
}

func TestRepeatedSegments(t *testing.T) {
	tests := map[string]int{
		"http://a.test/":                    0,
		"http://a.test":                     0,
		"http://a.test/a":                   1,
		"http://a.test/a/b/a/b/a":           3,
		"http://a.test/x/y/z/?q=/x/x/x/x/x": 1,
		"http://a.test/cal/2026/cal/2026/":  2,
		// more segments than the no-allocation buffer holds
		"http://a.test" + strings.Repeat("/s", 40): 40,
	}
	for u, want := range tests {
		if got := scope.RepeatedSegments(u); got != want {
			t.Errorf("RepeatedSegments(%q) = %d, want %d", u, got, want)
		}
	}
}

func TestCacheRecompilesPerRevision(t *testing.T) {
	var errs []error
	c := scope.NewCache(scope.Defaults{MaxOutlinks: 10}, func(_ string, err error) { errs = append(errs, err) })
	if r := c.Rules("c", nil); r.MaxOutlinks() != 10 {
		t.Fatalf("defaults: max outlinks %d", r.MaxOutlinks())
	}
	spec := &crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, Scope: &crawlv1.Scope{MaxOutlinksPerPage: 3, DenyPatterns: []string{"("}}}
	r1 := c.Rules("c", spec)
	if r2 := c.Rules("c", spec); r2 != r1 {
		t.Error("same revision recompiled")
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "compile pattern") {
		t.Errorf("errors reported %v, want one compile error", errs)
	}
	spec2 := &crawlv1.CrawlSpec{CrawlId: "c", Revision: 2, Scope: &crawlv1.Scope{MaxOutlinksPerPage: 4}}
	if r := c.Rules("c", spec2); r.MaxOutlinks() != 4 {
		t.Errorf("revision 2: max outlinks %d, want 4", r.MaxOutlinks())
	}
	if len(errs) != 1 {
		t.Errorf("errors %v", errors.Join(errs...))
	}
}

func TestSiteOf(t *testing.T) {
	tests := []struct {
		name string
		mode crawlv1.ScopeMode
		key  string
		want scope.Site
		ok   bool
	}{
		{name: "host mode", mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, key: "www.example.com", want: scope.Site{Host: "www.example.com"}, ok: true},
		{name: "host mode with port", mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, key: "127.0.0.2:8080", want: scope.Site{Host: "127.0.0.2:8080"}, ok: true},
		{name: "domain mode", mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, key: "www.go.dev", want: scope.Site{Domain: "go.dev"}, ok: true},
		{name: "domain mode public suffix list", mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, key: "a.b.example.co.uk", want: scope.Site{Domain: "example.co.uk"}, ok: true},
		{name: "domain mode ip keeps the key", mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, key: "127.0.0.2:8080", want: scope.Site{Host: "127.0.0.2:8080"}, ok: true},
		{name: "domain mode single label", mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, key: "localhost", want: scope.Site{Host: "localhost"}, ok: true},
		{name: "web mode has no sites", mode: crawlv1.ScopeMode_SCOPE_MODE_WEB, key: "example.com"},
		{name: "unspecified mode has no sites", key: "example.com"},
		{name: "empty key", mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, key: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := scope.SiteOf(tt.mode, tt.key)
			if got != tt.want || ok != tt.ok {
				t.Errorf("SiteOf(%v, %q) = %+v, %v; want %+v, %v", tt.mode, tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestCheckJoining: a seed's redirect target off the seeds' sites is kept
// and names the site that joins (its host in HOST mode, its registrable
// domain in DOMAIN mode); every rule but the seed-site one still drops.
func TestCheckJoining(t *testing.T) {
	domain := &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"golang.org"}}
	host := &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"example.com"}}
	tests := []struct {
		name       string
		scope      *crawlv1.Scope
		link       string
		wantReason string
		want       scope.Site
		wantOK     bool
	}{
		{name: "domain mode: another domain joins", scope: domain, link: "https://go.dev/", want: scope.Site{Domain: "go.dev"}, wantOK: true},
		{name: "domain mode: a subdomain's registrable domain joins", scope: domain, link: "https://tip.go.dev/doc", want: scope.Site{Domain: "go.dev"}, wantOK: true},
		{name: "domain mode: on the seeds' sites already", scope: domain, link: "https://www.golang.org/"},
		{name: "host mode: www joins as a host", scope: host, link: "http://www.example.com/", want: scope.Site{Host: "www.example.com"}, wantOK: true},
		{name: "host mode: on the seeds' sites already", scope: host, link: "http://example.com/x"},
		{name: "web mode: nothing joins", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_WEB}, link: "http://b.example/"},
		{name: "no scope: nothing joins", link: "http://b.example/"},
		{name: "deny host still applies", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"a.example"}, DenyHosts: []string{"b.example"}},
			link: "http://b.example/", wantReason: scope.DropOutOfScope},
		{name: "deny domain still applies", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"a.example"}, DenyDomains: []string{"b.example"}},
			link: "http://www.b.example/", wantReason: scope.DropOutOfScope},
		{name: "allow hosts still apply", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"a.example"}, AllowHosts: []string{"a.example"}},
			link: "http://b.example/", wantReason: scope.DropOutOfScope},
		{name: "deny pattern still applies", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"a.example"}, DenyPatterns: []string{`/private`}},
			link: "http://b.example/private/", wantReason: scope.DropFiltered},
		{name: "a site's filter still applies", scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"a.example"},
			Sites: []*crawlv1.SiteRules{{Hosts: []string{"b.example"}, AllowPatterns: []string{`/news/`}}}},
			link: "http://b.example/", wantReason: scope.DropFiltered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := scope.Compile(tt.scope, scope.Defaults{}, tt.scope != nil)
			if err != nil {
				t.Fatal(err)
			}
			key, err := urlcanon.PolitenessKey(tt.link)
			if err != nil {
				t.Fatal(err)
			}
			reason, got, ok := rules.CheckJoining(tt.link, key)
			if reason != tt.wantReason || got != tt.want || ok != tt.wantOK {
				t.Errorf("CheckJoining(%q) = %q, %+v, %v; want %q, %+v, %v", tt.link, reason, got, ok, tt.wantReason, tt.want, tt.wantOK)
			}
			if ok && rules.Check("", tt.link, key, false) != scope.DropOutOfScope {
				t.Errorf("Check(%q) keeps a URL CheckJoining says joins", tt.link)
			}
		})
	}
}

func TestOnSeedSites(t *testing.T) {
	rules, _ := scope.Compile(&crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"a.example"}, SeedHosts: []string{"127.0.0.2:80"}}, scope.Defaults{}, true)
	for key, want := range map[string]bool{"a.example": true, "www.a.example": true, "127.0.0.2:80": true, "127.0.0.2:81": false, "b.example": false} {
		if got := rules.OnSeedSites(key); got != want {
			t.Errorf("OnSeedSites(%q) = %v, want %v", key, got, want)
		}
	}
	web, _ := scope.Compile(nil, scope.Defaults{}, false)
	if !web.OnSeedSites("anywhere.example") {
		t.Error("a crawl not kept on its seeds' sites has every host on them")
	}
}

// TestFollowTraps: a spec can ask to follow suspected traps; the service's
// default follows them in every crawl, whatever the spec says.
func TestFollowTraps(t *testing.T) {
	for _, tt := range []struct {
		name     string
		defaults bool
		scope    *crawlv1.Scope
		hasSpec  bool
		want     bool
	}{
		{name: "no spec", want: false},
		{name: "spec asks", scope: &crawlv1.Scope{FollowTraps: true}, hasSpec: true, want: true},
		{name: "spec silent", scope: &crawlv1.Scope{}, hasSpec: true, want: false},
		{name: "service default, spec silent", defaults: true, scope: &crawlv1.Scope{}, hasSpec: true, want: true},
		{name: "service default, no spec", defaults: true, want: true},
	} {
		r, err := scope.Compile(tt.scope, scope.Defaults{MaxOutlinks: 10, FollowTraps: tt.defaults}, tt.hasSpec)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := r.FollowTraps(); got != tt.want {
			t.Errorf("%s: FollowTraps() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
