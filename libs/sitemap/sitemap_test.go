package sitemap_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/sitemap"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func date(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

// checkEntries compares entries field by field (Lastmod with Equal, Err
// with errors.Is).
func checkEntries(t *testing.T, got, want []sitemap.Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries %+v, want %d %+v", len(got), got, len(want), want)
	}
	for i, g := range got {
		w := want[i]
		if g.Pos != w.Pos || g.Loc != w.Loc || g.RawLastmod != w.RawLastmod || !g.Lastmod.Equal(w.Lastmod) ||
			g.Priority != w.Priority || g.HasPriority != w.HasPriority ||
			!errors.Is(g.Err, w.Err) || (g.Err == nil) != (w.Err == nil) {
			t.Errorf("entry %d = %+v, want %+v", i, g, w)
		}
	}
}

// urlsetEntries are the entries of testdata/urlset.xml: an entity and
// white space in a <loc>, an <image:loc> that is not the location, the
// precisions of <lastmod>, an invalid one, an entry without <loc>, and a
// <priority> on the first.
var urlsetEntries = []sitemap.Entry{
	{Pos: 1, Loc: "https://example.com/", RawLastmod: "2026-11-01", Lastmod: date(2026, 11, 1, 0, 0), Priority: 1, HasPriority: true},
	{Pos: 2, Loc: "https://example.com/a?x=1&y=2", RawLastmod: "2026-10-31T08:15:00+02:00", Lastmod: date(2026, 10, 31, 6, 15)},
	{Pos: 3, Loc: "https://example.com/no-lastmod"},
	{Pos: 4, Loc: "https://example.com/bad-lastmod", RawLastmod: "yesterday"},
	{Pos: 5, RawLastmod: "2026-01-01", Lastmod: date(2026, 1, 1, 0, 0), Err: sitemap.ErrNoLoc},
}

