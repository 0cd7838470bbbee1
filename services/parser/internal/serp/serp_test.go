package serp_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

// TestPresets extracts the result links of saved result pages: each preset
// must find exactly the organic results, not ads, navigation, related
// searches, sitelinks or pagination.
func TestPresets(t *testing.T) {
	engines, err := serp.Load("")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		engine  string
		pageURL string
		want    []string
	}{
		{"google", "https://www.google.com/search?q=web+crawler", []string{
			"https://en.wikipedia.org/wiki/Web_crawler",
			"https://www.cloudflare.com/learning/bots/what-is-a-web-crawler/",
			"https://developers.google.com/search/docs/crawling-indexing/googlebot",
		}},
		{"bing", "https://www.bing.com/search?q=web+crawler", []string{
			"https://en.wikipedia.org/wiki/Web_crawler",
			"https://www.techtarget.com/whatis/definition/crawler",
			"https://www.ibm.com/think/topics/web-crawler",
		}},
		{"baidu", "https://www.baidu.com/s?wd=%E7%BD%91%E7%BB%9C%E7%88%AC%E8%99%AB", []string{
			"http://www.baidu.com/link?url=AbCdEf1",
			"http://www.baidu.com/link?url=GhIjKl2",
			"http://www.baidu.com/link?url=MnOpQr3",
			"http://www.baidu.com/link?url=StUvWx4",
		}},
		{"duckduckgo", "https://html.duckduckgo.com/html/?q=web+crawler", []string{
			"https://duckduckgo.com/l/?uddg=https%3A%2F%2Fen.wikipedia.org%2Fwiki%2FWeb_crawler&rut=abc",
			"https://www.scrapingbee.com/blog/crawling-python/",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.engine+".html"))
			if err != nil {
				t.Fatal(err)
			}
			name, results, ok := engines.Match("", tt.pageURL)
			if !ok || name != tt.engine {
				t.Fatalf("Match by url = %q, %v; want %q", name, ok, tt.engine)
			}
			if n, _, ok := engines.Match(tt.engine, "https://unrelated.example/"); !ok || n != tt.engine {
				t.Fatalf("Match by marker = %q, %v", n, ok)
			}
			res, err := extract.Extract(tt.pageURL, body, extract.Options{Results: results})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range res.Links {
				got = append(got, l.URL)
				if l.Anchor == "" {
					t.Errorf("result %s has no anchor text", l.URL)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("results:\n got %q\nwant %q", got, tt.want)
			}
			// Without the selector the same page yields navigation too.
			all, err := extract.Extract(tt.pageURL, body, extract.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(all.Links) <= len(got) {
				t.Errorf("ordinary extraction found %d links, want more than the %d results", len(all.Links), len(got))
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		path    string
		wantErr bool
		marker  string
		url     string
		want    string
	}{
		{name: "presets", path: "", url: "https://www.bing.com/search?q=x", want: "bing"},
		{name: "unknown marker", path: "", marker: "yandex", url: "https://www.bing.com/search?q=x", want: ""},
		{name: "added engine", path: write("add.json", `[{"name":"yandex","url_pattern":"^https://yandex\\.ru/search/","results":"li.serp-item h2 a"}]`),
			url: "https://yandex.ru/search/?text=x", want: "yandex"},
		{name: "preset replaced", path: write("repl.json", `[{"name":"bing","results":"a.x"}]`), url: "https://www.bing.com/search?q=x", want: ""},
		{name: "bad selector", path: write("bad.json", `[{"name":"x","results":"a[[["}]`), wantErr: true},
		{name: "bad regexp", path: write("badre.json", `[{"name":"x","url_pattern":"(","results":"a"}]`), wantErr: true},
		{name: "missing results", path: write("missing.json", `[{"name":"x"}]`), wantErr: true},
		{name: "not json", path: write("nj.json", `{`), wantErr: true},
		{name: "no file", path: filepath.Join(dir, "absent.json"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := serp.Load(tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			name, _, _ := e.Match(tt.marker, tt.url)
			if name != tt.want {
				t.Errorf("Match = %q, want %q", name, tt.want)
			}
		})
	}
}
