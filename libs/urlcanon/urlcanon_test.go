package urlcanon

import (
	"encoding/json"
	"errors"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestCanonicalize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
		err  error
	}{
		{"already canonical", "http://example.com/", "http://example.com/", nil},
		{"empty path", "http://example.com", "http://example.com/", nil},
		{"case", "HTTP://Example.COM/Path", "http://example.com/Path", nil},
		{"idn", "http://bücher.de/", "http://xn--bcher-kva.de/", nil},
		{"idn upper case", "https://BÜCHER.de/x", "https://xn--bcher-kva.de/x", nil},
		{"idn percent-encoded host", "http://b%C3%BCcher.de/", "http://xn--bcher-kva.de/", nil},
		{"punycode kept", "http://xn--bcher-kva.de/", "http://xn--bcher-kva.de/", nil},
		{"default http port", "http://example.com:80/a", "http://example.com/a", nil},
		{"default https port", "https://example.com:443/", "https://example.com/", nil},
		{"default ftp port", "ftp://example.com:21/f.txt", "ftp://example.com/f.txt", nil},
		{"non-default port kept", "http://example.com:8080/", "http://example.com:8080/", nil},
		{"https on port 80 kept", "https://example.com:80/", "https://example.com:80/", nil},
		{"port leading zeros", "http://example.com:0080/", "http://example.com/", nil},
		{"ipv6", "http://[2001:DB8:0:0:0:0:0:1]:8080/", "http://[2001:db8::1]:8080/", nil},
		{"ipv6 loopback", "http://[::1]/", "http://[::1]/", nil},
		{"ipv4 shorthand", "http://0x7f.1/", "http://127.0.0.1/", nil},
		{"dot segments", "http://a/b/c/./../../g", "http://a/g", nil},
		{"dot segments overflow", "http://a/../../../g", "http://a/g", nil},
		{"encoded dot segments", "http://a/b/%2e%2E/c", "http://a/c", nil},
		{"trailing dot segment", "http://a/b/c/..", "http://a/b/", nil},
		{"fragment removed", "http://a/p?q=1#frag", "http://a/p?q=1", nil},
		{"empty fragment removed", "http://a/p#", "http://a/p", nil},
		{"query kept unsorted", "http://a/?b=2&a=1&b=1", "http://a/?b=2&a=1&b=1", nil},
		{"empty query kept", "http://a/?", "http://a/?", nil},
		{"plus kept", "http://a/?q=a+b", "http://a/?q=a+b", nil},
		{"unreserved decoded", "http://a/%7Euser/%41%2d%5f%2E", "http://a/~user/A-_.", nil},
		{"reserved kept upper-cased", "http://a/a%2fb?x=%3d%26", "http://a/a%2Fb?x=%3D%26", nil},
		{"stray percent encoded", "http://a/100%?p=%zz", "http://a/100%25?p=%25zz", nil},
		{"no new escape from stray percent", "http://a/%%411", "http://a/%25A1", nil},
		{"space encoded", "http://a/a b?c d", "http://a/a%20b?c%20d", nil},
		{"non-ascii path encoded", "http://a/ü?ü", "http://a/%C3%BC?%C3%BC", nil},
		{"userinfo kept", "http://User:Pw@a/", "http://User:Pw@a/", nil},
		{"backslashes", `http:\\a\b\c`, "http://a/b/c", nil},
		{"surrounding space and tabs", " \thttp://a/\tb\n ", "http://a/b", nil},
		{"trailing dot of host removed", "http://Example.COM./a", "http://example.com/a", nil},
		{"trailing dot of host with port", "http://example.com.:8080/", "http://example.com:8080/", nil},
		{"host ending in a signed number keeps its dots", "http://+0../", "http://+0../", nil},
		{"host ending in a signed hex number keeps its dots", "http://0x-1../", "http://0x-1../", nil},
		{"trailing dot of host with userinfo", "ftp://u:p@files.example./x", "ftp://u:p@files.example/x", nil},
		{"caret encoded", "http://a/a^b", "http://a/a%5Eb", nil},
		{"caret escape kept", "http://a/a%5eb", "http://a/a%5Eb", nil},
		{"pipe and brackets encoded", "http://a/x|y[1]?q=[a|b]", "http://a/x%7Cy%5B1%5D?q=%5Ba%7Cb%5D", nil},
		{"braces and backtick in query encoded", "http://a/?q={`}", "http://a/?q=%7B%60%7D", nil},
		{"backslash in query encoded", `http://a/?q=\x`, "http://a/?q=%5Cx", nil},
		{"sub-delims kept", "http://a/!$&'()*+,;=:@?!$&'()*+,;=:@/?", "http://a/!$&'()*+,;=:@?!$&%27()*+,;=:@/?", nil},
		{"ftp", "FTP://Files.Example.com/pub/", "ftp://files.example.com/pub/", nil},

		{"relative", "/just/a/path", "", ErrInvalid},
		{"empty", "", "", ErrInvalid},
		{"no host", "http://", "", ErrInvalid},
		{"bad port", "http://a:99999/", "", ErrInvalid},
		{"bad ipv6", "http://[::1/", "", ErrInvalid},
		{"forbidden host code point", "http://a b/", "", ErrInvalid},
		{"mailto", "mailto:someone@example.com", "", ErrScheme},
		{"javascript", "javascript:alert(1)", "", ErrScheme},
		{"file", "file:///etc/passwd", "", ErrScheme},
		{"ws", "ws://a/", "", ErrScheme},
		{"data", "data:text/plain,hi", "", ErrScheme},
		{"too long", "http://a/" + strings.Repeat("x", MaxLength), "", ErrTooLong},
		{"too long after encoding", "http://a/x" + strings.Repeat(" ", MaxLength/3) + "y", "", ErrTooLong},
		{"huge input", "http://a/#" + strings.Repeat("x", 10*MaxLength), "", ErrTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize(tt.in)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Canonicalize(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("Canonicalize(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if err != nil {
				return
			}
			again, err := Canonicalize(got)
			if err != nil || again != got {
				t.Fatalf("Canonicalize(%q) = %q, %v: not idempotent", got, again, err)
			}
		})
	}
}

