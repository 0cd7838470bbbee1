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
	"...", "a/...", ".../a", "/.a/..b/a./b../", "?..", "?./..", "/?/../.",
	"http://example.com/x", "https://example.com/x", "http://example.com", "http://example.com?q",
	"http://example.com:8080/x", "https://example.com:80/x", "http://example.com:443/x",
	"//other.example/p?q", "//other.example", "//127.0.0.1:9/x", "http://1.2.3.4/", "http://255.255.255.255/",
	"http://a-b.example/", "https://www.example.com/news/", "http://a.example:8080/x",
	// dot segments: path-relative, root-relative, scheme-relative, absolute
	"./a", "../a", ".", "..", "./", "../", "a/./b", "a/../b", "a/.", "a/..", "a/./", "a/../",
	"../a?x", "./a?x", ".?x", "..?x", "./?", "../?", ".#f", "..#f", "../a#f", "a/..#f",
	"../..", "../../", "../../../../../../a", "../../../../../..", "./../a", "../.././a/./b/../c/",
	"a//..", "a//../b", ".//a", "..//a", "//..", "a/./../b/.", "./a:b", "../a:b/c",
	"/.", "/..", "/./", "/../", "/a/..?x", "/a/.?x", "/./a", "/../a", "/a/b/../../..", "/a/b/../../../c?d",
	"/news/archive/../2022/story-3.html", "/news/2022/./story-3.html", "./../2022/story-3.html",
	"//other.example/.", "//other.example/..", "//other.example/a/../b", "//other.example/./?q",
	"//other.example/a/b/../../../../c", "//127.0.0.1:9/./x/../y/",
	"http://example.com/.", "http://example.com/..", "http://example.com/a/./b/../c?d",
	"https://www.example.com/news/../a", "http://example.com//../a", "http://a.example:8080/x/..",
	// scheme case
	"HTTP://example.com/x", "Http://example.com/", "HTTPS://example.com/x", "hTtPs://example.com:8443/a?b",
	"HTTP://example.com", "HTTP://example.com?q", "HTTPS://www.example.com/news/2021/story-1.html",
	"HTTP://www.example.com/news/./a", "HTTPS://other.example/a/../../b", "Https://127.0.0.1:35325/x",
	// fall back
	"", "#", "#top", "%2e", "%2E", "%2e%2e", ".%2e", "%2e.", "%2e/a", ".%2E/a", "/a/%2e/b", "/a/%2E%2e/b",
	"//other.example/%2e%2e/a", "HTTP://example.com/%2e/x", "%7Euser", "a%2Fb", "a%2e%2E/b", "?%zz", "/%",
	"a b", " a", "a\tb", "a\nb", "a\\b", `\\x\y`, "/\\x", "./a b", "../a\\b", "/./\\x", "..\\a", ".\\a",
	"http:x", "http:/x", "http:///x", "https:x", "HTTP:x", "HTTP:/x", "HTTP:///x", "HTTPS:x", "HTTP:\\\\x/",
	"HTTP://Example.com/", "HTTP://example.com:80/", "hTtPs://example.com:443/", "HTTP://u@example.com/",
	"httpſ://example.com/", "Ⓗttp://example.com/", "hxxp://example.com/", "HTTP//example.com/",
	"mailto:a@example.com", "javascript:void(0)", "data:text/plain,x", "ftp://f.example/x", "FTP://f.example/x",
	"x:y", "1:y", "..:x", ".:x",
	"http://Example.com/", "http://example.com./", "http://example.com:80/", "https://example.com:443/",
	"http://example.com:080/", "http://example.com:/", "http://example.com:65536/", "http://0x7f.1/",
	"http://127.1/", "http://1.2.3.04/", "http://1.2.3.256/", "http://a.1/", "http://a.09/",
	"http://bücher.de/", "http://xn--bcher-kva.de/", "http://xn--a.example/", "http://a--b.example/",
	"http://-a.example/", "http://a-.example/", "http://a..b/", "http://.a/", "http://u@a/", "http://u:p@a/",
	"http://[::1]/", "http://a..b/", "http://-a-.example/", "http://a--b.example:81/y", "http://xn--bcher-kva.de:8080/", "//a b/", "///x", "/a?b c", "?'", "?a#b c", "a<b", "a>b", "a\"b", "a`b", "a{b}", "a|b",
	"a^b", "a[b]", "ü", "a\x00b", "a\x7fb", "../a?b'c", "../a?b c", "./a?%", "..?'",
}

