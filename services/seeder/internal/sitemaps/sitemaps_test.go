package sitemaps_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/sitemap"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// site serves testdata on addr (127.0.0.x), {{HOST}} replaced by its
// host:port; pages.xml.gz is pages.xml gzipped. It records the requests.
type site struct {
	srv  *httptest.Server
	host string
	mu   sync.Mutex
	reqs []string
	at   []time.Time
}

func startSite(t *testing.T, ip string) *site {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	s := &site{host: ln.Addr().String()}
	s.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.URL.Path)
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	name := strings.TrimPrefix(r.URL.Path, "/")
	gz := strings.HasSuffix(name, ".gz")
	b, err := os.ReadFile(filepath.Join("testdata", strings.TrimSuffix(name, ".gz")))
	if err != nil || name == "" {
		http.NotFound(w, r)
		return
	}
	b = bytes.ReplaceAll(b, []byte("{{HOST}}"), []byte(s.host))
	if gz {
		b = gzipped(b)
	}
	_, _ = w.Write(b)
}

func (s *site) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func testConfig() sitemaps.Config {
	cfg := sitemaps.DefaultConfig()
	cfg.AllowPrivate = true
	cfg.Delay = 20 * time.Millisecond
	cfg.Timeout = 5 * time.Second
	cfg.MaxDepth = 2
	return cfg
}

