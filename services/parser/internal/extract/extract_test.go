package extract_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// pageURL is the URL every testdata page is parsed as.
const pageURL = "https://Example.com/dir/sub/page.html?q=1#ignored"

// golden is the recorded form of a Result. Text longer than
// maxGoldenText is recorded as its head, length and hash, to keep golden
// files small.
type golden struct {
	Title         string         `json:"title"`
	Description   string         `json:"description,omitempty"`
	Canonical     string         `json:"canonical,omitempty"`
	Language      string         `json:"language"`
	NoFollow      bool           `json:"nofollow"`
	NoIndex       bool           `json:"noindex"`
	TextTruncated bool           `json:"text_truncated"`
	TextBytes     int            `json:"text_bytes"`
	Text          string         `json:"text,omitempty"`
	TextHead      string         `json:"text_head,omitempty"`
	TextSHA256    string         `json:"text_sha256,omitempty"`
	Links         []extract.Link `json:"links"`
	Dropped       map[string]int `json:"dropped,omitempty"`
}

const maxGoldenText = 16 << 10

func toGolden(r extract.Result) golden {
	g := golden{
		Title: r.Title, Description: r.Description, Canonical: r.Canonical, Language: r.Language, NoFollow: r.NoFollow, NoIndex: r.NoIndex,
		TextTruncated: r.TextTruncated, TextBytes: len(r.Text), Links: r.Links, Dropped: r.Dropped,
	}
	if len(r.Text) <= maxGoldenText {
		g.Text = r.Text
	} else {
		sum := sha256.Sum256([]byte(r.Text))
		g.TextHead = r.Text[:strings.LastIndexByte(r.Text[:1024], ' ')]
		g.TextSHA256 = hex.EncodeToString(sum[:])
	}
	return g
}

func TestExtractGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.html"))
	if err != nil {
		t.Fatal(err)
	}
	type testCase struct {
		name string
		body []byte
	}
	var tests []testCase
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, testCase{strings.TrimSuffix(filepath.Base(f), ".html"), body})
	}
	// GBK pages are stored as served and transcoded to UTF-8 as the
	// fetcher does before publishing them.
	gbkFiles, err := filepath.Glob(filepath.Join("testdata", "*.html.gbk"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gbkFiles {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		body, err := simplifiedchinese.GBK.NewDecoder().Bytes(raw)
		if err != nil {
			t.Fatalf("transcode %s: %v", f, err)
		}
		tests = append(tests, testCase{strings.TrimSuffix(filepath.Base(f), ".html.gbk"), body})
	}
	// The large page is generated rather than stored (about 1.2 MB).
	tests = append(tests, testCase{"large", largePage(1200<<10, 1500)})

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := extract.Extract(pageURL, tt.body, extract.Options{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			checkInvariants(t, res, extract.Options{}.MaxOutlinks, extract.DefaultMaxTextBytes)
			got, err := json.MarshalIndent(toGolden(res), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
			}
		})
	}
}

// checkInvariants holds for every page: valid UTF-8 everywhere, caps
// respected, every link canonical, unique, and not the page itself.
func checkInvariants(t *testing.T, res extract.Result, maxLinks, maxText int) {
	t.Helper()
	if maxLinks <= 0 {
		maxLinks = extract.DefaultMaxOutlinks
	}
	if len(res.Text) > maxText {
		t.Errorf("text is %d bytes, cap %d", len(res.Text), maxText)
	}
	if len(res.Links) > maxLinks {
		t.Errorf("%d links, cap %d", len(res.Links), maxLinks)
	}
	for _, s := range []string{res.Title, res.Text, res.Language} {
		if !utf8.ValidString(s) {
			t.Errorf("invalid UTF-8: %q", s)
		}
	}
	if res.Text != strings.TrimSpace(res.Text) || strings.Contains(res.Text, "  ") || strings.Contains(res.Text, "\n\n") {
		t.Errorf("text whitespace not normalized: %q", res.Text)
	}
	if res.NoFollow && len(res.Links) > 0 {
		t.Errorf("nofollow page has %d links", len(res.Links))
	}
	seen := make(map[string]bool)
	for _, l := range res.Links {
		c, err := urlcanon.Canonicalize(l.URL)
		if err != nil || c != l.URL {
			t.Errorf("link %q not canonical: %q, %v", l.URL, c, err)
		}
		if k := urlcanon.Key(l.URL); seen[k] {
			t.Errorf("duplicate link %q (dedup key %q)", l.URL, k)
		} else {
			seen[k] = true
		}
		if !utf8.ValidString(l.Anchor) || !utf8.ValidString(l.Rel) {
			t.Errorf("invalid UTF-8 in link %+v", l)
		}
	}
}