// checkResolveFast is the differential test: whenever the fast path
// answers, the WHATWG parser gives the same canonical URL; and Resolve
// (fast path, cache, slow path) gives what the slow path gives, error class
// included. For a plainly canonical string, the parser serializes it as it
// is, and Canonicalize returns it. PolitenessKey of the base, the
// reference and the result is the slow path's key.
func checkResolveFast(t *testing.T, base, ref string) {
	t.Helper()
	checkCanonicalFast(t, base)
	checkCanonicalFast(t, ref)
	checkPolitenessKeyFast(t, base)
	checkPolitenessKeyFast(t, ref)
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
		if werr == nil {
			checkPolitenessKeyFast(t, want)
		}
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

// checkPolitenessKeyFast is the differential test of PolitenessKey: it
// gives the slow path's key and error class, and it answers a plainly
// canonical URL with its authority.
func checkPolitenessKeyFast(t *testing.T, raw string) {
	t.Helper()
	if len(raw) > maxInput {
		return // refused before either path
	}
	got, err := PolitenessKey(raw)
	want, werr := politenessKeySlow(raw)
	if got != want || !errors.Is(errClass(err), errClass(werr)) {
		t.Fatalf("PolitenessKey(%q) = %q, %v; slow = %q, %v", raw, got, err, want, werr)
	}
	if auth, ok := plainCanonical(raw); ok && auth != want {
		t.Fatalf("plainCanonical(%q) = %q; slow key = %q", raw, auth, want)
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
		"Https://", "hTTps://", "./", "../", "/.", "/..", "/./", "/../",
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
	const page = "https://www.example.com/news/2021/story-1.html?x=1"
	tests := []struct {
		name, base, ref, want string // base "": page
	}{
		{"root-relative", "", "/about/team", "https://www.example.com/about/team"},
		{"root-relative with query", "", "/search?q=go&lang=en", "https://www.example.com/search?q=go&lang=en"},
		{"root", "", "/", "https://www.example.com/"},
		{"query", "", "?page=2", "https://www.example.com/news/2021/story-1.html?page=2"},
		{"empty query", "", "?", "https://www.example.com/news/2021/story-1.html?"},
		{"relative", "", "story-2.html", "https://www.example.com/news/2021/story-2.html"},
		{"relative with query", "", "b.html?x=1", "https://www.example.com/news/2021/b.html?x=1"},
		{"relative directory", "", "sub/dir/", "https://www.example.com/news/2021/sub/dir/"},
		{"fragment cut", "", "story-2.html#comments", "https://www.example.com/news/2021/story-2.html"},
		{"session path parameter", "", "p;jsessionid=AB12", "https://www.example.com/news/2021/p;jsessionid=AB12"},
		{"same host absolute", "", "https://www.example.com/a?b", "https://www.example.com/a?b"},
		{"other host", "", "http://cdn.example.net/i.png", "http://cdn.example.net/i.png"},
		{"other host empty path", "", "https://other.example", "https://other.example/"},
		{"other host query only", "", "https://other.example?q", "https://other.example/?q"},
		{"port", "", "http://other.example:8080/x", "http://other.example:8080/x"},
		{"https on 80", "", "https://other.example:80/x", "https://other.example:80/x"},
		{"dotted quad", "", "http://10.1.2.3/x", "http://10.1.2.3/x"},
		{"scheme-relative", "", "//static.example.org/site.css", "https://static.example.org/site.css"},
		{"sub-delims", "", "/a!$&'()*+,;=:@b", "https://www.example.com/a!$&'()*+,;=:@b"},
		{"dots in names", "", ".a/..b/.../c.", "https://www.example.com/news/2021/.a/..b/.../c."},

		// Dot segments, as the path state removes them.
		{"dot", "", "./story-2.html", "https://www.example.com/news/2021/story-2.html"},
		{"dot dot", "", "../2022/story-3.html", "https://www.example.com/news/2022/story-3.html"},
		{"dot then dot dot", "", "./../2022/story-3.html", "https://www.example.com/news/2022/story-3.html"},
		{"dot dot in root-relative", "", "/news/archive/../2022/story-3.html", "https://www.example.com/news/2022/story-3.html"},
		{"dot in root-relative", "", "/news/2022/./story-3.html", "https://www.example.com/news/2022/story-3.html"},
		{"dot dot with query", "", "../a?x", "https://www.example.com/news/a?x"},
		{"dot dot with query of dots", "", "../a?/../.", "https://www.example.com/news/a?/../."},
		{"dot dot with fragment", "", "../a#x/..", "https://www.example.com/news/a"},
		{"lone dot", "", ".", "https://www.example.com/news/2021/"},
		{"lone dot dot", "", "..", "https://www.example.com/news/"},
		{"dot slash", "", "./", "https://www.example.com/news/2021/"},
		{"dot dot slash", "", "../", "https://www.example.com/news/"},
		{"dot before query", "", ".?x", "https://www.example.com/news/2021/?x"},
		{"dot dot before query", "", "..?x", "https://www.example.com/news/?x"},
		{"inner dot", "", "a/./b", "https://www.example.com/news/2021/a/b"},
		{"inner dot dot", "", "a/../b", "https://www.example.com/news/2021/b"},
		{"trailing dot", "", "a/.", "https://www.example.com/news/2021/a/"},
		{"trailing dot dot", "", "a/..", "https://www.example.com/news/2021/"},
		{"dot dot removes an empty segment", "", "a//../b", "https://www.example.com/news/2021/a/b"},
		{"dot keeps an empty segment", "", ".//a", "https://www.example.com/news/2021//a"},
		{"above the root", "", "../../../../a", "https://www.example.com/a"},
		{"above the root, trailing", "", "../../../..", "https://www.example.com/"},
		{"root-relative dot", "", "/.", "https://www.example.com/"},
		{"root-relative dot dot", "", "/..", "https://www.example.com/"},
		{"root-relative above the root", "", "/a/b/../../../c", "https://www.example.com/c"},
		{"colon after a dot", "", "./a:b", "https://www.example.com/news/2021/a:b"},
		{"scheme-relative dot dot", "", "//static.example.org/css/../site.css", "https://static.example.org/site.css"},
		{"scheme-relative lone dot dot", "", "//static.example.org/..", "https://static.example.org/"},
		{"absolute dots", "", "https://other.example/./a/.", "https://other.example/a/"},
		{"absolute same host dots", "", "https://www.example.com/news/../a?b", "https://www.example.com/a?b"},
		{"root base dot dot", "http://127.1.0.5:35325/", "../a", "http://127.1.0.5:35325/a"},
		{"root base lone dot dot", "http://127.1.0.5:35325/", "..", "http://127.1.0.5:35325/"},
		{"root base lone dot", "http://127.1.0.5:35325/", ".", "http://127.1.0.5:35325/"},
		{"directory base", "http://a.example/d/", "../x/./y/..", "http://a.example/x/"},
		{"empty segments base", "http://a.example/d//e", "../x", "http://a.example/d/x"},
		{"escaped base", "http://h.example/a%2Fb/c%C3%BC/d?e", "../x", "http://h.example/a%2Fb/x"},
		{"parsed base", "HTTP://Example.COM:80/a/./b/../c", "../d/.", "http://example.com/d/"},

		// Escapes: kept, with upper-case hex digits; those of unreserved
		// bytes decoded.
		{"escaped unreserved", "", "/news/2025/%73tory%2D17.html", "https://www.example.com/news/2025/story-17.html"},
		{"escaped unreserved, lower-case", "", "a%2db%7e", "https://www.example.com/news/2021/a-b~"},
		{"escaped UTF-8", "", "/zh/%e4%b8%ad%E6%96%87.html", "https://www.example.com/zh/%E4%B8%AD%E6%96%87.html"},
		{"escaped slash and space", "", "a%2fb%20c", "https://www.example.com/news/2021/a%2Fb%20c"},
		{"escaped query", "", "?q=%e4%b8%ad&r=%41%2e", "https://www.example.com/news/2021/story-1.html?q=%E4%B8%AD&r=A."},
		{"escapes and dots", "", "../%41/./b%2Dc/..", "https://www.example.com/news/A/"},
		{"escaped absolute", "", "HTTPS://other.example/%7Euser/%e2%82%ac", "https://other.example/~user/%E2%82%AC"},
		{"escaped absolute, base's host", "", "https://www.example.com/%41", "https://www.example.com/A"},
		{"escaped scheme-relative", "", "//other.example/a%2db?%7a", "https://other.example/a-b?z"},

		// Scheme case: the parser lower-cases it.
		{"upper-case scheme", "", "HTTP://www.example.com/a", "http://www.example.com/a"},
		{"upper-case scheme, base's", "", "HTTPS://www.example.com/a?b", "https://www.example.com/a?b"},
		{"mixed-case scheme, empty path", "", "Https://other.example", "https://other.example/"},
		{"mixed-case scheme, query only", "", "hTtPs://other.example?q", "https://other.example/?q"},
		{"mixed-case scheme and dots", "", "hTtP://other.example:8080/x/../y", "http://other.example:8080/y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.base
			if base == "" {
				base = page
			}
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
	if r, _ := NewResolver(page); r.base != nil {
		t.Errorf("NewResolver(%q) parsed a plainly canonical base", page)
	}

	// A page's mix: all but the anchor, mailto and the IDN host take the
	// fast path.
	r, _ := NewResolver("https://www.example.com/news/2021/story-1.html")
	fast := 0
	for _, ref := range pageRefs {
		if _, ok := r.resolveFast(ref); ok {
			fast++
		}
	}
	if want := len(pageRefs) - 3; fast != want {
		t.Errorf("%d of %d page references take the fast path, want %d", fast, len(pageRefs), want)
	}

	// The benchmark web's spellings, its escapes of unreserved bytes too.
	r, _ = NewResolver(spellingBase)
	for _, ref := range spellingRefs {
		if _, ok := r.resolveFast(ref); !ok {
			t.Errorf("resolveFast(%q) declined", ref)
		}
		checkResolveFast(t, spellingBase, ref)
	}
}

// TestResolveFastDeclines: what the fast path cannot vouch for goes to the
// parser, in particular the escaped dot segments ("%2e" is "." to the
// parser but not a plain byte) and schemes that only look like "http".
func TestResolveFastDeclines(t *testing.T) {
	const page = "https://www.example.com/news/2021/story-1.html?x=1"
	tests := []struct{ name, ref string }{
		{"escaped dot", "%2e/a"},
		{"escaped dot, upper case", "%2E/a"},
		{"half escaped dot dot", ".%2e/a"},
		{"escaped dot dot", "%2e%2E"},
		{"escaped dot in root-relative", "/a/%2e/b"},
		{"escaped dot in absolute", "HTTP://www.example.com/a/%2e%2e/b"},
		{"escaped dot in scheme-relative", "//other.example/%2e%2e"},
		{"backslash after dot", ".\\a"},
		{"backslash after dot dot", "..\\a"},
		{"space after dot dot", "../a b"},
		{"upper-case scheme without slashes", "HTTP:x"},
		{"upper-case scheme, one slash", "HTTP:/x"},
		{"upper-case scheme, empty host", "HTTP:///x"},
		{"upper-case scheme, user", "HTTP://u@www.example.com/"},
		{"upper-case host", "HTTP://WWW.example.com/"},
		{"default port", "Http://www.example.com:80/"},
		{"long s", "httpſ://www.example.com/"},
		{"other scheme", "FTP://f.example/"},
		{"colon in first segment", "..:x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResolver(page)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := r.resolveFast(tt.ref); ok {
				t.Errorf("resolveFast(%q) = %q, true; want it declined", tt.ref, got)
			}
			checkResolveFast(t, page, tt.ref)
		})
	}
}

// TestPolitenessKeyFast: a plainly canonical URL is keyed by its authority
// without parsing, with the slow path's key; anything else gets the slow
// path's key or error.
func TestPolitenessKeyFast(t *testing.T) {
	tests := []struct {
		name, in, want string
		fast           bool
	}{
		{"host", "http://example.com/", "example.com", true},
		{"port", "http://127.1.0.5:35325/news/2021/story-31.html", "127.1.0.5:35325", true},
		{"https on 80", "https://a.example:80/?", "a.example:80", true},
		{"query", "https://www.example.com/path/to/page.html?id=12345&x=y", "www.example.com", true},
		{"default port", "http://example.com:80/", "example.com", false},
		{"upper case", "HTTP://Example.com/", "example.com", false},
		{"trailing dot", "http://example.com./", "example.com", false},
		{"no path", "http://example.com", "example.com", false},
		{"dot segment", "http://example.com/a/../b", "example.com", false},
		{"user", "http://u:p@example.com/", "example.com", false},
		{"IPv4 number", "http://0x7f.1/", "127.0.0.1", false},
		{"IPv6", "http://[::1]:8080/", "[::1]:8080", false},
		{"IDN", "http://bücher.de/", "xn--bcher-kva.de", false},
		{"punycode", "http://xn--bcher-kva.de/", "xn--bcher-kva.de", false},
		{"ftp", "ftp://files.example.com:21/", "files.example.com", false},
		{"mailto", "mailto:a@b", "", false},
		{"relative", "/relative", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := plainCanonical(tt.in); ok != tt.fast {
				t.Errorf("plainCanonical(%q) fast = %v, want %v", tt.in, ok, tt.fast)
			}
			if got, _ := PolitenessKey(tt.in); got != tt.want {
				t.Errorf("PolitenessKey(%q) = %q, want %q", tt.in, got, tt.want)
			}
			checkPolitenessKeyFast(t, tt.in)
		})
	}
}

// FuzzPolitenessKeyFast: PolitenessKey never panics and gives the slow
// path's key and error class for any input; a plainly canonical input is
// keyed by its authority.
func FuzzPolitenessKeyFast(f *testing.F) {
	for _, s := range append(append([]string{
		"http://example.com/", "http://127.1.0.5:35325/news/2021/story-31.html", "https://a.example:80/?",
		"http://example.com:80/", "HTTP://Example.com/", "http://example.com./", "http://a/./b",
		"http://u@a/", "http://[::1]:8080/", "http://0x7f.1/", "http://xn--bcher-kva.de/x", "http://a.1/",
		"http://a..b/", "http://-a.example/", "http://a:65536/", "http://a:0/", "http://a:00/", "ftp://a/",
	}, fastBases...), benchURLs...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		checkPolitenessKeyFast(t, raw)
	})
}