func TestMaxLengthBoundary(t *testing.T) {
	prefix := "http://a/"
	exact := prefix + strings.Repeat("x", MaxLength-len(prefix))
	if got, err := Canonicalize(exact); err != nil || got != exact {
		t.Fatalf("Canonicalize(%d bytes) = %d bytes, %v; want accepted", len(exact), len(got), err)
	}
	if _, err := Canonicalize(exact + "x"); !errors.Is(err, ErrTooLong) {
		t.Fatalf("Canonicalize(%d bytes) error = %v, want ErrTooLong", len(exact)+1, err)
	}
	// A long fragment does not count: it is removed.
	if _, err := Canonicalize(exact + "#" + strings.Repeat("f", MaxLength)); err != nil {
		t.Fatalf("long fragment: %v", err)
	}
}

func TestResolve(t *testing.T) {
	const base = "http://a/b/c/d;p?q"
	tests := []struct {
		name string
		base string
		ref  string
		want string
		err  error
	}{
		// RFC 3986 §5.4.1 normal examples (fragments removed).
		{"rfc g", base, "g", "http://a/b/c/g", nil},
		{"rfc ./g", base, "./g", "http://a/b/c/g", nil},
		{"rfc g/", base, "g/", "http://a/b/c/g/", nil},
		{"rfc /g", base, "/g", "http://a/g", nil},
		{"rfc //g", base, "//g", "http://g/", nil},
		{"rfc ?y", base, "?y", "http://a/b/c/d;p?y", nil},
		{"rfc g?y", base, "g?y", "http://a/b/c/g?y", nil},
		{"rfc #s", base, "#s", "http://a/b/c/d;p?q", nil},
		{"rfc g#s", base, "g#s", "http://a/b/c/g", nil},
		{"rfc ;x", base, ";x", "http://a/b/c/;x", nil},
		{"rfc empty", base, "", "http://a/b/c/d;p?q", nil},
		{"rfc .", base, ".", "http://a/b/c/", nil},
		{"rfc ..", base, "..", "http://a/b/", nil},
		{"rfc ../..", base, "../..", "http://a/", nil},
		{"rfc ../../g", base, "../../g", "http://a/g", nil},
		// RFC 3986 §5.4.2 abnormal examples.
		{"overflow ../../../g", base, "../../../g", "http://a/g", nil},
		{"overflow ../../../../g", base, "../../../../g", "http://a/g", nil},
		{"/./g", base, "/./g", "http://a/g", nil},
		{"/../g", base, "/../g", "http://a/g", nil},
		{"g.", base, "g.", "http://a/b/c/g.", nil},
		{"..g", base, "..g", "http://a/b/c/..g", nil},
		{"g;x=1/../y", base, "g;x=1/../y", "http://a/b/c/y", nil},
		{"g?y/./x", base, "g?y/./x", "http://a/b/c/g?y/./x", nil},
		// Browser behaviour beyond RFC 3986.
		{"http:g same scheme is relative", base, "http:g", "http://a/b/c/g", nil},
		{"https:g other scheme is absolute", base, "https:g", "https://g/", nil},
		{"triple slash host", base, "///host/x", "http://host/x", nil},
		{"backslashes", base, `\\other\x\y`, "http://other/x/y", nil},
		{"backslash path", base, `..\g`, "http://a/b/g", nil},
		{"tabs and newlines stripped", base, "g\t/\nh\r", "http://a/b/c/g/h", nil},
		{"surrounding spaces trimmed", base, "  g  ", "http://a/b/c/g", nil},
		{"inner space encoded", base, "g h", "http://a/b/c/g%20h", nil},
		{"fragment only", "http://a/b?q#old", "#new", "http://a/b?q", nil},
		{"query only", "http://a/b?q#old", "?r", "http://a/b?r", nil},
		{"absolute ref", base, "HTTPS://Bücher.de:443/", "https://xn--bcher-kva.de/", nil},
		{"protocol-relative keeps https", "https://a/x", "//b:443/y", "https://b/y", nil},
		{"ftp base", "ftp://f/pub/dir/", "../x", "ftp://f/pub/x", nil},
		{"ipv6 base", "http://[::1]:8080/a/", "b", "http://[::1]:8080/a/b", nil},

		{"mailto ref", base, "mailto:x@y", "", ErrScheme},
		{"javascript ref", base, "javascript:void(0)", "", ErrScheme},
		{"data ref", base, "data:,x", "", ErrScheme},
		{"relative base", "/b/c", "g", "", ErrInvalid},
		{"empty base", "", "g", "", ErrInvalid},
		{"bad host ref", base, "http://[x]/", "", ErrInvalid},
		{"bad port ref", base, "//a:70000/", "", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resolve(tt.base, tt.ref)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("Resolve(%q, %q) error = %v, want %v", tt.base, tt.ref, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("Resolve(%q, %q) = %q, want %q", tt.base, tt.ref, got, tt.want)
			}
		})
	}
}