func TestParseFiles(t *testing.T) {
	tests := []struct {
		file string
		kind sitemap.Kind
		want []sitemap.Entry
	}{
		{"urlset.xml", sitemap.URLSet, urlsetEntries},
		{"urlset.xml.gz", sitemap.URLSet, urlsetEntries},
		{"index.xml", sitemap.Index, []sitemap.Entry{
			{Pos: 1, Loc: "https://example.com/sitemap-posts.xml.gz", RawLastmod: "2026-11-20T10:00:00Z", Lastmod: date(2026, 11, 20, 10, 0)},
			{Pos: 2, Loc: "https://example.com/sitemap-pages.xml"},
		}},
		// A comment, a blank line, indentation and trailing spaces.
		{"sitemap.txt", sitemap.URLSet, []sitemap.Entry{
			{Pos: 2, Loc: "https://example.com/one"}, {Pos: 4, Loc: "https://example.com/two"}, {Pos: 5, Loc: "https://example.com/three"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			res, err := sitemap.Parse(bytes.NewReader(readFile(t, tt.file)), sitemap.MaxEntries, sitemap.MaxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind != tt.kind || res.Truncated || res.Cut != nil {
				t.Errorf("kind %v truncated %v cut %v, want %v false nil", res.Kind, res.Truncated, res.Cut, tt.kind)
			}
			checkEntries(t, res.Entries, tt.want)
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		max       int
		kind      sitemap.Kind
		want      []sitemap.Entry
		truncated bool
		cutPos    int // 0: not cut
	}{
		{name: "empty", body: "", kind: sitemap.URLSet},
		{name: "blank and comments", body: "\n  \n# nothing yet\n", kind: sitemap.URLSet},
		{
			name: "text with bom, crlf and a bad line", body: "\uFEFFhttp://h.test/a\r\n\r\nbad\nhttp://h.test/b\n", kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}, {Pos: 3, Loc: "bad", Err: sitemap.ErrNotURL}, {Pos: 4, Loc: "http://h.test/b"}},
		},
		{
			name: "text: leading blank lines count", body: "\n\n \t\nhttp://h.test/a", kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 4, Loc: "http://h.test/a"}},
		},
		{
			name: "text: a byte order mark on a later line", body: "http://h.test/a\n\uFEFFhttp://h.test/b\n", kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}, {Pos: 2, Loc: "http://h.test/b"}},
		},
		{
			name: "text: relative lines are no urls", body: "http://h.test/a\n/b\n", kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}, {Pos: 2, Loc: "/b", Err: sitemap.ErrNotURL}},
		},
		{
			name: "urlset", body: `<urlset><url><loc>http://h.test/x</loc></url></urlset>`, kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}},
		},
		{
			name: "space, bom and xml declaration before the root", kind: sitemap.URLSet,
			body: "\n \uFEFF<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<!-- generated -->\n<URLSET><URL><LOC>http://h.test/x</LOC></URL></URLSET>",
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}},
		},
		{
			name: "cdata, entities and the last of two locs", kind: sitemap.URLSet,
			body: `<urlset><url><loc>http://h.test/old</loc><loc><![CDATA[http://h.test/a?b&c]]>&amp;d</loc></url></urlset>`,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a?b&c&d"}},
		},
		{
			name: "an empty loc", body: `<urlset><url><loc> </loc></url><url><loc>http://h.test/x</loc></url></urlset>`, kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Err: sitemap.ErrNoLoc}, {Pos: 2, Loc: "http://h.test/x"}},
		},
		{
			name: "index with a relative location", body: `<sitemapindex><sitemap><loc>s2.xml</loc></sitemap></sitemapindex>`, kind: sitemap.Index,
			want: []sitemap.Entry{{Pos: 1, Loc: "s2.xml"}},
		},
		{
			name: "cut-off xml keeps the start", body: `<urlset><url><loc>http://h.test/x</loc></url><url><loc>http://h.te`, kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}}, cutPos: 2,
		},
		{
			name: "malformed xml keeps the start", kind: sitemap.URLSet,
			body: `<urlset><url><loc>http://h.test/x</loc></url><url><loc>http://h.test/y</loc></url><url><loc a="1>x</loc></url></urlset>`,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}, {Pos: 2, Loc: "http://h.test/y"}}, cutPos: 3,
		},
		{
			name: "xml truncated at the max", max: 2, kind: sitemap.URLSet, truncated: true,
			body: `<urlset><url><loc>http://h.test/1</loc></url><url></url><url><loc>http://h.test/3</loc></url></urlset>`,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/1"}, {Pos: 2, Err: sitemap.ErrNoLoc}},
		},
		{
			name: "xml with exactly the max", max: 1, kind: sitemap.URLSet,
			body: `<urlset><url><loc>http://h.test/1</loc></url></urlset>`,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/1"}},
		},
		{
			name: "text truncated at the max", body: "http://h.test/1\nhttp://h.test/2\n# c\nhttp://h.test/3\n", max: 2, kind: sitemap.URLSet,
			want: []sitemap.Entry{{Pos: 1, Loc: "http://h.test/1"}, {Pos: 2, Loc: "http://h.test/2"}}, truncated: true,
		},
		{
			name: "max 0", body: "http://h.test/1\n", max: -1, kind: sitemap.URLSet, truncated: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.max
			if limit == 0 {
				limit = 100
			}
			res, err := sitemap.Parse(strings.NewReader(tt.body), limit, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind != tt.kind || res.Truncated != tt.truncated {
				t.Errorf("kind %v truncated %v, want %v %v", res.Kind, res.Truncated, tt.kind, tt.truncated)
			}
			if (res.Cut != nil) != (tt.cutPos != 0) || res.CutPos != tt.cutPos {
				t.Errorf("cut %v at %d, want at %d", res.Cut, res.CutPos, tt.cutPos)
			}
			checkEntries(t, res.Entries, tt.want)
		})
	}
}

// TestParseRejects: documents that are no sitemap, or that cannot be read
// at all, are an error.
func TestParseRejects(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantErr  error // nil: any error but ErrNotSitemap
		maxBytes int64 // 0: MaxBytes
	}{
		{"rss", `<?xml version="1.0"?><rss><channel><item><link>https://x/</link></item></channel></rss>`, sitemap.ErrNotSitemap, 0},
		{"html", "<!DOCTYPE html>\n<html><body>hi</body></html>", sitemap.ErrNotSitemap, 0},
		{"prose", "this is not a list of urls\n\nnor is this\n", sitemap.ErrNotSitemap, 0},
		{"empty xml", `<?xml version="1.0"?>`, sitemap.ErrNotSitemap, 0},
		{"broken before the root", `<?xml version="1.0"?><`, nil, 0},
		{"broken gzip", "\x1f\x8bnot gzip", nil, 0},
		{"gzip magic only", "\x1f\x8b", nil, 0},
		{"gzip stream broken at once", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x07", nil, 0},
		{"too large before the document", strings.Repeat(" \n", 100) + "http://h.test/", sitemap.ErrTooLarge, 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxBytes := tt.maxBytes
			if maxBytes == 0 {
				maxBytes = sitemap.MaxBytes
			}
			res, err := sitemap.Parse(strings.NewReader(tt.body), sitemap.MaxEntries, maxBytes)
			if err == nil {
				t.Fatalf("parsed without error: %+v", res)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && errors.Is(err, sitemap.ErrNotSitemap) {
				t.Errorf("err = %v, want an error other than ErrNotSitemap", err)
			}
			if res.Kind != 0 || len(res.Entries) != 0 {
				t.Errorf("result %+v with error", res)
			}
		})
	}
}

