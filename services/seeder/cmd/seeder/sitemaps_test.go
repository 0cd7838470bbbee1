package main

import (
	"bytes"
	"compress/gzip"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// sitemapSite serves robots.txt with a Sitemap line to a gzip sitemap
// index, which lists a url set and a text sitemap; /sitemap.xml is missing.
func sitemapSite(t *testing.T, ip string) string {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Skipf("listen on %s: %v", ip, err)
	}
	host := ln.Addr().String()
	gz := func(s string) []byte {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		_ = zw.Close()
		return b.Bytes()
	}
	pages := map[string][]byte{
		"/robots.txt": []byte("User-agent: *\nAllow: /\nSitemap: http://" + host + "/index.xml.gz\n"),
		"/index.xml.gz": gz(`<sitemapindex><sitemap><loc>/set.xml</loc></sitemap>` +
			`<sitemap><loc>/list.txt</loc></sitemap></sitemapindex>`),
		"/set.xml": []byte(`<urlset><url><loc>http://` + host + `/p1</loc><lastmod>2026-11-20T10:00:00Z</lastmod></url>` +
			`<url><loc>http://` + host + `/</loc></url><url><loc>bad url</loc></url></urlset>`),
		"/list.txt": []byte("http://" + host + "/p2\n"),
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return host
}

// TestRunSitemaps: the one-shot seeder with --sitemaps publishes the seed
// (source SEED) and the URLs of the seed host's sitemaps (source SITEMAP,
// with lastmod), each once.
func TestRunSitemaps(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	host := sitemapSite(t, "127.0.0.7")
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--kafka-topic-prefix", kc.TopicPrefix,
		"--crawl-id", "maps",
		"--seed", "http://" + host + "/",
		"--sitemaps", "--allow-private", "--sitemap-delay", "10ms",
		"--log-level", "error",
	}
	if err := run(t.Context(), args, strings.NewReader(""), noEnv); err != nil {
		t.Fatalf("run: %v", err)
	}
	got := readDiscovered(t, kc, 3)
	want := map[string]crawlv1.Source{
		"http://" + host + "/":   crawlv1.Source_SOURCE_SEED,
		"http://" + host + "/p1": crawlv1.Source_SOURCE_SITEMAP,
		"http://" + host + "/p2": crawlv1.Source_SOURCE_SITEMAP,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d: %+v", len(got), len(want), got)
	}
	for _, r := range got {
		if src, ok := want[r.url]; !ok || r.msg.Source != src || r.msg.CrawlId != "maps" {
			t.Errorf("%s: source %v crawl %q, want %v", r.url, r.msg.Source, r.msg.CrawlId, src)
		}
		wantLastmod := r.url == "http://"+host+"/p1"
		if wantLastmod != (r.msg.Lastmod != nil) {
			t.Errorf("%s: lastmod %v", r.url, r.msg.Lastmod)
		}
		if wantLastmod && !r.msg.Lastmod.AsTime().Equal(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: lastmod %v", r.url, r.msg.Lastmod.AsTime())
		}
	}
}

// TestRunSitemapsRefusesPrivate: without --allow-private the loopback site
// is not read and only the seed is published.
func TestRunSitemapsRefusesPrivate(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	host := sitemapSite(t, "127.0.0.8")
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--kafka-topic-prefix", kc.TopicPrefix,
		"--crawl-id", "maps", "--seed", "http://" + host + "/", "--sitemaps", "--log-level", "error",
	}
	if err := run(t.Context(), args, strings.NewReader(""), noEnv); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := readDiscovered(t, kc, 1); len(got) != 1 || got[0].msg.Source != crawlv1.Source_SOURCE_SEED {
		t.Errorf("records = %+v, want only the seed", got)
	}
}