func TestPolitenessKey(t *testing.T) {
	tests := []struct {
		in   string
		want string
		err  error
	}{
		{"http://example.com/a", "example.com", nil},
		{"HTTPS://WWW.Example.COM:443/x?y#z", "www.example.com", nil},
		{"http://example.com:8080/", "example.com:8080", nil},
		{"https://example.com:80/", "example.com:80", nil},
		{"ftp://files.example.com:21/", "files.example.com", nil},
		{"http://user:pw@example.com/", "example.com", nil},
		{"http://bücher.de/", "xn--bcher-kva.de", nil},
		{"http://example.com./", "example.com", nil},
		{"http://[::1]:8080/", "[::1]:8080", nil},
		{"http://[::1]/", "[::1]", nil},
		{"http://127.0.0.2:8080/", "127.0.0.2:8080", nil},
		{"mailto:a@b", "", ErrScheme},
		{"/relative", "", ErrInvalid},
		{"http://a.", "a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := PolitenessKey(tt.in)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("PolitenessKey(%q) error = %v, want %v", tt.in, err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("PolitenessKey(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestPolitenessKeyOfCanonicalEqualsRaw(t *testing.T) {
	for _, in := range []string{"HTTP://A.example:80/x", "https://[::FFFF:127.0.0.1]:8443/", "http://bücher.de./a#f"} {
		c, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", in, err)
		}
		if u, err := neturl.Parse(c); err != nil {
			t.Fatalf("Canonicalize(%q) = %q: net/url cannot parse it: %v", in, c, err)
		} else if _, p := pathStart(c); u.RequestURI() != c[p:] {
			t.Fatalf("Canonicalize(%q) = %q: Go would request %q", in, c, u.RequestURI())
		}
		k1, err1 := PolitenessKey(in)
		k2, err2 := PolitenessKey(c)
		if err1 != nil || err2 != nil || k1 != k2 {
			t.Errorf("PolitenessKey(%q) = %q, %v; of canonical %q = %q, %v", in, k1, err1, c, k2, err2)
		}
	}
}

func TestNormalizePercent(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"%41", "A"},
		{"%7e%7E", "~~"},
		{"%2f", "%2F"},
		{"%2F", "%2F"},
		{"%e2%82%ac", "%E2%82%AC"},
		{"%", "%25"},
		{"%4", "%254"},
		{"%zz", "%25zz"},
		{"%%41", "%25A"},
		{"a%2", "a%252"},
		{"%25", "%25"},
		{"%2541", "%2541"},
		{"%30%2D%2e%5F%7e%61", "0-._~a"},
		{"%20%21%3F", "%20%21%3F"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := NormalizePercent(tt.in)
			if got != tt.want {
				t.Fatalf("NormalizePercent(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := NormalizePercent(got); again != got {
				t.Fatalf("NormalizePercent(%q) = %q: not idempotent", got, again)
			}
		})
	}
	if n := testing.AllocsPerRun(10, func() { _ = NormalizePercent("http://a/%2F%3D?x=%20") }); n != 0 {
		t.Errorf("NormalizePercent allocates %v times on normal input", n)
	}
}

// wptCase is one entry of testdata/urltestdata.json.
type wptCase struct {
	Input   string  `json:"input"`
	Base    *string `json:"base"`
	Href    string  `json:"href"`
	Failure bool    `json:"failure"`
}

func loadWPT(t *testing.T) []wptCase {
	t.Helper()
	data, err := os.ReadFile("testdata/urltestdata.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var cases []wptCase
	for _, r := range raw {
		if len(r) > 0 && r[0] == '"' {
			continue // a comment string
		}
		var c wptCase
		if err := json.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return cases
}

func crawlable(href string) bool {
	return strings.HasPrefix(href, "http:") || strings.HasPrefix(href, "https:") || strings.HasPrefix(href, "ftp:")
}

func stripFragment(href string) string {
	if i := strings.IndexByte(href, '#'); i >= 0 {
		return href[:i]
	}
	return href
}

// TestWPT runs the web-platform-tests URL cases through Resolve (or
// Canonicalize without a base). A case whose expected href is http, https or
// ftp must resolve to that href, fragment removed and percent-escapes
// normalized; any other expected result must be refused with ErrScheme; an
// expected failure must be refused (ErrInvalid, or ErrScheme when the input
// names another scheme). It also counts how many of the crawlable cases
// net/url's ResolveReference gets wrong.
func TestWPT(t *testing.T) {
	var crawl, pass, refused, netWrong, netTotal int
	for _, c := range loadWPT(t) {
		var got string
		var err error
		if c.Base == nil {
			got, err = Canonicalize(c.Input)
		} else {
			got, err = Resolve(*c.Base, c.Input)
		}
		switch {
		case c.Failure:
			if err == nil {
				t.Errorf("input %q base %v: got %q, want failure", c.Input, deref(c.Base), got)
				continue
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrScheme) {
				t.Errorf("input %q: error %v is neither ErrInvalid nor ErrScheme", c.Input, err)
			}
			refused++
		case !crawlable(c.Href):
			if !errors.Is(err, ErrScheme) {
				t.Errorf("input %q base %v: got %q, %v; want ErrScheme (href %q)", c.Input, deref(c.Base), got, err, c.Href)
				continue
			}
			refused++
		default:
			crawl++
			want := normalize(stripFragment(c.Href))
			if err != nil || got != want {
				t.Errorf("input %q base %v: got %q, %v; want %q", c.Input, deref(c.Base), got, err, want)
				continue
			}
			pass++
			if c.Base != nil {
				netTotal++
				if normalize(netResolve(*c.Base, c.Input)) != want {
					netWrong++
				}
			}
		}
	}
	t.Logf("WPT urltestdata: %d/%d crawlable cases pass, %d non-crawlable or failing cases refused", pass, crawl, refused)
	t.Logf("net/url ResolveReference: %d of %d crawlable relative cases differ from the WHATWG href", netWrong, netTotal)
	if crawl < 200 {
		t.Errorf("only %d crawlable WPT cases loaded", crawl)
	}
}

// netResolve is what a crawler built on net/url would produce.
func netResolve(base, ref string) string {
	b, err := neturl.Parse(base)
	if err != nil {
		return "error"
	}
	r, err := neturl.Parse(ref)
	if err != nil {
		return "error"
	}
	u := b.ResolveReference(r)
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// FuzzCanonicalize: Canonicalize never panics; when it succeeds its result is
// at most MaxLength bytes, has a crawlable scheme and no fragment, is a fixed
// point (Canonicalize(Canonicalize(x)) == Canonicalize(x)), and has the same
// politeness key as its input.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		"http://example.com/", "HTTP://Bücher.DE:80/a/./b/../c%7e%2f%zz?b=2&a=1#f",
		"https://[::1]:443/%%41", `http:\\a\b`, "ftp://u:p@h:21/x;type=a", "http://a/%2e%2E/", "http://0x7f.1",
		"mailto:x", "http://a/?%", " http://a/\t?\nq ", "http://xn--a.b/", "http://a/%C3%BC%c3%bc",
		"http://u:p@[2001:db8::1]:8080/x", "http://a.:81", "http://@a/", "http://a:/x", "http://1.2.3.4./", "https://..:9/",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonicalize(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrScheme) && !errors.Is(err, ErrTooLong) {
				t.Fatalf("Canonicalize(%q): unclassified error %v", in, err)
			}
			return
		}
		if len(c) > MaxLength || !crawlable(c) || strings.Contains(c, "#") {
			t.Fatalf("Canonicalize(%q) = %q: bad canonical form", in, c)
		}
		again, err := Canonicalize(c)
		if err != nil || again != c {
			t.Fatalf("Canonicalize(%q) = %q, but Canonicalize of that = %q, %v", in, c, again, err)
		}
		k1, err1 := PolitenessKey(in)
		k2, err2 := PolitenessKey(c)
		if err1 != nil || err2 != nil || k1 != k2 {
			t.Fatalf("PolitenessKey(%q) = %q, %v; of canonical %q = %q, %v", in, k1, err1, c, k2, err2)
		}
		if k3, err3 := CanonicalKey(c); err3 != nil || k3 != k2 {
			t.Fatalf("CanonicalKey(%q) = %q, %v; PolitenessKey says %q", c, k3, err3, k2)
		}
	})
}