// TestParseMaxEntries: the protocol's cap on a text sitemap, and on a
// gzip XML one.
func TestParseMaxEntries(t *testing.T) {
	var text, xml strings.Builder
	xml.WriteString("<urlset>")
	for i := range sitemap.MaxEntries + 10 {
		fmt.Fprintf(&text, "https://example.com/p%d\n", i)
		fmt.Fprintf(&xml, "<url><loc>https://example.com/p%d</loc></url>", i)
	}
	xml.WriteString("</urlset>")
	for name, body := range map[string][]byte{"text": []byte(text.String()), "xml.gz": gz(t, []byte(xml.String()))} {
		t.Run(name, func(t *testing.T) {
			res, err := sitemap.Parse(bytes.NewReader(body), sitemap.MaxEntries, sitemap.MaxBytes)
			if err != nil || !res.Truncated || len(res.Entries) != sitemap.MaxEntries {
				t.Fatalf("got %d entries truncated %v err %v, want %d true nil", len(res.Entries), res.Truncated, err, sitemap.MaxEntries)
			}
			last := res.Entries[len(res.Entries)-1]
			if want := fmt.Sprintf("https://example.com/p%d", sitemap.MaxEntries-1); last.Loc != want || last.Pos != sitemap.MaxEntries {
				t.Errorf("last entry %+v, want %s at %d", last, want, sitemap.MaxEntries)
			}
		})
	}
}

// TestParseTooLarge: a compression bomb, and plain documents beyond the
// byte cap, stop at the cap with ErrTooLarge and keep the complete
// entries before it.
func TestParseTooLarge(t *testing.T) {
	bomb := gz(t, append([]byte("<urlset><url><loc>http://h.test/x</loc></url>"), bytes.Repeat([]byte(" "), 4<<20)...))
	if len(bomb) > 16<<10 {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	tests := []struct {
		name     string
		body     []byte
		maxBytes int64
		want     []sitemap.Entry
		cutPos   int
	}{
		{"gzip bomb", bomb, 64 << 10, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}}, 2},
		{"gzip within the cap", gz(t, []byte("<urlset><url><loc>http://h.test/x</loc></url></urlset>")), 54, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}}, 0},
		{"gzip one byte over", gz(t, []byte("<urlset><url><loc>http://h.test/x</loc></url></urlset>")), 53, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/x"}}, 2},
		// The cap falls inside line 2: it is incomplete and dropped.
		{"text", []byte("http://h.test/a\nhttp://h.test/bbbbbbbb\nhttp://h.test/c\n"), 20, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}}, 2},
		// The cap falls right before a line ending: line 1 is incomplete.
		{"text before a line end", []byte("http://h.test/a\nhttp://h.test/b\n"), 15, nil, 1},
		// The cap falls right after a line ending: line 2 is whole.
		{"text at a line end", []byte("http://h.test/a\nhttp://h.test/b\nhttp://h.test/c\n"), 32, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}, {Pos: 2, Loc: "http://h.test/b"}}, 3},
		{"text within the cap", []byte("http://h.test/a\nhttp://h.test/b"), 31, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/a"}, {Pos: 2, Loc: "http://h.test/b"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sitemap.Parse(bytes.NewReader(tt.body), 100, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cutPos == 0 && res.Cut != nil {
				t.Fatalf("cut %v", res.Cut)
			}
			if tt.cutPos != 0 && (!errors.Is(res.Cut, sitemap.ErrTooLarge) || res.CutPos != tt.cutPos) {
				t.Errorf("cut %v at %d, want ErrTooLarge at %d", res.Cut, res.CutPos, tt.cutPos)
			}
			checkEntries(t, res.Entries, tt.want)
		})
	}
}

