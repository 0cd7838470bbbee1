package api_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// TestCreateWithSitemaps submits a crawl with "sitemaps": true and an
// explicit sitemap URL against a site on 127.0.0.10, and checks the
// response (counts and problems) and the records on the discovered topic.
func TestCreateWithSitemaps(t *testing.T) {
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.10:0")
	if err != nil {
		t.Skipf("listen: %v", err)
	}
	host := ln.Addr().String()
	pages := map[string]string{
		"/robots.txt":      "Sitemap: /from-robots.txt\n",
		"/sitemap.xml":     `<urlset><url><loc>http://` + host + `/x</loc><lastmod>2026-11-02</lastmod><priority>0.9</priority></url><url><loc>http://` + host + `/</loc></url></urlset>`,
		"/from-robots.txt": "http://" + host + "/y\nnot a url\n",
		"/extra.xml":       `<urlset><url><loc>http://` + host + `/z</loc><priority>high</priority></url></urlset>`,
	}
	site := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(b))
	})}}
	site.Start()
	defer site.Close()

	cfg := sitemaps.DefaultConfig()
	cfg.AllowPrivate, cfg.Delay = true, 10*time.Millisecond
	d := sitemaps.New(cfg)
	defer d.Close()
	e := newEnvWith(t, d)

	body := `{"crawl_id":"maps","seeds":["http://` + host + `/"],"sitemaps":true,` +
		`"sitemap_urls":["http://` + host + `/extra.xml","http://` + host + `/gone.xml"]}`
	var created crawljobs.CreateResponse
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, &created); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	if created.SeedsPublished != 4 || created.SitemapURLs != 3 {
		t.Errorf("published %d (from sitemaps %d), want 4 (3)", created.SeedsPublished, created.SitemapURLs)
	}
	var sources []string
	for _, p := range created.SitemapProblems {
		sources = append(sources, strings.TrimPrefix(p.Source, "http://"+host))
	}
	if strings.Join(sources, ",") != "/gone.xml,/from-robots.txt" {
		t.Errorf("problems %+v, want gone.xml's 404 and from-robots.txt's bad line", created.SitemapProblems)
	}

	want := map[string]crawlv1.Source{
		"http://" + host + "/": crawlv1.Source_SOURCE_SEED, "http://" + host + "/x": crawlv1.Source_SOURCE_SITEMAP,
		"http://" + host + "/y": crawlv1.Source_SOURCE_SITEMAP, "http://" + host + "/z": crawlv1.Source_SOURCE_SITEMAP,
	}
	msgs := readTopic(t, e.kafka, e.kafka.Topics().Discovered, len(want))
	if len(msgs) != len(want) {
		t.Fatalf("%d records, want %d", len(msgs), len(want))
	}
	for _, m := range msgs {
		var du crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &du); err != nil {
			t.Fatal(err)
		}
		if src, ok := want[du.Url]; !ok || du.Source != src || du.CrawlId != "maps" {
			t.Errorf("%s: source %v, want %v", du.Url, du.Source, src)
		}
		if (du.Url == "http://"+host+"/x") != (du.Lastmod != nil) {
			t.Errorf("%s: lastmod %v", du.Url, du.Lastmod)
		}
		// /x's <priority> 0.9 is carried; /z's "high" is no number: unset,
		// as for the entries without one.
		if du.Url == "http://"+host+"/x" && du.GetSitemapPriority() != 0.9 || du.Url != "http://"+host+"/x" && du.SitemapPriority != nil {
			t.Errorf("%s: sitemap priority %v", du.Url, du.SitemapPriority)
		}
	}

	// A request whose only sitemap lists nothing usable creates nothing.
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"empty","sitemap_urls":["http://`+host+`/gone.xml"]}`, nil); code != http.StatusBadRequest || !strings.Contains(string(raw), "sitemap_problems") {
		t.Errorf("empty sitemap: %d %s, want 400 with problems", code, raw)
	}
}