// FuzzResolve: Resolve never panics, and a successful result is canonical
// (Canonicalize returns it unchanged).
func FuzzResolve(f *testing.F) {
	f.Add("http://a/b/c/d;p?q", "../../g")
	f.Add("https://example.com/x/", `\\other\y`)
	f.Add("http://a/", "http:foo")
	f.Add("http://a/", "///host")
	f.Add("ftp://f/pub/", "#frag")
	f.Add("http://[::1]/", "?%zz")
	f.Fuzz(func(t *testing.T, base, ref string) {
		r, err := Resolve(base, ref)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrScheme) && !errors.Is(err, ErrTooLong) {
				t.Fatalf("Resolve(%q, %q): unclassified error %v", base, ref, err)
			}
			return
		}
		c, err := Canonicalize(r)
		if err != nil || c != r {
			t.Fatalf("Resolve(%q, %q) = %q, not canonical: %q, %v", base, ref, r, c, err)
		}
		k1, err1 := PolitenessKey(r)
		k2, err2 := CanonicalKey(r)
		if err1 != nil || err2 != nil || k1 != k2 {
			t.Fatalf("keys of %q: PolitenessKey %q, %v; CanonicalKey %q, %v", r, k1, err1, k2, err2)
		}
	})
}

// TestConcurrent checks, under -race, that the package (and the parser it
// shares between calls) is safe for concurrent use.
func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				u := benchURLs[(g+i)%len(benchURLs)]
				want, err := Canonicalize(u)
				if err != nil {
					t.Errorf("Canonicalize(%q): %v", u, err)
					return
				}
				if got, err := Resolve(u, "\t"+want+"#x"); err != nil || got != want {
					t.Errorf("Resolve(%q, %q) = %q, %v; want it", u, want, got, err)
					return
				}
				if _, err := PolitenessKey(u); err != nil {
					t.Errorf("PolitenessKey(%q): %v", u, err)
				}
			}
		})
	}
	wg.Wait()
}