// TestParseDamagedGzip: a gzip stream cut in the middle keeps the entries
// it delivered, reported as cut.
func TestParseDamagedGzip(t *testing.T) {
	var b strings.Builder
	b.WriteString("<urlset>")
	for i := range 2000 {
		fmt.Fprintf(&b, "<url><loc>http://h.test/%d</loc><lastmod>2026-01-%02d</lastmod></url>", i, i%28+1)
	}
	b.WriteString("</urlset>")
	full := gz(t, []byte(b.String()))
	res, err := sitemap.Parse(bytes.NewReader(full[:len(full)/2]), sitemap.MaxEntries, sitemap.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if res.Cut == nil || res.CutPos != len(res.Entries)+1 {
		t.Errorf("cut %v at %d with %d entries, want a cut after them", res.Cut, res.CutPos, len(res.Entries))
	}
	if len(res.Entries) == 0 || len(res.Entries) >= 2000 {
		t.Fatalf("%d entries from half the stream", len(res.Entries))
	}
	for i, e := range res.Entries {
		if e.Loc != fmt.Sprintf("http://h.test/%d", i) || e.Lastmod.IsZero() || e.Err != nil {
			t.Fatalf("entry %d = %+v", i, e)
		}
	}
}

// TestParseTooLong: an over-long location is an entry with ErrTooLong,
// and reading goes on after it.
func TestParseTooLong(t *testing.T) {
	long := "http://h.test/" + strings.Repeat("a", sitemap.MaxLocBytes)
	tests := []struct {
		name string
		body string
	}{
		{"text", "http://h.test/1\n" + long + "\nhttp://h.test/3\n"},
		{"xml", "<urlset><url><loc>http://h.test/1</loc></url><url><loc>" + long + "</loc></url><url><loc>http://h.test/3</loc></url></urlset>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sitemap.Parse(strings.NewReader(tt.body), 10, sitemap.MaxBytes)
			if err != nil || res.Cut != nil {
				t.Fatalf("err %v cut %v", err, res.Cut)
			}
			checkEntries(t, res.Entries, []sitemap.Entry{
				{Pos: 1, Loc: "http://h.test/1"}, {Pos: 2, Loc: long[:sitemap.MaxLocBytes], Err: sitemap.ErrTooLong}, {Pos: 3, Loc: "http://h.test/3"},
			})
		})
	}
	// A line of exactly MaxLocBytes, with a CRLF ending, is not too long;
	// one byte more is.
	exact := long[:sitemap.MaxLocBytes]
	res, err := sitemap.Parse(strings.NewReader(exact+"\r\n"+exact+"a\n"), 10, sitemap.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, res.Entries, []sitemap.Entry{{Pos: 1, Loc: exact}, {Pos: 2, Loc: exact, Err: sitemap.ErrTooLong}})
}