// TestDiscoverLocalSite reads robots.txt Sitemap lines (relative, upper-case
// scheme, an ftp one), a sitemap index with a gzip url set, nested indexes
// beyond the depth bound and a missing sitemap, a text sitemap and the
// default /sitemap.xml, on a site at 127.0.0.2.
func TestDiscoverLocalSite(t *testing.T) {
	s := startSite(t, "127.0.0.2")
	d := sitemaps.New(testConfig())
	defer d.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := d.Discover(ctx, []string{"http://" + s.host + "/", "http://" + s.host + "/other"}, nil)

	var got []string
	lastmods := map[string]time.Time{}
	for _, e := range res.Entries {
		got = append(got, strings.TrimPrefix(e.URL, "http://"+s.host))
		lastmods[e.URL] = e.Lastmod
	}
	want := []string{"/news/1", "/news/2", "/home", "/a", "/b?x=1&y=2", "/c"}
	if !slices.Equal(got, want) {
		t.Errorf("entries = %q, want %q", got, want)
	}
	if lm := lastmods["http://"+s.host+"/a"]; !lm.Equal(time.Date(2026, 10, 5, 6, 30, 0, 0, time.UTC)) {
		t.Errorf("lastmod of /a = %v", lm)
	}
	if lm := lastmods["http://"+s.host+"/c"]; !lm.IsZero() {
		t.Errorf("invalid lastmod of /c kept: %v", lm)
	}

	problems := map[string]bool{}
	for _, p := range res.Problems {
		key := filepath.Base(p.Source)
		problems[key] = true
		t.Logf("problem: %s pos %d: %s", p.Source, p.Pos, p.Message)
	}
	for _, src := range []string{"robots.txt", "news.txt", "pages.xml.gz", "missing.xml", "too_deep.xml"} {
		if !problems[src] {
			t.Errorf("no problem reported for %s", src)
		}
	}
	// pages.xml.gz: javascript: loc, missing loc, bad lastmod.
	n := 0
	for _, p := range res.Problems {
		if strings.HasSuffix(p.Source, "pages.xml.gz") {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d problems for pages.xml.gz, want 3", n)
	}

	reqs := s.requests()
	if slices.Contains(reqs, "/too_deep.xml") {
		t.Error("fetched a sitemap beyond the depth bound")
	}
	if c := strings.Count(strings.Join(reqs, " "), "/robots.txt"); c != 1 {
		t.Errorf("robots.txt fetched %d times for one host", c)
	}
	if res.Fetched != len(reqs) {
		t.Errorf("Fetched = %d, site saw %d", res.Fetched, len(reqs))
	}
	s.mu.Lock()
	for i := 1; i < len(s.at); i++ {
		if gap := s.at[i].Sub(s.at[i-1]); gap < 15*time.Millisecond {
			t.Errorf("requests %d and %d %v apart, want >= the delay", i-1, i, gap)
		}
	}
	s.mu.Unlock()
}

// TestDiscoverExplicitAndMaxURLs uses an explicit sitemap URL only and the
// URL bound.
func TestDiscoverExplicitAndMaxURLs(t *testing.T) {
	s := startSite(t, "127.0.0.3")
	cfg := testConfig()
	cfg.MaxURLs = 2
	d := sitemaps.New(cfg)
	defer d.Close()
	res := d.Discover(t.Context(), nil, []string{"http://" + s.host + "/pages.xml.gz", "mailto:x@y"})
	if len(res.Entries) != 2 {
		t.Errorf("%d entries, want 2 (the bound)", len(res.Entries))
	}
	if len(res.Problems) == 0 || res.Problems[0].Source != "mailto:x@y" {
		t.Errorf("problems = %+v, want the mailto sitemap first", res.Problems)
	}
	if got := s.requests(); !slices.Equal(got, []string{"/pages.xml.gz"}) {
		t.Errorf("requests = %q", got)
	}
}

// TestDiscoverRefusesPrivate: without AllowPrivate a loopback site is not
// contacted.
func TestDiscoverRefusesPrivate(t *testing.T) {
	s := startSite(t, "127.0.0.4")
	cfg := testConfig()
	cfg.AllowPrivate = false
	d := sitemaps.New(cfg)
	defer d.Close()
	res := d.Discover(t.Context(), []string{"http://" + s.host + "/"}, nil)
	if len(res.Entries) != 0 || len(s.requests()) != 0 {
		t.Fatalf("entries %d, requests %q: the private site was contacted", len(res.Entries), s.requests())
	}
	if len(res.Problems) == 0 || !strings.Contains(res.Problems[0].Message, sitemaps.ErrPrivateAddress.Error()) {
		t.Errorf("problems = %+v, want a private-address refusal", res.Problems)
	}
}

// TestParse checks what the seeder adds to libs/sitemap: URLs validated
// and canonicalized as seeds, lastmods checked, index locations resolved,
// priorities carried (absent or no number: none), and every unusable entry, or where a sitemap stopped, reported with its
// position.
func TestParse(t *testing.T) {
	base, _ := url.Parse("http://h.test/dir/robots.txt")
	bomb := gzipped(append([]byte(`<urlset><url><loc>http://h.test/x</loc></url>`), bytes.Repeat([]byte(" "), 1<<20)...))
	tests := []struct {
		name     string
		body     []byte
		urls     []string
		lastmods []time.Time
		prios    []string // "" for none
		sitemaps []string
		invalid  []int // positions
		err      error
	}{
		{
			name: "text", body: []byte("\uFEFFhttp://H.test/a\r\n\r\nbad\n# comment\nmailto://x@y\nhttp://h.test/b\n"),
			urls: []string{"http://h.test/a", "http://h.test/b"}, invalid: []int{3, 5},
		},
		{
			name: "urlset", body: []byte(`<urlset><url><loc>http://h.test/x</loc><lastmod>2026-11-02</lastmod></url>` +
				`<url><loc>javascript:alert(1)</loc></url><url><lastmod>2026-01-01</lastmod></url>` +
				`<url><loc>http://h.test/y</loc><lastmod>yesterday</lastmod></url></urlset>`),
			urls: []string{"http://h.test/x", "http://h.test/y"}, lastmods: []time.Time{time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), {}},
			invalid: []int{2, 3, 4},
		},
		{
			name: "priorities", body: []byte(`<urlset><url><loc>http://h.test/a</loc><priority>0.8</priority></url>` +
				`<url><loc>http://h.test/b</loc><priority>0</priority></url><url><loc>http://h.test/c</loc></url>` +
				`<url><loc>http://h.test/d</loc><priority>high</priority></url><url><loc>http://h.test/e</loc><priority>3</priority></url></urlset>`),
			urls:  []string{"http://h.test/a", "http://h.test/b", "http://h.test/c", "http://h.test/d", "http://h.test/e"},
			prios: []string{"0.8", "0", "", "", "1"},
		},
		{
			name: "gzip index, relative and ftp", body: gzipped([]byte(`<sitemapindex><sitemap><loc>s2.xml</loc></sitemap>` +
				`<sitemap><loc>ftp://h.test/s3.xml</loc></sitemap><sitemap><loc>/s4.xml#x</loc></sitemap></sitemapindex>`)),
			sitemaps: []string{"http://h.test/dir/s2.xml", "http://h.test/s4.xml"}, invalid: []int{2},
		},
		{name: "html is not a sitemap", body: []byte(`<html><body>hi</body></html>`), err: sitemap.ErrNotSitemap},
		{
			name: "truncated keeps the start", body: []byte(`<urlset><url><loc>http://h.test/x</loc></url><url><loc>http://h.te`),
			urls: []string{"http://h.test/x"}, invalid: []int{2},
		},
		{name: "too large keeps the start", body: bomb, urls: []string{"http://h.test/x"}, invalid: []int{2}},
		{name: "empty", body: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sitemaps.Parse(tt.body, base, 100, 64<<10)
			if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			var (
				urls     []string
				lastmods []time.Time
				prios    []string
				invalid  []int
			)
			for _, e := range p.URLs {
				urls = append(urls, e.URL)
				lastmods = append(lastmods, e.Lastmod)
				prio := ""
				if e.HasPriority {
					prio = fmt.Sprint(e.Priority)
				}
				prios = append(prios, prio)
			}
			for _, b := range p.Invalid {
				invalid = append(invalid, b.Pos)
				if b.Err == nil {
					t.Errorf("invalid entry %+v without an error", b)
				}
			}
			if !slices.Equal(urls, tt.urls) || !slices.Equal(p.Sitemaps, tt.sitemaps) || !slices.Equal(invalid, tt.invalid) {
				t.Errorf("urls %q sitemaps %q invalid %+v, want %q %q at %v", urls, p.Sitemaps, p.Invalid, tt.urls, tt.sitemaps, tt.invalid)
			}
			if tt.prios != nil && !slices.Equal(prios, tt.prios) {
				t.Errorf("priorities %q, want %q", prios, tt.prios)
			}
			if tt.lastmods != nil && !slices.EqualFunc(lastmods, tt.lastmods, time.Time.Equal) {
				t.Errorf("lastmods %v, want %v", lastmods, tt.lastmods)
			}
		})
	}
	if p, _ := sitemaps.Parse(bomb, base, 100, 64<<10); len(p.Invalid) != 1 || !errors.Is(p.Invalid[0].Err, sitemap.ErrTooLarge) {
		t.Errorf("invalid %+v, want ErrTooLarge", p.Invalid)
	}
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}