var benchURLs = []string{
	"http://example.com/",
	"https://www.example.com/path/to/page.html?id=12345&x=y",
	"HTTP://WWW.Example.COM:80/a/./b/../c/%7euser/index.html#section-2",
	"https://bücher.de/kategorie/roman?seite=2",
}

func BenchmarkCanonicalize(b *testing.B) {
	for _, u := range benchURLs {
		b.Run(u, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Canonicalize(u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkResolve(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Resolve("https://www.example.com/a/b/page.html", "../c/other.html?x=1#top"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPolitenessKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := PolitenessKey("https://www.example.com/path/to/page.html?id=12345&x=y"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestResolverReuse checks that one Resolver gives, for every reference and
// in any order, what the package-level Resolve gives: the parsed base must
// not be changed by resolving against it.
func TestResolverReuse(t *testing.T) {
	const base = "http://example.com/a/b/c/d.html?q=1"
	refs := []string{"../x", "../../../../y", "z?k", "?only", "#frag", "/abs", "//other.org/p", "./", "..", "e/f/../g", " \t../h\n"}
	want := make([]string, len(refs))
	for i, ref := range refs {
		var err error
		if want[i], err = Resolve(base, ref); err != nil {
			t.Fatalf("Resolve(%q): %v", ref, err)
		}
	}
	r, err := NewResolver(base)
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 3*len(refs); round++ {
		for j := range refs {
			i := (j*7 + round) % len(refs) // vary the order
			if got, err := r.Resolve(refs[i]); err != nil || got != want[i] {
				t.Fatalf("round %d: Resolver.Resolve(%q) = %q, %v; want %q", round, refs[i], got, err, want[i])
			}
		}
	}
}

func TestKey(t *testing.T) {
	const sid32 = "0123456789abcdefghijklmnopqrstuv"
	tests := []struct {
		name string
		in   string // canonical URL
		want string
	}{
		{"no query", "http://a/p/3", "http://a/p/3"},
		{"empty query", "http://a/p/3?", "http://a/p/3"},
		{"only ampersands", "http://a/p/3?&&", "http://a/p/3"},
		{"leading ampersand", "http://a/p?&x=y", "http://a/p?x=y"},
		{"trailing ampersand", "http://a/p?x=y&", "http://a/p?x=y"},
		{"inner empty parameter", "http://a/p?a=1&&b=2", "http://a/p?a=1&b=2"},
		{"order kept", "http://a/p?b=2&a=1", "http://a/p?b=2&a=1"},
		{"empty value kept", "http://a/p?a=&b", "http://a/p?a=&b"},
		{"jsessionid query", "http://a/p?JSESSIONID=" + sid32, "http://a/p"},
		{"jsessionid among others", "http://a/p?x=1&jsessionid=" + sid32 + "&y=2", "http://a/p?x=1&y=2"},
		{"jsessionid of 33 kept", "http://a/p?jsessionid=" + sid32 + "0", "http://a/p?jsessionid=" + sid32 + "0"},
		{"phpsessid", "http://a/p?PHPSESSID=" + sid32, "http://a/p"},
		{"sid", "http://a/p?id=7&sid=" + sid32, "http://a/p?id=7"},
		{"short sid kept", "http://a/p?sid=12", "http://a/p?sid=12"},
		{"aspsessionid", "http://a/p?ASPSESSIONIDAQBSDSRT=EOHBLBDDPFCLHKPGGKLILNAM&q=1", "http://a/p?q=1"},
		{"aspsessionid with digits kept", "http://a/p?ASPSESSIONIDAQBSDSRT=EOHBLBDDPFCLHKPGGKLILNA1", "http://a/p?ASPSESSIONIDAQBSDSRT=EOHBLBDDPFCLHKPGGKLILNA1"},
		{"cfid and cftoken", "http://a/p?CFID=12345&CFTOKEN=9f-a3&page=2", "http://a/p?page=2"},
		{"jsessionid path parameter", "http://a/shop/cart.jsp;jsessionid=ABC123.node1?item=4", "http://a/shop/cart.jsp?item=4"},
		{"jsessionid path parameter in a segment", "http://a/x;JSESSIONID=1/y", "http://a/x/y"},
		{"other path parameter kept", "http://a/x;type=a", "http://a/x;type=a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Key(tt.in); got != tt.want {
				t.Fatalf("Key(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := Key(tt.want); again != tt.want {
				t.Fatalf("Key(%q) = %q: not a fixed point", tt.want, again)
			}
		})
	}
}

// TestOneResourceOneKey spells one resource the ways pages do and checks
// that every spelling resolves to one dedup key.
func TestOneResourceOneKey(t *testing.T) {
	const base = "http://127.1.0.5:8080/news/today.html"
	want := "http://127.1.0.5:8080/p/3"
	for _, ref := range []string{
		"http://127.1.0.5:8080/p/3", "/p/3", "../p/3", "/x/../p/3", "./../p/3", "/p/3?", "/p/3#top", "/p/3?#top",
		"HTTP://127.1.0.5:8080/p/3", "http://0x7f.1.0.5:8080/p/3", "http://2130771973:8080/p/3", "/p/%33",
		"/%70/3", "/p/3?&", " /p/3 ", "\t/p/\n3",
	} {
		r, err := Resolve(base, ref)
		if err != nil {
			t.Errorf("Resolve(%q): %v", ref, err)
			continue
		}
		if k := Key(r); k != want {
			t.Errorf("Key(Resolve(%q)) = %q (canonical %q), want %q", ref, k, r, want)
		}
	}
}

// TestRequestIsCanonical checks that the bytes Go's HTTP client sends for a
// canonical URL (request target and Host) are exactly the canonical URL's,
// so two canonical URLs never produce one request.
func TestRequestIsCanonical(t *testing.T) {
	for _, in := range []string{
		"http://a/a^b", "http://a/a%5Eb", "http://a/x|y[1]?q=[a|b]&r={`}", "http://a/%7e?%7e", "http://a/ü?ü",
		"http://example.com./p", "http://a/!$&'()*+,;=:@?!$&'()*+,;=:@/?", `http://a/q\r?\s`, "http://a/%2F%2f?%2F",
	} {
		c, err := Canonicalize(in)
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", in, err)
		}
		u, err := neturl.Parse(c)
		if err != nil {
			t.Fatalf("net/url cannot parse canonical %q: %v", c, err)
		}
		_, p := pathStart(c)
		if got := u.RequestURI(); got != c[p:] {
			t.Errorf("%q: canonical %q, Go sends request target %q, want %q", in, c, got, c[p:])
		}
		if u.Host != c[len(u.Scheme)+3:p] && u.User == nil {
			t.Errorf("%q: canonical %q, Go sends Host %q", in, c, u.Host)
		}
	}
}

// FuzzKey: Key never panics, is a fixed point (Key(Key(c)) == Key(c)), only
// removes bytes (never lengthens), and keeps scheme, authority and the
// politeness key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{
		"http://a/p?", "http://a/p?&x=1&&", "http://a/x;jsessionid=1;jsessionid=2/y?sid=0123456789abcdefghijklmnopqrstuv",
		"http://a/..;jsessionid=x/", "ftp://u@h/x;type=a?", "http://[::1]:8/?CFID=1&CFTOKEN=a-b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		c, err := Canonicalize(in)
		if err != nil {
			return
		}
		k := Key(c)
		if Key(k) != k {
			t.Fatalf("Key(%q) = %q, Key of that = %q", c, k, Key(k))
		}
		if len(k) > len(c) {
			t.Fatalf("Key(%q) = %q: longer", c, k)
		}
		a1, p1 := pathStart(c)
		a2, p2 := pathStart(k)
		if c[:p1] != k[:p2] || a1 != a2 {
			t.Fatalf("Key(%q) = %q: authority changed", c, k)
		}
	})
}

func TestNormalizePathQuery(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"plain", "/a/b?c=d", "/a/b?c=d"},
		{"unreserved escapes decoded", "/%7Ejoe/a%2Db/%62%61%7A", "/~joe/a-b/baz"},
		{"lower-case hex upper-cased", "/a%3cb%2f", "/a%3Cb%2F"},
		{"reserved escapes kept", "/a%2Fb%3F%24%2A", "/a%2Fb%3F%24%2A"},
		{"UTF-8 encoded", "/foo/bar/\u30c4", "/foo/bar/%E3%83%84"},
		{"stray percent", "/100%/x%zz", "/100%25/x%25zz"},
		{"invalid bytes encoded", "/a b\"<>^|[]\\`{}", "/a%20b%22%3C%3E%5E%7C%5B%5D%5C%60%7B%7D"},
		{"sub-delims kept", "/!$&'()*+,;=:@", "/!$&'()*+,;=:@"},
		{"quote encoded in the query only", "/it's?q='x'", "/it's?q=%27x%27"},
		{"robots wildcards kept", "/*.php$", "/*.php$"},
		{"query spelled like the RFC", "/foo/bar?baz=quz", "/foo/bar?baz=quz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NormalizePathQuery(tt.in)
			if got != tt.want {
				t.Fatalf("NormalizePathQuery(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := NormalizePathQuery(got); again != got {
				t.Fatalf("NormalizePathQuery(%q) = %q: not idempotent", got, again)
			}
		})
	}
	if n := testing.AllocsPerRun(10, func() { _ = NormalizePathQuery("/it's/%2F%3D?x=%20&y=*") }); n != 0 {
		t.Errorf("NormalizePathQuery allocates %v times on normal input", n)
	}
}