func TestParseLastmod(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{in: "2026", want: date(2026, 1, 1, 0, 0)},
		{in: "2026-11", want: date(2026, 11, 1, 0, 0)},
		{in: "2026-11-20", want: date(2026, 11, 20, 0, 0)},
		{in: "2026-11-20T10:30+01:00", want: date(2026, 11, 20, 9, 30)},
		{in: "2026-11-20T10:30Z", want: date(2026, 11, 20, 10, 30)},
		{in: "2026-11-20T10:30:15Z", want: time.Date(2026, 11, 20, 10, 30, 15, 0, time.UTC)},
		{in: "2026-11-20T10:30:15.25-02:00", want: time.Date(2026, 11, 20, 12, 30, 15, 250_000_000, time.UTC)},
		{in: "2026-11-20T10:30:15", want: time.Date(2026, 11, 20, 10, 30, 15, 0, time.UTC)},
		{in: "yesterday", wantErr: true},
		{in: "", wantErr: true},
		{in: "2026-13-01", wantErr: true},
		{in: "20261120", wantErr: true},
		{in: "2026-11-20T10:30:15." + strings.Repeat("0", 60) + "Z", wantErr: true}, // beyond any W3C datetime
	}
	for _, tt := range tests {
		got, err := sitemap.ParseLastmod(tt.in)
		if (err != nil) != tt.wantErr || !got.Equal(tt.want) || got.Location() != time.UTC {
			t.Errorf("ParseLastmod(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestParsePriorities: an entry's <priority> is read as a number from 0 to
// 1; out of range it is clamped; what is no number leaves the entry
// without a priority (not 0); a sitemap index's entries have none.
func TestParsePriorities(t *testing.T) {
	doc := `<urlset>
<url><loc>http://h.test/a</loc><priority>0.8</priority></url>
<url><loc>http://h.test/b</loc><priority> 0.0 </priority></url>
<url><loc>http://h.test/c</loc></url>
<url><loc>http://h.test/d</loc><priority>high</priority></url>
<url><loc>http://h.test/e</loc><priority>1.5</priority></url>
<url><loc>http://h.test/f</loc><priority>-0.3</priority></url>
<url><loc>http://h.test/g</loc><priority></priority></url>
<url><loc>http://h.test/h</loc><priority>NaN</priority></url>
<url><loc>http://h.test/i</loc><priority>0.` + strings.Repeat("5", 100) + `</priority></url>
</urlset>`
	res, err := sitemap.Parse(strings.NewReader(doc), 100, sitemap.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, res.Entries, []sitemap.Entry{
		{Pos: 1, Loc: "http://h.test/a", Priority: 0.8, HasPriority: true},
		{Pos: 2, Loc: "http://h.test/b", Priority: 0, HasPriority: true}, // 0 written: not absent
		{Pos: 3, Loc: "http://h.test/c"},
		{Pos: 4, Loc: "http://h.test/d"},
		{Pos: 5, Loc: "http://h.test/e", Priority: 1, HasPriority: true},
		{Pos: 6, Loc: "http://h.test/f", Priority: 0, HasPriority: true},
		{Pos: 7, Loc: "http://h.test/g"},
		{Pos: 8, Loc: "http://h.test/h"},
		{Pos: 9, Loc: "http://h.test/i"}, // longer than any priority
	})

	res, err = sitemap.Parse(strings.NewReader(`<sitemapindex><sitemap><loc>http://h.test/s.xml</loc><priority>0.9</priority></sitemap></sitemapindex>`), 10, sitemap.MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, res.Entries, []sitemap.Entry{{Pos: 1, Loc: "http://h.test/s.xml"}})
}

func TestParsePriority(t *testing.T) {
	tests := []struct {
		in      string
		want    float32
		wantErr bool
	}{
		{in: "0.5", want: 0.5},
		{in: "1", want: 1},
		{in: "1.0", want: 1},
		{in: "0", want: 0},
		{in: ".25", want: 0.25},
		{in: "1e-1", want: 0.1},
		{in: "7", want: 1},
		{in: "-2", want: 0},
		{in: "high", wantErr: true},
		{in: "", wantErr: true},
		{in: "0,5", wantErr: true},
		{in: "NaN", wantErr: true},
		{in: "Inf", wantErr: true},
		{in: "-Inf", wantErr: true},
		{in: "1e40", wantErr: true}, // not a float32
	}
	for _, tt := range tests {
		got, err := sitemap.ParsePriority(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParsePriority(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
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
		{"text/plain", "", false},
		{"text/html", "/sitemap.html", false},
		{"text/plain", "/robots.txt", false},
		{"text/plain", "/sitemap/list.txt", false},
		{"application/json", "/x", false},
	}
	for _, tt := range tests {
		if got := sitemap.Is(tt.mediaType, tt.path); got != tt.want {
			t.Errorf("Is(%q, %q) = %v, want %v", tt.mediaType, tt.path, got, tt.want)
		}
	}
}

func TestRobotsSitemaps(t *testing.T) {
	base, _ := url.Parse("http://h.test/robots.txt")
	got := sitemap.RobotsSitemaps(readFile(t, "robots.txt"), base)
	want := []sitemap.Entry{
		{Pos: 3, Loc: "http://h.test/sitemap_index.xml"},
		{Pos: 4, Loc: "http://other.test/news.txt"},
		{Pos: 5, Loc: "ftp://h.test/nope.xml", Err: sitemap.ErrSitemapURL},
		{Pos: 7, Loc: "http://h.test/s.xml"},
		{Pos: 8, Err: sitemap.ErrSitemapURL},
	}
	checkEntries(t, got, want)

	long := "Sitemap: http://h.test/" + strings.Repeat("a", sitemap.MaxLocBytes) + "\nSitemap: http://h.test/after.xml"
	checkEntries(t, sitemap.RobotsSitemaps([]byte(long), base), []sitemap.Entry{
		{Pos: 1, Loc: ("http://h.test/" + strings.Repeat("a", sitemap.MaxLocBytes))[:sitemap.MaxLocBytes-len("Sitemap: ")], Err: sitemap.ErrTooLong},
		{Pos: 2, Loc: "http://h.test/after.xml"},
	})
}

func TestResolve(t *testing.T) {
	base, _ := url.Parse("http://h.test/dir/robots.txt")
	tests := []struct {
		base *url.URL
		ref  string
		want string // "": an error
	}{
		{base, "s2.xml", "http://h.test/dir/s2.xml"},
		{base, "/s.xml#top", "http://h.test/s.xml"},
		{base, "HTTPS://Other.test/s.xml", "https://Other.test/s.xml"},
		{nil, "http://h.test/s.xml", "http://h.test/s.xml"},
		{nil, "s.xml", ""},
		{nil, "mailto:x@y", ""},
		{base, "ftp://h.test/s.xml", ""},
		{base, "", ""},
		{base, "http://[::1", ""},
		{base, "//::", ""},
		{base, "//:80/s.xml", ""},
	}
	for _, tt := range tests {
		got, err := sitemap.Resolve(tt.base, tt.ref)
		if got != tt.want || (err != nil) != (tt.want == "") || (err != nil && !errors.Is(err, sitemap.ErrSitemapURL)) {
			t.Errorf("Resolve(%v, %q) = %q, %v; want %q", tt.base, tt.ref, got, err, tt.want)
		}
	}
}

// FuzzParse checks, for any input, that Parse never panics; that an error
// comes with an empty result; that there are at most maxEntries entries, at
// increasing positions, each location at most MaxLocBytes; that Truncated
// means maxEntries were kept and nothing was cut; and that a usable
// location of a text sitemap has "://". RobotsSitemaps never panics and
// resolves every usable line to an absolute http(s) URL without fragment.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"urlset.xml", "urlset.xml.gz", "index.xml", "sitemap.txt", "robots.txt"} {
		f.Add(readFile(f, name))
	}
	f.Add([]byte("\uFEFFhttp://h.test/a\r\n\r\nbad\nhttp://h.test/b\n"))
	f.Add([]byte(`<urlset><url><loc>http://h.test/x</loc></url><url><loc>http://h.te`))
	f.Add([]byte(`<sitemapindex><sitemap><loc>s2.xml</loc><lastmod>2026-11</lastmod></sitemap></sitemapindex>`))
	f.Add([]byte(`<urlset><url><loc>http://h.test/p</loc><priority>1.5</priority></url><url><loc>x</loc><priority>no</priority></url></urlset>`))
	f.Add(gz(f, []byte("http://h.test/1\nhttp://h.test/2\nhttp://h.test/3\nhttp://h.test/4\n")))
	const maxEntries = 3
	base, _ := url.Parse("http://h.test/robots.txt")
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := sitemap.Parse(bytes.NewReader(body), maxEntries, 4<<10)
		if err != nil {
			if res.Kind != 0 || res.Entries != nil || res.Truncated || res.Cut != nil {
				t.Fatalf("error %v with result %+v", err, res)
			}
		} else if res.Kind != sitemap.URLSet && res.Kind != sitemap.Index {
			t.Fatalf("kind %v", res.Kind)
		}
		if len(res.Entries) > maxEntries {
			t.Fatalf("%d entries, max %d", len(res.Entries), maxEntries)
		}
		if res.Truncated && (len(res.Entries) != maxEntries || res.Cut != nil) {
			t.Fatalf("truncated with %d entries, cut %v", len(res.Entries), res.Cut)
		}
		if (res.Cut == nil) != (res.CutPos == 0) {
			t.Fatalf("cut %v at %d", res.Cut, res.CutPos)
		}
		pos := 0
		for _, e := range res.Entries {
			if e.Pos <= pos || len(e.Loc) > sitemap.MaxLocBytes || (e.Err == nil && e.Loc == "") ||
				e.Priority < 0 || e.Priority > 1 || (!e.HasPriority && e.Priority != 0) || (e.HasPriority && res.Kind != sitemap.URLSet) {
				t.Fatalf("entry %+v after position %d", e, pos)
			}
			pos = e.Pos
		}
		for _, e := range sitemap.RobotsSitemaps(body, base) {
			if e.Err != nil {
				continue
			}
			u, err := url.Parse(e.Loc)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
				t.Fatalf("robots.txt sitemap %q", e.Loc)
			}
		}
	})
}
