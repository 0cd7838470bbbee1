package e2e_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

// sitemapSite is a site whose pages link nowhere: only its sitemaps
// (robots.txt Sitemap line -> sitemap index -> a gzip url set and a text
// sitemap) reveal them.
type sitemapSite struct {
	srv    *http.Server
	host   string
	orphan []string // URLs only the sitemaps list
	mu     sync.Mutex
	hits   map[string]int
}

func startSitemapSite(t *testing.T, ip string) *sitemapSite {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen %s: %v", ip, err)
	}
	s := &sitemapSite{host: ln.Addr().String(), hits: map[string]int{}}
	base := "http://" + s.host
	for i := 1; i <= 6; i++ {
		s.orphan = append(s.orphan, fmt.Sprintf("%s/o/%d", base, i))
	}
	var set strings.Builder
	set.WriteString(`<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, u := range s.orphan[:4] {
		fmt.Fprintf(&set, "<url><loc>%s</loc><lastmod>2026-11-01</lastmod></url>", u)
	}
	set.WriteString(`<url><loc>javascript:void(0)</loc></url></urlset>`)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(set.String()))
	_ = zw.Close()
	files := map[string][]byte{
		"/robots.txt":   []byte("User-agent: *\nAllow: /\nSitemap: " + base + "/sitemap.xml\n"),
		"/sitemap.xml":  []byte(`<sitemapindex><sitemap><loc>/pages.xml.gz</loc></sitemap><sitemap><loc>/more.txt</loc></sitemap></sitemapindex>`),
		"/pages.xml.gz": gz.Bytes(),
		"/more.txt":     []byte(strings.Join(s.orphan[4:], "\n") + "\n"),
	}
	s.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		if r.URL.Path == "/robots.txt" && !strings.HasPrefix(r.UserAgent(), "trawl-seeder/") {
			// The fetcher is not told about the sitemaps (the pipeline
			// follows robots.txt Sitemap lines itself): only the
			// seeder's sitemap discovery can find the orphans.
			_, _ = w.Write([]byte("User-agent: *\nAllow: /\n"))
			return
		}
		if b, ok := files[r.URL.Path]; ok {
			_, _ = w.Write(b)
			return
		}
		if r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/o/") {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, "<!doctype html><html><head><title>page %s</title></head><body><p>An orphan page about sitemaps and crawling %s.</p></body></html>", r.URL.Path, r.URL.Path)
			return
		}
		http.NotFound(w, r)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func (s *sitemapSite) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// TestSeedFromSitemaps runs the one-shot seeder with --sitemaps on a site
// whose pages are reachable only through the sitemaps its robots.txt shows
// the seeder, and checks that the pipeline fetched and stored every one of
// them, once.
func TestSeedFromSitemaps(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	site := startSitemapSite(t, "127.0.0.175")
	e := startEnv(t, ctx, envConfig{
		site:  demosite.Config{Hosts: 1, PagesPerHost: 3, FirstHostOctet: 176},
		delay: e2eDelay,
		args:  map[string][]string{"seeder": {"--sitemaps", "--allow-private", "--sitemap-delay", "20ms"}},
	})
	e.seed(ctx, []string{"http://" + site.host + "/"}, "")
	s := e.drain(ctx, 90*time.Second)
	t.Logf("crawl drained: %s", s.Line())

	docs := e.documents(ctx)
	want := append([]string{"http://" + site.host + "/"}, site.orphan...)
	var missing []string
	for _, u := range want {
		if _, ok := docs[u]; !ok {
			missing = append(missing, u)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(docs) != len(want) {
		t.Errorf("documents %v; missing %v (want %d)", docs, missing, len(want))
	}
	for _, p := range []string{"/sitemap.xml", "/pages.xml.gz", "/more.txt"} {
		if n := site.hitsOf(p); n != 1 {
			t.Errorf("%s requested %d times, want once (by the seeder)", p, n)
		}
	}
	for i := 1; i <= 6; i++ {
		if n := site.hitsOf(fmt.Sprintf("/o/%d", i)); n != 1 {
			t.Errorf("/o/%d fetched %d times, want once", i, n)
		}
	}
}
