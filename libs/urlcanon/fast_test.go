package urlcanon

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nlnwa/whatwg-url/url"
)

// fastBases are canonical bases of the shapes crawls meet: ports, dotted
// quads, queries, deep paths, trailing slashes, IDN, long labels.
var fastBases = []string{
	"http://example.com/",
	"https://www.example.com/news/2021/story-1.html",
	"https://www.example.com/news/2021/story-1.html?page=2&x=y",
	"http://a.example:8080/dir/sub/",
	"https://a.example:80/x",
	"http://127.0.0.1:35325/news/2021/story-31.html",
	"http://10.0.0.1/",
	"http://xn--bcher-kva.de/kategorie/roman?seite=2",
	"http://a/b/c/d;p?q",
	"http://host.example/a%2Fb/c%C3%BC/d?e%20f",
	"http://h.example/a'b/c?",
	"https://h.example/p;jsessionid=ABC123/q",
	"http://a-b.c-d.example/deep/er/and/deeper/still/",
	"http://" + strings.Repeat("a", 63) + ".example/",
	"http://1.example/x",
	// Hosts the parser writes but plainHostPort would not vouch for: an
	// absolute reference to the same authority is still fast.
	"http://a..b/x/",
	"http://-a-.example/",
	"http://a--b.example:81/",
	"http://xn--bcher-kva.de:8080/",
	// Not plainly canonical: NewResolver parses them; the fast path must
	// still agree (or decline).
	"HTTP://Example.COM:80/a/./b/../c",
	"http://example.com./x",
	"http://0x7f.1/a/b",
	"http://127.1/",
	"http://bücher.de/x",
	"http://u:p@example.com/x/y",
	"http://[::1]:8080/a/",
	"ftp://files.example/pub/",
	"http://a/%7euser/",
	"https://h.example",
}

// fastRefs are the spellings crawlers meet, the plain and the tricky.
var fastRefs = []string{
	// plain
	"/", "/a/b?x=1", "/a/b?x=1&y=2", "?x", "?", "?a=b&c=d#f", "a/b", "b.html?x", "b.html#frag",
	"a//b", "/a//b", "a/b/", "~user/", "a;b=c", "/p;jsessionid=0123456789ABCDEF", "!$&'()*+,;=@x",
	"/a?b'c", "/a'b", "a@b", "a:b", "/a:b", "?a:b/c?d", "p?", "-a", "_a", ".a", "..a", "a.", "a..",
	"http://example.com/x", "https://example.com/x", "http://example.com", "http://example.com?q",
	"http://example.com:8080/x", "https://example.com:80/x", "http://example.com:443/x",
	"//other.example/p?q", "//other.example", "//127.0.0.1:9/x", "http://1.2.3.4/", "http://255.255.255.255/",
	"http://a-b.example/", "https://www.example.com/news/", "http://a.example:8080/x",
	// fall back
	"", "#", "#top", "./a", "../a", ".", "..", "a/./b", "a/../b", "a/.", "a/..", "/.", "/..", "/a/..?x",
	"%7Euser", "a%2Fb", "a%2e%2E/b", "?%zz", "/%", "a b", " a", "a\tb", "a\nb", "a\\b", `\\x\y`, "/\\x",
	"HTTP://example.com/x", "Http://example.com/", "http:x", "http:/x", "http:///x", "https:x",
	"mailto:a@example.com", "javascript:void(0)", "data:text/plain,x", "ftp://f.example/x", "x:y", "1:y",
	"http://Example.com/", "http://example.com./", "http://example.com:80/", "https://example.com:443/",
	"http://example.com:080/", "http://example.com:/", "http://example.com:65536/", "http://0x7f.1/",
	"http://127.1/", "http://1.2.3.04/", "http://1.2.3.256/", "http://a.1/", "http://a.09/",
	"http://bücher.de/", "http://xn--bcher-kva.de/", "http://xn--a.example/", "http://a--b.example/",
	"http://-a.example/", "http://a-.example/", "http://a..b/", "http://.a/", "http://u@a/", "http://u:p@a/",
	"http://[::1]/", "http://a..b/", "http://-a-.example/", "http://a--b.example:81/y", "http://xn--bcher-kva.de:8080/", "//a b/", "///x", "/a?b c", "?'", "?a#b c", "a<b", "a>b", "a\"b", "a`b", "a{b}", "a|b",
	"a^b", "a[b]", "ü", "a\x00b", "a\x7fb",
}

