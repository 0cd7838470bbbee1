package keywords_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/services/seeder/internal/keywords"
)

func TestQueries(t *testing.T) {
	tests := []struct {
		name    string
		mode    string
		kw      []string
		groups  [][]string
		size    int
		want    []string
		wantErr error
	}{
		{name: "each", kw: []string{" a ", "b  c", "", "a"}, want: []string{"a", "b c"}},
		{name: "combinations of 2", mode: keywords.ModeCombinations, kw: []string{"a", "b", "c"}, size: 2,
			want: []string{"a", "b", "c", "a b", "a c", "b c"}},
		{name: "multi-word keywords", mode: keywords.ModeCombinations, kw: []string{"a b", "c"}, size: 5,
			want: []string{"a b", "c", "a b c"}},
		{name: "combinations of 3", mode: keywords.ModeCombinations, kw: []string{"a", "b", "c"}, size: 3,
			want: []string{"a", "b", "c", "a b", "a c", "b c", "a b c"}},
		{name: "product", mode: keywords.ModeProduct, groups: [][]string{{"cheap", "used"}, {}, {"car", "bike"}},
			want: []string{"cheap car", "cheap bike", "used car", "used bike"}},
		{name: "no keywords", want: nil, wantErr: keywords.ErrNoKeywords},
		{name: "empty groups", mode: keywords.ModeProduct, groups: [][]string{{" "}}, wantErr: keywords.ErrNoKeywords},
		{name: "unknown mode", mode: "zip", kw: []string{"a"}, wantErr: keywords.ErrUnknownMode},
		{name: "too many", mode: keywords.ModeProduct, groups: [][]string{words(100), words(101)}, wantErr: keywords.ErrTooMany},
		{name: "too many combinations", mode: keywords.ModeCombinations, kw: words(60), size: 3, wantErr: keywords.ErrTooMany},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := keywords.Queries(tt.mode, tt.kw, tt.groups, tt.size)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("queries %q, want %q", got, tt.want)
			}
		})
	}
}

func words(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.Repeat("w", i+1)
	}
	return out
}

func TestPresets(t *testing.T) {
	tests := []struct {
		engine string
		page   int
		want   string
	}{
		{"google", 2, "https://www.google.com/search?q=caf%C3%A9+cr%C3%A8me&start=10"},
		{"bing", 3, "https://www.bing.com/search?q=caf%C3%A9+cr%C3%A8me&first=21"},
		{"baidu", 1, "https://www.baidu.com/s?wd=caf%C3%A9+cr%C3%A8me&pn=0"},
		{"DuckDuckGo", 2, "https://html.duckduckgo.com/html/?q=caf%C3%A9+cr%C3%A8me&s=30"},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			tmpl, ok := keywords.Preset(tt.engine)
			if !ok {
				t.Fatalf("no preset %s", tt.engine)
			}
			if err := tmpl.Validate(); err != nil {
				t.Fatal(err)
			}
			pages := keywords.Expand([]string{"café crème"}, []keywords.Template{tmpl}, 3)
			if got := pages[tt.page-1]; got.URL != tt.want || got.Engine != strings.ToLower(tt.engine) || got.Page != tt.page {
				t.Errorf("page %d = %+v, want %s", tt.page, got, tt.want)
			}
		})
	}
}

func TestTemplateValidate(t *testing.T) {
	tests := []struct {
		name string
		t    keywords.Template
		ok   bool
	}{
		{"ok", keywords.Template{Name: "x", URL: "http://127.0.0.2/s?q={query}&p={page0}"}, true},
		{"no name", keywords.Template{URL: "http://127.0.0.2/s?q={query}"}, false},
		{"no query", keywords.Template{Name: "x", URL: "http://127.0.0.2/s?p={page}"}, false},
		{"unknown placeholder", keywords.Template{Name: "x", URL: "http://127.0.0.2/s?q={query}&l={lang}"}, false},
		{"relative", keywords.Template{Name: "x", URL: "/s?q={query}"}, false},
		{"not http", keywords.Template{Name: "x", URL: "ftp://h/{query}"}, false},
		{"negative per page", keywords.Template{Name: "x", URL: "http://h/{query}", PerPage: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.t.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

var slugRE = regexp.MustCompile(`[^a-z0-9]`)

// TestExpandAgainstFakeEngine expands keywords into result-page URLs of a
// fake engine on a loopback address that serves the fixture result pages
// in testdata/engine (named by query slug and offset), and checks that
// every generated URL is answered by its fixture (the engine decoded the
// query and the offset we meant) and that every fixture was asked for.
func TestExpandAgainstFakeEngine(t *testing.T) {
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, start := r.URL.Query().Get("q"), r.URL.Query().Get("start")
		if r.URL.Path != "/search" || q == "" || start == "" {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, filepath.Join("testdata", "engine", slugRE.ReplaceAllString(q, "_")+"-"+start+".html"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	queries, err := keywords.Queries(keywords.ModeCombinations, []string{"golang", "c++ & rust"}, nil, 2)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := keywords.Template{Name: "fake", URL: srv.URL + "/search?q={query}&start={offset}", PerPage: 10}
	if err := tmpl.Validate(); err != nil {
		t.Fatal(err)
	}
	pages := keywords.Expand(queries, []keywords.Template{tmpl}, 2)
	var served []string
	for _, p := range pages {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s (query %q page %d): status %d", p.URL, p.Query, p.Page, resp.StatusCode)
			continue
		}
		offset := map[int]string{1: "0", 2: "10"}[p.Page]
		if want := "Results for " + p.Query + " from " + offset + "<"; !strings.Contains(string(body), want) {
			t.Errorf("%s: body lacks %q", p.URL, want)
		}
		if p.Engine != "fake" {
			t.Errorf("%s: engine %q", p.URL, p.Engine)
		}
		served = append(served, slugRE.ReplaceAllString(p.Query, "_")+"-"+offset+".html")
	}
	fixtures, err := os.ReadDir(filepath.Join("testdata", "engine"))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, f := range fixtures {
		all = append(all, f.Name())
	}
	sort.Strings(served)
	if strings.Join(served, ",") != strings.Join(all, ",") {
		t.Errorf("pages asked for %v, fixtures %v", served, all)
	}
}

func FuzzTemplate(f *testing.F) {
	f.Add("http://127.0.0.2/s?q={query}&p={page}", "c++ & go")
	f.Add("{query}{", "")
	f.Fuzz(func(t *testing.T, url, query string) {
		tmpl := keywords.Template{Name: "f", URL: url}
		if tmpl.Validate() != nil {
			return
		}
		for _, p := range keywords.Expand([]string{query}, []keywords.Template{tmpl}, 2) {
			if p.URL == "" {
				t.Errorf("empty URL from %q", url)
			}
		}
	})
}
