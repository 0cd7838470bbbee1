package demosite

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	hrefRE = regexp.MustCompile(`<a href="([^"]*)"`)
	baseRE = regexp.MustCompile(`<base href="([^"]*)"`)
)

// crawlReference is a minimal, obviously correct crawler: breadth-first,
// resolves hrefs against <base href> or the page URL, drops fragments,
// skips /private/, follows redirects as new URLs.
func crawlReference(t *testing.T, site *Site) (fetched []string) {
	t.Helper()
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	seen := map[string]bool{}
	queue := site.Seeds()
	for _, s := range queue {
		seen[s] = true
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatalf("parse %q: %v", u, err)
		}
		if IsDisallowed(pu.Path) {
			continue
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("get %s: %v", u, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("read %s: %v", u, err)
		}
		fetched = append(fetched, u)
		var next []string
		switch {
		case resp.StatusCode == http.StatusMovedPermanently:
			next = append(next, resp.Header.Get("Location"))
		case resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"):
			base := pu
			if m := baseRE.FindSubmatch(body); m != nil {
				ref, err := url.Parse(string(m[1]))
				if err != nil {
					t.Fatalf("parse base %q: %v", m[1], err)
				}
				base = pu.ResolveReference(ref)
			}
			for _, m := range hrefRE.FindAllSubmatch(body, -1) {
				ref, err := url.Parse(string(m[1]))
				if err != nil {
					t.Fatalf("parse href %q on %s: %v", m[1], u, err)
				}
				abs := base.ResolveReference(ref)
				abs.Fragment = ""
				next = append(next, abs.String())
			}
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	slices.Sort(fetched)
	return fetched
}

func TestReferenceCrawlMatchesGraph(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"default", Config{Hosts: 3, PagesPerHost: 40, FirstHostOctet: 200}},
		{"one host few pages", Config{Hosts: 1, PagesPerHost: 3, FirstHostOctet: 210}},
		{"skewed", Config{Hosts: 3, PagesPerHost: 6, FirstHostPages: 30, FirstHostOctet: 214}},
		{"big and slow linked", Config{Hosts: 2, PagesPerHost: 8, FirstHostOctet: 220, LinkBig: true, BigBytes: 1 << 16, LinkSlow: true, SlowDelay: 10 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site, err := Start(t.Context(), tt.cfg)
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			defer site.Close()
			got := crawlReference(t, site)
			want := site.ReachableAllowed()
			if !slices.Equal(got, want) {
				t.Errorf("reference crawl fetched %d URLs, graph says %d\nonly fetched: %v\nonly graph: %v",
					len(got), len(want), minus(got, want), minus(want, got))
			}
			// Every special resource is part of the crawl.
			for h := range tt.cfg.Hosts {
				for _, p := range []string{PathIndex, PathBase, PathBased, PathMissing, PathRedirect, PathLanding, PathData} {
					if !slices.Contains(want, site.URL(h, p)) {
						t.Errorf("host %d: %s not reachable", h, p)
					}
				}
				if !slices.Contains(site.Disallowed(), site.URL(h, PathPrivate)) {
					t.Errorf("host %d: %s not listed as disallowed", h, PathPrivate)
				}
				if tt.cfg.LinkBig != slices.Contains(want, site.URL(h, PathBig)) {
					t.Errorf("host %d: big page reachable = %v, want %v", h, !tt.cfg.LinkBig, tt.cfg.LinkBig)
				}
			}
			// The request log saw exactly the fetches, with distinct hosts.
			reqs := site.Requests()
			if len(reqs) != len(got) {
				t.Errorf("request log has %d entries, want %d", len(reqs), len(got))
			}
			hosts := map[string]bool{}
			for _, r := range reqs {
				hosts[strings.Split(r.Host, ":")[0]] = true
				if IsDisallowed(r.Path) {
					t.Errorf("disallowed path requested: %s", r.URL())
				}
			}
			if len(hosts) != tt.cfg.Hosts {
				t.Errorf("requests reached %d distinct IPs, want %d", len(hosts), tt.cfg.Hosts)
			}
			for _, u := range site.HTMLPages() {
				if strings.HasSuffix(u, PathData) || strings.HasSuffix(u, PathRedirect) || strings.HasSuffix(u, PathMissing) {
					t.Errorf("HTMLPages lists non-HTML %s", u)
				}
			}
		})
	}
}