// checkResolveFast is the differential test: whenever the fast path
// answers, the WHATWG parser gives the same canonical URL; and Resolve
// (fast path, cache, slow path) gives what the slow path gives, error class
// included. For a plainly canonical string, the parser serializes it as it
// is, and Canonicalize returns it.
func checkResolveFast(t *testing.T, base, ref string) {
	t.Helper()
	checkCanonicalFast(t, base)
	checkCanonicalFast(t, ref)
	bases := []string{base}
	if c, err := Canonicalize(base); err == nil && c != base {
		bases = append(bases, c)
	}
	for _, base := range bases {
		r, err := NewResolver(base)
		if err != nil {
			continue
		}
		slowR, _ := NewResolver(base)
		want, werr := slowR.resolveSlow(ref)
		if got, ok := r.resolveFast(ref); ok && (werr != nil || got != want) {
			t.Fatalf("fast Resolve(%q, %q) = %q; slow = %q, %v", base, ref, got, want, werr)
		}
		for _, c := range []*ResolveCache{nil, NewResolveCache(4)} {
			r, _ := NewResolver(base)
			got, err := r.WithCache(c).Resolve(ref)
			if got != want || !errors.Is(errClass(err), errClass(werr)) {
				t.Fatalf("Resolve(%q, %q) = %q, %v; slow = %q, %v", base, ref, got, err, want, werr)
			}
		}
	}
}

func checkCanonicalFast(t *testing.T, raw string) {
	t.Helper()
	if !canonicalFast(raw) {
		return
	}
	u, err := url.Parse(raw)
	if err != nil || u.Href(true) != raw {
		t.Fatalf("canonicalFast(%q), but the parser serializes it as %q, %v", raw, u.Href(true), err)
	}
	if c, err := canonicalizeSlow(raw); err != nil || c != raw {
		t.Fatalf("canonicalFast(%q), but canonicalizeSlow = %q, %v", raw, c, err)
	}
}

func errClass(err error) error {
	for _, class := range []error{ErrInvalid, ErrScheme, ErrTooLong} {
		if errors.Is(err, class) {
			return class
		}
	}
	return err
}

func TestResolveFastAgrees(t *testing.T) {
	for _, base := range fastBases {
		for _, ref := range fastRefs {
			checkResolveFast(t, base, ref)
		}
	}
}

// TestResolveFastRandom assembles references from the bytes that matter to
// the classification, against every base: a deterministic complement to
// FuzzResolveFast that runs with every go test.
func TestResolveFastRandom(t *testing.T) {
	pieces := []string{
		"a", "Z", "0", "9", "x", "n", "-", "_", "~", ".", "..", "/", "//", "?", "#", ":", ";", "=", "&",
		"'", "@", "!", "%", "%2e", "%41", " ", "\t", "\\", "ü", "http://", "https://", "HTTP://",
		"example.com", "127.0.0.1", ":80", ":443", ":8080", ":0", "xn--", "1", "0x", "[::1]",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		var b strings.Builder
		for range 1 + rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		checkResolveFast(t, fastBases[rng.IntN(len(fastBases))], b.String())
	}
}

