package sitemap_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/parser/internal/sitemap"
)

func TestParse(t *testing.T) {
	urlset := []sitemap.Entry{
		{URL: "https://example.com/", LastMod: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{URL: "https://example.com/a?x=1&y=2", LastMod: time.Date(2026, 10, 31, 6, 15, 0, 0, time.UTC)},
		{URL: "https://example.com/no-lastmod"},
		{URL: "https://example.com/bad-lastmod"},
	}
	tests := []struct {
		file    string
		kind    sitemap.Kind
		want    []sitemap.Entry
		wantErr error
	}{
		{"urlset.xml", sitemap.URLSet, urlset, nil},
		{"urlset.xml.gz", sitemap.URLSet, urlset, nil},
		{"index.xml", sitemap.Index, []sitemap.Entry{
			{URL: "https://example.com/sitemap-posts.xml.gz", LastMod: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)},
			{URL: "https://example.com/sitemap-pages.xml"},
		}, nil},
		{"sitemap.txt", sitemap.URLSet, []sitemap.Entry{
			{URL: "https://example.com/one"}, {URL: "https://example.com/two"}, {URL: "https://example.com/three"},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			kind, got, truncated, err := sitemap.Parse(body)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if kind != tt.kind || truncated {
				t.Errorf("kind %v truncated %v, want %v false", kind, truncated, tt.kind)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d entries %v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i].URL != tt.want[i].URL || !got[i].LastMod.Equal(tt.want[i].LastMod) {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	tests := map[string]string{
		"rss":         `<?xml version="1.0"?><rss><channel><item><link>https://x/</link></item></channel></rss>`,
		"html":        `<html><body>hi</body></html>`,
		"prose":       "this is not a list of urls\n",
		"empty xml":   `<?xml version="1.0"?>`,
		"broken gzip": "\x1f\x8bnot gzip",
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			if _, _, _, err := sitemap.Parse([]byte(body)); err == nil {
				t.Error("parsed without error")
			}
		})
	}
}

func TestParseCaps(t *testing.T) {
	var b strings.Builder
	for range sitemap.MaxEntries + 10 {
		b.WriteString("https://example.com/p\n")
	}
	_, got, truncated, err := sitemap.Parse([]byte(b.String()))
	if err != nil || !truncated || len(got) != sitemap.MaxEntries {
		t.Errorf("got %d entries truncated %v err %v, want %d true nil", len(got), truncated, err, sitemap.MaxEntries)
	}
}

func TestIs(t *testing.T) {
	tests := []struct {
		mediaType, path string
		want            bool
	}{
		{"application/xml", "/feed", true},
		{"text/xml", "/anything.xml", true},
		{"application/x-gzip", "/sitemap-posts.xml.gz", true},
		{"text/plain", "/sitemap.txt", true},
		{"application/octet-stream", "/Sitemap_Index.XML", true},
		{"text/html", "/sitemap.html", false},
		{"text/plain", "/robots.txt", false},
		{"application/json", "/x", false},
	}
	for _, tt := range tests {
		if got := sitemap.Is(tt.mediaType, tt.path); got != tt.want {
			t.Errorf("Is(%q, %q) = %v, want %v", tt.mediaType, tt.path, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"urlset.xml", "index.xml", "sitemap.txt", "urlset.xml.gz"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, entries, _, err := sitemap.Parse(body)
		if err != nil && len(entries) > 0 {
			t.Errorf("error %v with %d entries", err, len(entries))
		}
		if len(entries) > sitemap.MaxEntries {
			t.Errorf("%d entries", len(entries))
		}
	})
}