func TestCanonicalFast(t *testing.T) {
	for _, u := range []string{
		"http://example.com/", "https://www.example.com/path/to/page.html?id=12345&x=y",
		"http://127.0.0.1:8080/a//b/", "https://a.example:80/?",
		"http://example.com/zh/%E4%B8%AD.html?q=%20%2F", "http://a/%3F%2Fb", // escapes kept as they are
	} {
		if !canonicalFast(u) {
			t.Errorf("canonicalFast(%q) = false, want true", u)
		}
		checkCanonicalFast(t, u)
	}
	for _, u := range []string{
		"http://example.com", "HTTP://example.com/", "http://Example.com/", "http://example.com./",
		"http://example.com:80/", "http://a/%7E", "http://a/%e4", "http://a/?q=%41", "http://a/%",
		"http://a/%4", "http://a/%zz", "http://a/%2E%2Fb", "http://a/./b", "http://a/b/..", "http://a/?'",
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
// whatever canonicalFast accepts, the parser serializes unchanged, and
// PolitenessKey gives the slow path's key.
func FuzzResolveFast(f *testing.F) {
	for _, b := range fastBases {
		for _, r := range []string{
			"/a/b?x=1", "b.html?x", "//h.example/p", "http://h.example:8080/p#f", "../a", "./a/../b/.", "..?x",
			"/a/./../..", "HTTP://h.example/a/..", "hTtPs://h.example", "//h.example/../a?b", "%2e%2E/a",
		} {
			f.Add(b, r)
		}
	}
	for _, r := range fastRefs {
		f.Add("https://www.example.com/news/2021/story-1.html?x=1", r)
	}
	for _, r := range spellingRefs {
		f.Add(spellingBase, r)
	}
	f.Fuzz(func(t *testing.T, base, ref string) {
		checkResolveFast(t, base, ref)
	})
}