// TestResolveFastTaken: the common spellings do take the fast path (a
// regression to "always slow" fails here), with the slow path's result.
func TestResolveFastTaken(t *testing.T) {
	const base = "https://www.example.com/news/2021/story-1.html?x=1"
	tests := []struct {
		name, ref, want string
	}{
		{"root-relative", "/about/team", "https://www.example.com/about/team"},
		{"root-relative with query", "/search?q=go&lang=en", "https://www.example.com/search?q=go&lang=en"},
		{"root", "/", "https://www.example.com/"},
		{"query", "?page=2", "https://www.example.com/news/2021/story-1.html?page=2"},
		{"empty query", "?", "https://www.example.com/news/2021/story-1.html?"},
		{"relative", "story-2.html", "https://www.example.com/news/2021/story-2.html"},
		{"relative with query", "b.html?x=1", "https://www.example.com/news/2021/b.html?x=1"},
		{"relative directory", "sub/dir/", "https://www.example.com/news/2021/sub/dir/"},
		{"fragment cut", "story-2.html#comments", "https://www.example.com/news/2021/story-2.html"},
		{"session path parameter", "p;jsessionid=AB12", "https://www.example.com/news/2021/p;jsessionid=AB12"},
		{"same host absolute", "https://www.example.com/a?b", "https://www.example.com/a?b"},
		{"other host", "http://cdn.example.net/i.png", "http://cdn.example.net/i.png"},
		{"other host empty path", "https://other.example", "https://other.example/"},
		{"other host query only", "https://other.example?q", "https://other.example/?q"},
		{"port", "http://other.example:8080/x", "http://other.example:8080/x"},
		{"https on 80", "https://other.example:80/x", "https://other.example:80/x"},
		{"dotted quad", "http://10.1.2.3/x", "http://10.1.2.3/x"},
		{"scheme-relative", "//static.example.org/site.css", "https://static.example.org/site.css"},
		{"sub-delims", "/a!$&'()*+,;=:@b", "https://www.example.com/a!$&'()*+,;=:@b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResolver(base)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := r.resolveFast(tt.ref)
			if !ok || got != tt.want {
				t.Errorf("resolveFast(%q) = %q, %v; want %q, true", tt.ref, got, ok, tt.want)
			}
			checkResolveFast(t, base, tt.ref)
		})
	}
	if r, _ := NewResolver(base); r.base != nil {
		t.Errorf("NewResolver(%q) parsed a plainly canonical base", base)
	}

	// A page's mix: all but the anchors, ./ and ../, mailto and the IDN
	// host take the fast path.
	r, _ := NewResolver("https://www.example.com/news/2021/story-1.html")
	fast := 0
	for _, ref := range pageRefs {
		if _, ok := r.resolveFast(ref); ok {
			fast++
		}
	}
	if want := len(pageRefs) - 5; fast != want {
		t.Errorf("%d of %d page references take the fast path, want %d", fast, len(pageRefs), want)
	}
}

func TestCanonicalFast(t *testing.T) {
	for _, u := range []string{
		"http://example.com/", "https://www.example.com/path/to/page.html?id=12345&x=y",
		"http://127.0.0.1:8080/a//b/", "https://a.example:80/?",
	} {
		if !canonicalFast(u) {
			t.Errorf("canonicalFast(%q) = false, want true", u)
		}
		checkCanonicalFast(t, u)
	}
	for _, u := range []string{
		"http://example.com", "HTTP://example.com/", "http://Example.com/", "http://example.com./",
		"http://example.com:80/", "http://a/%7E", "http://a/./b", "http://a/b/..", "http://a/?'",
		"http://a/#f", "http://u@a/", "ftp://a/", "http://0x7f.1/", "http://[::1]/",
		"http://xn--bcher-kva.de/x", // punycode: IDNA validates it, the parser decides
		"http://a/" + strings.Repeat("x", MaxLength),
	} {
		if canonicalFast(u) {
			t.Errorf("canonicalFast(%q) = true, want false", u)
		}
	}
}

// FuzzResolveFast: for any base (and its canonical form) and reference,
// the fast path answers only what the WHATWG parser answers, and Resolve
// with or without cache gives the slow path's result and error class;
// whatever canonicalFast accepts, the parser serializes unchanged.
func FuzzResolveFast(f *testing.F) {
	for _, b := range fastBases {
		for _, r := range []string{"/a/b?x=1", "b.html?x", "//h.example/p", "http://h.example:8080/p#f", "../a"} {
			f.Add(b, r)
		}
	}
	for _, r := range fastRefs {
		f.Add("https://www.example.com/news/2021/story-1.html?x=1", r)
	}
	f.Fuzz(func(t *testing.T, base, ref string) {
		checkResolveFast(t, base, ref)
	})
}