// FuzzNormalizePathQuery: NormalizePathQuery never panics, is idempotent,
// and spells a path and query exactly as Canonicalize does: for a path
// that the URL parser leaves alone otherwise (it starts with '/', has no
// fragment, backslash, tab, newline or dot segment, and is valid UTF-8),
// NormalizePathQuery(p) is the path and query of Canonicalize("http://h"+p).
func FuzzNormalizePathQuery(f *testing.F) {
	for _, s := range []string{"/%7Ejoe/", "/a%2Db", "/%62%61%7A", "/a%3cb", "/foo/bar/\u30c4", "/?q='x'", "/%zz%", "/a b^|"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := NormalizePathQuery(p)
		if again := NormalizePathQuery(got); again != got {
			t.Fatalf("NormalizePathQuery(%q) = %q, of that %q: not idempotent", p, got, again)
		}
		if !parserLeavesAlone(p) {
			return
		}
		c, err := Canonicalize("http://h" + p)
		if err != nil {
			return // too long
		}
		if want := strings.TrimPrefix(c, "http://h"); got != want {
			t.Fatalf("NormalizePathQuery(%q) = %q, Canonicalize spells it %q", p, got, want)
		}
	})
}

// parserLeavesAlone reports whether the URL parser changes nothing of p but
// its escapes (see FuzzNormalizePathQuery).
func parserLeavesAlone(p string) bool {
	if !strings.HasPrefix(p, "/") || !utf8.ValidString(p) || strings.ContainsAny(p, "#\\\t\n\r") {
		return false
	}
	if last := p[len(p)-1]; last <= ' ' {
		return false // trailing C0 controls and spaces are trimmed
	}
	path, _, _ := strings.Cut(p, "?")
	for _, seg := range strings.Split(path, "/") {
		switch strings.ToLower(strings.ReplaceAll(seg, "%2e", ".")) {
		case ".", "..":
			return false
		}
	}
	return true
}

func TestCanonicalKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://example.com/a?b", "example.com"},
		{"https://example.com:8443/", "example.com:8443"},
		{"http://u:p@127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"http://[2001:db8::1]:81/", "[2001:db8::1]:81"},
		{"ftp://f.example/pub", "f.example"},
		{"http://xn--bcher-kva.de/", "xn--bcher-kva.de"},
		// Not canonical: the parse decides, as PolitenessKey would.
		{"HTTP://Example.COM./x", "example.com"},
		{"http://0x7f.1/", "127.0.0.1"},
		{"http://127.1/", "127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := CanonicalKey(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("CanonicalKey(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"mailto:x", "http://a.1/"} { // a.1: an IPv4 address with a non-numeric part
		if k, err := CanonicalKey(bad); err == nil {
			t.Errorf("CanonicalKey(%q) = %q, want an error", bad, k)
		}
	}
}

func BenchmarkCanonicalKey(b *testing.B) {
	for _, f := range []struct {
		name string
		fn   func(string) (string, error)
	}{{"PolitenessKey", PolitenessKey}, {"CanonicalKey", CanonicalKey}} {
		b.Run(f.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := f.fn("http://127.1.0.5:35325/news/2021/story-31.html"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestHostname(t *testing.T) {
	for key, want := range map[string]string{"a.test": "a.test", "a.test:8080": "a.test", "127.0.0.2:80": "127.0.0.2", "[::1]:8080": "::1"} {
		if got := Hostname(key); got != want {
			t.Errorf("Hostname(%q) = %q, want %q", key, got, want)
		}
	}
}