func TestSpecialResponses(t *testing.T) {
	site, err := Start(t.Context(), Config{Hosts: 2, PagesPerHost: 5, FirstHostOctet: 230, BigBytes: 100_000, SlowDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer site.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		path     string
		status   int
		ctype    string
		minBytes int
		location string
	}{
		{PathRobots, 200, "text/plain", 10, ""},
		{PathMissing, 404, "text/plain", 0, ""},
		{PathRedirect, 301, "", 0, site.URL(1, PathLanding)},
		{PathData, 200, "application/json", 5, ""},
		{PathBig, 200, "text/html", 100_000, ""},
		{PathSlow, 200, "text/html", 10, ""},
		{"/sec0/page0.html?x=1", 404, "text/plain", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			start := time.Now()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, site.URL(0, tt.path), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.ctype) {
				t.Errorf("content type %q, want %q", resp.Header.Get("Content-Type"), tt.ctype)
			}
			if len(body) < tt.minBytes {
				t.Errorf("body %d bytes, want at least %d", len(body), tt.minBytes)
			}
			if got := resp.Header.Get("Location"); got != tt.location {
				t.Errorf("location %q, want %q", got, tt.location)
			}
			if tt.path == PathSlow && time.Since(start) < 50*time.Millisecond {
				t.Errorf("slow page answered after %s", time.Since(start))
			}
		})
	}
}

func minus(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func TestSkewedSite(t *testing.T) {
	s, err := Start(t.Context(), Config{Hosts: 4, PagesPerHost: 10, FirstHostPages: 60, FirstHostOctet: 240})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := "http://" + s.Hosts()[0] + "/"
	onFirst, total := 0, 0
	for _, u := range s.ReachableAllowed() {
		total++
		if strings.HasPrefix(u, first) {
			onFirst++
		}
	}
	// 60 of 90 generated pages, plus a handful of special pages per host.
	if onFirst*2 < total {
		t.Errorf("host 0 holds %d of %d reachable URLs, want at least half", onFirst, total)
	}
	if !slices.Contains(s.ReachableAllowed(), first+"sec3/page59.html") {
		t.Errorf("host 0's last page is not reachable")
	}
}

// TestScriptHosts: a script-built host serves its HTML pages as shells
// (an app root and a script, no link), and its data gives the links and
// text an ordinary host's page has; the other hosts are unchanged.
func TestScriptHosts(t *testing.T) {
	s, err := Start(t.Context(), Config{Hosts: 2, PagesPerHost: 5, FirstHostOctet: 236, ScriptHosts: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.ScriptBuilt(0) || !s.ScriptBuilt(1) {
		t.Fatalf("ScriptBuilt(0, 1) = %v, %v, want the last host only", s.ScriptBuilt(0), s.ScriptBuilt(1))
	}
	get := func(u string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("get %s: %d %v", u, resp.StatusCode, err)
		}
		return string(b)
	}
	page := get(s.URL(1, PathIndex))
	if hrefRE.MatchString(page) || !strings.Contains(page, `<div id="app"></div>`) || !strings.Contains(page, PathAppScript) {
		t.Errorf("the script-built index is not a shell:\n%s", page)
	}
	if js := get(s.URL(1, PathAppScript)); !strings.Contains(js, DataPrefix) {
		t.Errorf("the app script does not read the data:\n%s", js)
	}
	var d pageData
	if err := json.Unmarshal([]byte(get(s.URL(1, DataPrefix+"/index.json"))), &d); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range hrefRE.FindAllStringSubmatch(string(s.render(s.g.nodes[1][PathIndex])), -1) {
		want = append(want, html.UnescapeString(m[1]))
	}
	var got []string
	for _, l := range d.Links {
		got = append(got, l.Href)
	}
	if len(want) == 0 || !slices.Equal(got, want) || len(d.Paragraphs) != 3 || d.Title != "Host 1 index" {
		t.Errorf("data of the index: title %q, %d paragraphs, links %v, want %v", d.Title, len(d.Paragraphs), got, want)
	}
	if !hrefRE.MatchString(get(s.URL(0, PathIndex))) {
		t.Error("the ordinary host's index has no link")
	}
	if _, err := Start(t.Context(), Config{Hosts: 2, ScriptHosts: 3, FirstHostOctet: 238}); err == nil {
		t.Error("3 script-built hosts of 2 accepted")
	}
}