// TestLinksOneResourceOneLink: the spellings of one resource on a page
// (empty query, fragment, dot segments, escapes, scheme case) yield one
// link, the first spelling; the page itself, spelled any way, is no link.
func TestLinksOneResourceOneLink(t *testing.T) {
	page := `<html><body>
<a href="/p/3?">first</a> <a href="/p/3">plain</a> <a href="/x/../p/3#c">dots</a>
<a href="HTTP://a.example/p/%33">escaped</a> <a href="/p/3?&">amp</a>
<a href="/here?">self with empty query</a> <a href="#top">self fragment</a>
<a href="/p/4">other</a></body></html>`
	res, err := extract.Extract("http://a.example/here", []byte(page), extract.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range res.Links {
		got = append(got, l.URL)
	}
	want := []string{"http://a.example/p/3?", "http://a.example/p/4"}
	if !slices.Equal(got, want) {
		t.Errorf("links %q, want %q", got, want)
	}
	if res.Dropped[extract.DropDuplicate] != 4 || res.Dropped[extract.DropSelf] != 2 {
		t.Errorf("dropped %v, want 4 duplicate and 2 self", res.Dropped)
	}
}

// largePage generates a deterministic page of about size bytes with links
// distinct links, mixing ASCII and multi-byte text so that the text cap
// falls inside multi-byte runs.
func largePage(size, links int) []byte {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html><html lang=\"en\"><head><title>Large page</title></head><body>\n")
	words := []string{"crawler", "分布式", "frontier", "网络爬虫", "politeness", "партиция", "fetch", "😀emoji"}
	for i := 0; b.Len() < size; i++ {
		b.WriteString("<p>")
		for j := 0; j < 40; j++ {
			b.WriteString(words[(i+j)%len(words)])
			b.WriteByte(' ')
		}
		b.WriteString("</p>\n")
		if i < links {
			fmt.Fprintf(&b, "<a href=\"/large/%d.html\">link %d</a>\n", i, i)
		}
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

func TestExtractOptions(t *testing.T) {
	page := largePage(64<<10, 100)
	tests := []struct {
		name        string
		opts        extract.Options
		wantLinks   int
		wantOverCap int
		maxText     int
		truncated   bool
	}{
		{name: "defaults", opts: extract.Options{}, wantLinks: 100, maxText: extract.DefaultMaxTextBytes},
		{name: "link cap", opts: extract.Options{MaxOutlinks: 7}, wantLinks: 7, wantOverCap: 93, maxText: extract.DefaultMaxTextBytes},
		{name: "text cap ascii boundary", opts: extract.Options{MaxTextBytes: 100}, wantLinks: 100, maxText: 100, truncated: true},
		{name: "text cap inside rune", opts: extract.Options{MaxTextBytes: 11}, wantLinks: 100, maxText: 11, truncated: true},
		{name: "text cap one byte", opts: extract.Options{MaxTextBytes: 1}, wantLinks: 100, maxText: 1, truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := extract.Extract(pageURL, page, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res, tt.opts.MaxOutlinks, tt.maxText)
			if len(res.Links) != tt.wantLinks {
				t.Errorf("got %d links, want %d", len(res.Links), tt.wantLinks)
			}
			if got := res.Dropped[extract.DropOverCap]; got != tt.wantOverCap {
				t.Errorf("dropped over_cap = %d, want %d", got, tt.wantOverCap)
			}
			if res.TextTruncated != tt.truncated {
				t.Errorf("TextTruncated = %v, want %v", res.TextTruncated, tt.truncated)
			}
			if tt.truncated && len(res.Text) < tt.maxText-utf8.UTFMax {
				t.Errorf("truncated text is %d bytes, want close to %d", len(res.Text), tt.maxText)
			}
		})
	}
}

func TestExtractPageURL(t *testing.T) {
	tests := []struct {
		name    string
		pageURL string
		wantErr bool
	}{
		{name: "http", pageURL: "http://example.com/"},
		{name: "relative", pageURL: "/just/a/path", wantErr: true},
		{name: "mailto", pageURL: "mailto:a@example.com", wantErr: true},
		{name: "empty", pageURL: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := extract.Extract(tt.pageURL, []byte(`<a href="x">x</a>`), extract.Options{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

func TestRefreshURL(t *testing.T) {
	tests := []struct {
		content string
		want    string
		ok      bool
	}{
		{"5; url=next.html", "next.html", true},
		{"0;URL='quoted page.html'", "quoted page.html", true},
		{`3 , Url = "dq.html" trailing`, "dq.html", true},
		{"0.5;http://example.com/x", "http://example.com/x", true},
		{"10; urlfoo.html", "urlfoo.html", true},
		{"5", "", false},
		{"; url=x", "", false},
		{"abc; url=x", "", false},
		{"", "", false},
		{"7; url=", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			got, ok := extract.RefreshURL(tt.content)
			if got != tt.want || ok != tt.ok {
				t.Errorf("RefreshURL(%q) = %q, %v; want %q, %v", tt.content, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestParseRobotsDirectives(t *testing.T) {
	tests := []struct {
		content           string
		nofollow, noindex bool
	}{
		{"", false, false},
		{"all", false, false},
		{"index, follow", false, false},
		{"NOINDEX", false, true},
		{"noindex,nofollow", true, true},
		{" nofollow ; noarchive", true, false},
		{"none", true, true},
		{"noindexing, nofollowers", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			f, i := extract.ParseRobotsDirectives(tt.content)
			if f != tt.nofollow || i != tt.noindex {
				t.Errorf("got nofollow=%v noindex=%v, want %v %v", f, i, tt.nofollow, tt.noindex)
			}
		})
	}
}

// FuzzExtract feeds arbitrary bodies to Extract. Invariants: it never panics
// and never errors for a valid page URL; every emitted link is canonical
// (urlcanon.Canonicalize(l) == l) and unique; text and metadata are valid
// UTF-8 within their caps.
func FuzzExtract(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.html"))
	for _, file := range files {
		body, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Add([]byte(`<base href="javascript:x"><a href="\\\\h\\p">x</a><frame src="%zz">`))
	f.Add([]byte(`<a href="http://[::1">x</a><a href="https://xn--/">y</a>`))
	f.Add([]byte(`<link rel="next canonical" href=" ../x\\y "><body background="//h/p"><applet code="C.class" codebase="../cb">`))
	f.Add([]byte(`<meta http-equiv="refresh" content="0; url='  \\\\h\\p  '"><meta http-equiv=refresh content="1;url=">`))
	cache := urlcanon.NewResolveCache(1 << 10) // shared by every input, as by a parser's pages
	f.Fuzz(func(t *testing.T, body []byte) {
		opts := extract.Options{MaxOutlinks: 50, MaxTextBytes: 4096}
		res, err := extract.Extract(pageURL, body, opts)
		if err != nil {
			t.Fatalf("Extract: %v", err)
		}
		checkInvariants(t, res, opts.MaxOutlinks, opts.MaxTextBytes)
		// The resolution cache changes nothing.
		opts.Resolved = cache
		cached, err := extract.Extract(pageURL, body, opts)
		if err != nil || !reflect.DeepEqual(cached.Links, res.Links) || !reflect.DeepEqual(cached.Dropped, res.Dropped) {
			t.Fatalf("with a resolution cache: links %v dropped %v (%v); without: %v %v", cached.Links, cached.Dropped, err, res.Links, res.Dropped)
		}
	})
}

// BenchmarkExtract parses a generated 20 KiB page with 50 links.
func BenchmarkExtract(b *testing.B) {
	page := benchPage(20<<10, 50)
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := extract.Extract(pageURL, page, extract.Options{})
		if err != nil || len(res.Links) != 50 {
			b.Fatalf("links %d, err %v", len(res.Links), err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

// websimPageURL is where testdata/websim_article.html was served: a
// deployments/local websim article (go build ./deployments/local/cmd/websim;
// websim -hosts 3 -first-addr 127.1.9.1; curl /news/2021/story-1.html).
const websimPageURL = "http://127.1.9.1:44315/news/2021/story-1.html"

// BenchmarkExtractWebsim parses a websim article (22 KiB: inline SVG, CSS,
// scripts, JSON-LD, navigation, about 50 links spelled every way).
func BenchmarkExtractWebsim(b *testing.B) {
	page, err := os.ReadFile(filepath.Join("testdata", "websim_article.html"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := extract.Extract(websimPageURL, page, extract.Options{})
		if err != nil || len(res.Links) == 0 {
			b.Fatalf("links %d, err %v", len(res.Links), err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pages/s")
}

// benchPage is a typical article page: navigation, paragraphs, links spread
// over the body.
func benchPage(size, links int) []byte {
	var b bytes.Buffer
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Benchmark article</title>` +
		`<script>window.x = 1;</script><style>p{margin:0}</style></head><body><div class="content">`)
	para := "Web crawlers fetch pages, extract their links and text, and feed the frontier with new URLs. "
	for i := 0; b.Len() < size-300 || i < links; i++ {
		b.WriteString("<p>")
		b.WriteString(para)
		if i < links {
			fmt.Fprintf(&b, `<a href="/articles/%d/page.html?ref=bench" class="link">Article number %d</a> `, i, i)
		}
		b.WriteString(para)
		b.WriteString("</p>\n")
	}
	b.WriteString("</div></body></html>")
	return b.Bytes()
}
