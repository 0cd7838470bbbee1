package robots

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jimsmart/grobotstxt"

	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// verdictCase is one robots.txt body and the verdicts it gives paths.
type verdictCase struct {
	name     string
	body     string
	agent    string             // product token; "trawl" when empty
	verdicts map[string]Verdict // path (with query) → verdict
}

func runVerdicts(t *testing.T, tests []verdictCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := tt.agent
			if agent == "" {
				agent = "trawl"
			}
			c := NewCache(nil, time.Now, Options{UserAgent: agent + "/1.0"})
			r := &Rules{Outcome: Parsed, agent: c.agent, group: c.compile(tt.body)}
			for path, want := range tt.verdicts {
				if got := r.Check("http://example.com" + path); got != want {
					t.Errorf("Check(%s) = %v, want %v; rules kept:\n%s", path, got, want, r.Text())
				}
			}
		})
	}
}

// TestEscapeForms: the rules that grobotstxt applied to encoded rule paths
// and canonical (decoded) URLs, which let pages be fetched that a rule
// disallows, and the lower-case escapes it corrupted.
func TestEscapeForms(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{
			name: "encoded tilde in the rule",
			body: "User-agent: *\nDisallow: /%7Ejoe/\n",
			verdicts: map[string]Verdict{
				"/~joe/index.html": Denied, "/%7Ejoe/index.html": Denied, "/%7ejoe/": Denied, "/~joe": Allowed, "/~jane/": Allowed,
			},
		},
		{
			name:     "encoded hyphen in the rule",
			body:     "User-agent: *\nDisallow: /a%2Db\n",
			verdicts: map[string]Verdict{"/a-b": Denied, "/a%2Db": Denied, "/a%2db/c": Denied, "/a_b": Allowed},
		},
		{
			name:     "fully encoded word in the rule",
			body:     "User-agent: *\nDisallow: /%62%61%7A\n",
			verdicts: map[string]Verdict{"/baz": Denied, "/%62%61%7a": Denied, "/ba%7A?q": Denied, "/bar": Allowed},
		},
		{
			name:     "encoded URL, plain rule",
			body:     "User-agent: *\nDisallow: /~joe/\nDisallow: /baz\n",
			verdicts: map[string]Verdict{"/%7Ejoe/": Denied, "/%7ejoe/x": Denied, "/%62%61%7A": Denied, "/b%61z/x": Denied},
		},
		{
			name:     "lower-case escape of a reserved character",
			body:     "User-agent: *\nDisallow: /a%3cb\nDisallow: /x%2fy\n",
			verdicts: map[string]Verdict{"/a%3Cb": Denied, "/a%3cb": Denied, "/a<b": Denied, "/x%2Fy": Denied, "/x/y": Allowed},
		},
		{
			name:     "lower-case escape of UTF-8",
			body:     "User-agent: *\nDisallow: /caf%c3%a9\n",
			verdicts: map[string]Verdict{"/caf%C3%A9": Denied, "/caf\u00e9": Denied, "/cafe": Allowed},
		},
		{
			name:     "lower-case escape in an Allow keeps its length",
			body:     "User-agent: *\nDisallow: /p\nAllow: /p%3f\n",
			verdicts: map[string]Verdict{"/p%3F": Allowed, "/p%3Fx": Allowed, "/p": Denied, "/p?x": Denied},
		},
		{
			name:     "reserved escapes stay distinct from their characters",
			body:     "User-agent: *\nDisallow: /a%2Fb\n",
			verdicts: map[string]Verdict{"/a%2Fb": Denied, "/a%2fb": Denied, "/a/b": Allowed},
		},
		{
			name:     "stray percent",
			body:     "User-agent: *\nDisallow: /100%\n",
			verdicts: map[string]Verdict{"/100%": Denied, "/100%25": Denied, "/100": Allowed},
		},
		{
			name:     "quote in the query as the URL serializer writes it",
			body:     "User-agent: *\nDisallow: /q?x='\n",
			verdicts: map[string]Verdict{"/q?x=%27": Denied, "/q?x='": Denied, "/q?x=": Allowed},
		},
	})
}

// TestGrobotstxtLowerCaseEscapeBug documents the upstream defect worked
// around by compile: grobotstxt alone never matches a rule written with a
// lower-case escape, whichever way the URL spells it.
func TestGrobotstxtLowerCaseEscapeBug(t *testing.T) {
	body := "User-agent: *\nDisallow: /a%3cb\n"
	for _, u := range []string{"http://h/a%3Cb", "http://h/a%3cb"} {
		if !grobotstxt.AgentAllowed(body, "trawl", u) {
			t.Fatalf("grobotstxt now denies %s: the upstream bug is fixed, compile's upper-casing can go", u)
		}
		if v := parsed(body).Check(u); v != Denied {
			t.Errorf("Check(%s) = %v, want Denied", u, v)
		}
	}
}

// TestRFC9309 checks the examples of RFC 9309: §2.2.2 (percent-encoding),
// §2.2.3 (special characters) and §5.1, §5.2 (examples).
func TestRFC9309(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{
			name:     "2.2.2 query compared as is",
			body:     "User-agent: *\nDisallow: /foo/bar?baz=quz\n",
			verdicts: map[string]Verdict{"/foo/bar?baz=quz": Denied, "/foo/bar?baz=qux": Allowed, "/foo/bar": Allowed},
		},
		{
			name:     "2.2.2 reserved characters of a query stay encoded",
			body:     "User-agent: *\nDisallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar\n",
			verdicts: map[string]Verdict{"/foo/bar?baz=https%3A%2F%2Ffoo.bar": Denied, "/foo/bar?baz=https%3a%2f%2ffoo.bar": Denied},
		},
		{
			name:     "2.2.2 UTF-8 rule, encoded URL",
			body:     "User-agent: *\nDisallow: /foo/bar/\u30c4\n",
			verdicts: map[string]Verdict{"/foo/bar/%E3%83%84": Denied, "/foo/bar/\u30c4": Denied, "/foo/bar/x": Allowed},
		},
		{
			name:     "2.2.2 encoded rule, encoded or UTF-8 URL",
			body:     "User-agent: *\nDisallow: /foo/bar/%E3%83%84\n",
			verdicts: map[string]Verdict{"/foo/bar/%E3%83%84": Denied, "/foo/bar/%e3%83%84": Denied, "/foo/bar/\u30c4": Denied},
		},
		{
			name:     "2.2.2 encoded unreserved characters",
			body:     "User-agent: *\nDisallow: /foo/bar/%62%61%7A\n",
			verdicts: map[string]Verdict{"/foo/bar/baz": Denied, "/foo/bar/%62%61%7A": Denied},
		},
		{
			name: "2.2.3 an escaped * is a literal *",
			body: "User-agent: *\nDisallow: /path/file-with-a-%2A.html\n",
			verdicts: map[string]Verdict{
				"/path/file-with-a-*.html": Denied, "/path/file-with-a-%2A.html": Denied, "/path/file-with-a-x.html": Allowed,
			},
		},
		{
			name:     "2.2.3 an escaped $ is a literal $",
			body:     "User-agent: *\nDisallow: /path/foo-%24\n",
			verdicts: map[string]Verdict{"/path/foo-$": Denied, "/path/foo-%24": Denied, "/path/foo-": Allowed, "/path/foo-x": Allowed},
		},
		{
			name:     "2.2.3 comments",
			body:     "User-agent: *\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
			verdicts: map[string]Verdict{"/foo/bar": Allowed, "/foo/quz": Denied, "/foo/quz/x": Denied},
		},
		{
			name:  "5.1 simple example, the global group",
			body:  rfcExample,
			agent: "otherbot",
			verdicts: map[string]Verdict{
				"/a/b.gif": Denied, "/a/b.gif?x": Allowed, "/example/x": Denied, "/publications/": Allowed, "/": Allowed,
			},
		},
		{
			name:  "5.1 simple example, foobot",
			body:  rfcExample,
			agent: "foobot",
			verdicts: map[string]Verdict{
				"/example/page.html": Allowed, "/example/allowed.gif": Allowed, "/example/other": Denied, "/": Denied, "/publications/": Denied,
			},
		},
		{
			name:     "5.1 simple example, barbot and bazbot share a group",
			body:     rfcExample,
			agent:    "bazbot",
			verdicts: map[string]Verdict{"/example/page.html": Denied, "/example/other": Allowed, "/a.gif": Allowed},
		},
		{
			name:     "5.1 simple example, quxbot has an empty group",
			body:     rfcExample,
			agent:    "quxbot",
			verdicts: map[string]Verdict{"/example/page.html": Allowed, "/a.gif": Allowed, "/": Allowed},
		},
		{
			name:     "5.2 longest match",
			body:     "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n",
			agent:    "foobot",
			verdicts: map[string]Verdict{"/example/page/": Allowed, "/example/page/x": Allowed, "/example/page/disallowed.gif": Denied},
		},
	})
}

const rfcExample = `User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
`

// TestGoogleMatcher checks the behaviours of Google's robots.txt test
// suite (robots_test.cc) that the compiled rules must keep.
func TestGoogleMatcher(t *testing.T) {
	runVerdicts(t, []verdictCase{
		{
			name:     "longest match wins",
			body:     "User-agent: *\nAllow: /x/page.html\nDisallow: /x/\n",
			verdicts: map[string]Verdict{"/x/page.html": Allowed, "/x/other": Denied},
		},
		{
			name:     "allow wins a tie",
			body:     "User-agent: *\nAllow: /page\nDisallow: /page\n",
			verdicts: map[string]Verdict{"/page": Allowed, "/page2": Allowed},
		},
		{
			name:     "longer wildcard pattern wins",
			body:     "User-agent: *\nAllow: /page\nDisallow: /*.html\n",
			verdicts: map[string]Verdict{"/page.html": Denied, "/page": Allowed},
		},
		{
			name:     "longer allow beats wildcard disallow",
			body:     "User-agent: *\nAllow: /x/page.\nDisallow: /*.html\n",
			verdicts: map[string]Verdict{"/x/page.html": Allowed, "/x/y.html": Denied},
		},
		{
			name:     "end anchor",
			body:     "User-agent: *\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
			verdicts: map[string]Verdict{"/foo/bar": Denied, "/foo/bar/qux": Allowed, "/foo/bar/": Allowed, "/foo/bar/baz": Allowed, "/foo/bar?q": Allowed},
		},
		{
			name:     "a $ not at the end is a literal",
			body:     "User-agent: *\nDisallow: /a$b\n",
			verdicts: map[string]Verdict{"/a$b": Denied, "/a%24b": Denied, "/a": Allowed, "/ab": Allowed},
		},
		{
			name: "wildcards",
			body: "User-agent: *\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\nDisallow: /*?*sid=\n",
			verdicts: map[string]Verdict{
				"/foo/bar/quz": Denied, "/foo/quz": Allowed, "/foo//quz": Allowed, "/foo/bax/quz": Allowed,
				"/foo/x/qux": Allowed, "/p?a=1&sid=2": Denied, "/p?a=1": Allowed,
			},
		},
		{
			name:     "paths are case-sensitive",
			body:     "User-agent: *\nDisallow: /x/\n",
			verdicts: map[string]Verdict{"/x/a": Denied, "/X/a": Allowed},
		},
		{
			name:     "directives and agents are case-insensitive",
			body:     "USER-AGENT: TRAWL\nDISALLOW: /a\nuser-agent: *\ndisallow: /\n",
			verdicts: map[string]Verdict{"/a": Denied, "/b": Allowed},
		},
		{
			name:     "the agent's group replaces the global one",
			body:     "User-agent: *\nDisallow: /\n\nUser-agent: trawl\nDisallow: /private\n",
			verdicts: map[string]Verdict{"/": Allowed, "/private": Denied},
		},
		{
			name:     "a group of the agent with an empty rule allows everything",
			body:     "User-agent: trawl\nAllow:\n\nUser-agent: *\nDisallow: /\n",
			verdicts: map[string]Verdict{"/": Allowed, "/x": Allowed},
		},
		{
			name:     "blank lines do not end a list of agents",
			body:     "User-agent: trawl\n\nUser-agent: *\nDisallow: /\n",
			verdicts: map[string]Verdict{"/": Denied, "/x": Denied},
		},
		{
			name:     "an empty Disallow allows everything",
			body:     "User-agent: *\nDisallow:\n",
			verdicts: map[string]Verdict{"/": Allowed, "/x": Allowed},
		},
		{
			name:     "groups of the agent are merged",
			body:     "User-agent: trawl\nDisallow: /a\n\nUser-agent: other\nDisallow: /b\n\nUser-agent: trawl\nDisallow: /c\n",
			verdicts: map[string]Verdict{"/a": Denied, "/b": Allowed, "/c": Denied},
		},
		{
			name:     "consecutive user-agent lines form one group",
			body:     "User-agent: other\nUser-agent: trawl\nDisallow: /x\n",
			verdicts: map[string]Verdict{"/x": Denied, "/y": Allowed},
		},
		{
			name:     "unknown lines do not end the list of agents",
			body:     "User-agent: other\nCrawl-delay: 1\nUser-agent: trawl\nDisallow: /x\n",
			verdicts: map[string]Verdict{"/x": Denied},
		},
		{
			name:     "a rule line ends the list of agents",
			body:     "User-agent: trawl\nDisallow: /x\nUser-agent: other\nDisallow: /y\n",
			verdicts: map[string]Verdict{"/x": Denied, "/y": Allowed},
		},
		{
			name:     "the product token is matched, not the version",
			body:     "User-agent: trawl/2.0\nDisallow: /x\n",
			verdicts: map[string]Verdict{"/x": Denied},
		},
		{
			name:     "another agent sharing a prefix is not ours",
			body:     "User-agent: trawler\nDisallow: /x\n",
			verdicts: map[string]Verdict{"/x": Allowed},
		},
		{
			name:     "star with a comment is global",
			body:     "User-agent: * for everyone\nDisallow: /x\n",
			verdicts: map[string]Verdict{"/x": Denied},
		},
		{
			name:     "rules before any user-agent are ignored",
			body:     "Disallow: /x\nUser-agent: *\nDisallow: /y\n",
			verdicts: map[string]Verdict{"/x": Allowed, "/y": Denied},
		},
		{
			name: "index.html allows its directory",
			body: "User-Agent: *\nAllow: /allowed-slash/index.html\nDisallow: /\n",
			verdicts: map[string]Verdict{
				"/allowed-slash/": Allowed, "/allowed-slash/index.htm": Denied, "/allowed-slash/index.html": Allowed, "/anyother-url": Denied,
			},
		},
		{
			name:     "no group for the agent or for *",
			body:     "User-agent: other\nDisallow: /\n",
			verdicts: map[string]Verdict{"/": Allowed},
		},
		{
			name:     "empty body",
			body:     "",
			verdicts: map[string]Verdict{"/": Allowed},
		},
		{
			name:     "CRLF and a byte order mark",
			body:     "\xef\xbb\xbfUser-agent: *\r\nDisallow: /x\r\n",
			verdicts: map[string]Verdict{"/x": Denied, "/y": Allowed},
		},
	})
}

func TestRulesText(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"agent's rules only", rulesBody, "User-agent: trawl\nDisallow: /secret\nAllow: /secret/open\n"},
		{"global rules", "User-agent: *\nDisallow: /%7Ejoe/ # home\nAllow: /a%3cb\nSitemap: /s.xml\n", "User-agent: *\nDisallow: /~joe/\nAllow: /a%3Cb\n"},
		{"literal dollar, anchor and index.html", "User-agent: *\nAllow: /d/index.html\nDisallow: /a$b$\n", "User-agent: *\nAllow: /d/index.html\nDisallow: /a%24b$\n"},
		{"nothing for us", "User-agent: other\nDisallow: /\n", "User-agent: *\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parsed(tt.body).Text(); got != tt.want {
				t.Fatalf("Text = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRulesBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\n")
	rule := "Disallow: /" + strings.Repeat("\u30c4", 100) + "\n" // 900 bytes once encoded
	for b.Len() < MaxBodyBytes {
		b.WriteString(rule)
	}
	r := parsed(b.String())
	if n := len(r.Text()); n > MaxRulesBytes+len(r.group.rules)*len("Disallow: \n")+64 {
		t.Fatalf("kept %d bytes of rules, want about MaxRulesBytes (%d)", n, MaxRulesBytes)
	}
	if len(r.group.rules) == 0 || r.Check("http://h/"+strings.Repeat("\u30c4", 100)) != Denied {
		t.Fatalf("the rules within the bound were lost")
	}
}

// respell returns another spelling of the URL path or rule path s: from
// its normalized form, each unreserved character is percent-encoded or not
// and each hex digit of an escape upper- or lower-cased, at random.
func respell(s string, rng *rand.Rand) string {
	n := urlcanon.NormalizePathQuery(s)
	var b strings.Builder
	for i := 0; i < len(n); i++ {
		c := n[i]
		switch {
		case c == '%' && i+2 < len(n):
			b.WriteByte('%')
			b.WriteString(randCase(n[i+1:i+3], rng))
			i += 2
		case isUnreservedByte(c) && rng.IntN(2) == 0:
			b.WriteByte('%')
			b.WriteString(randCase(fmt.Sprintf("%02X", c), rng))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func randCase(hex string, rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		return strings.ToLower(hex)
	}
	return hex
}

func isUnreservedByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// FuzzSpelling: for any rule path and URL path, the verdict is the same
// whichever spelling either side uses (unreserved characters encoded or
// not, hex digits in either case), for a Disallow and for an Allow that
// competes with a shorter Disallow; nothing panics.
func FuzzSpelling(f *testing.F) {
	seeds := [][2]string{
		{"/%7Ejoe/", "~joe/x"}, {"/a%2Db", "a-b"}, {"/%62%61%7A", "baz"}, {"/a%3cb", "a%3Cb"},
		{"/foo/bar/\u30c4", "foo/bar/%E3%83%84"}, {"/*.gif$", "x/y.GIF"}, {"/a$b", "a%24b"},
		{"/path/file-with-a-%2A.html", "path/file-with-a-*.html"}, {"/100%", "100%25"}, {"/q?x='", "q?x=%27"},
	}
	for i, s := range seeds {
		f.Add(s[0], s[1], uint64(i))
	}
	f.Fuzz(func(t *testing.T, rulePath, urlPath string, seed uint64) {
		// one line, no comment: what a robots.txt value can hold
		rulePath = strings.TrimSpace(strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' || r == '#' {
				return -1
			}
			return r
		}, rulePath))
		if 3*len(rulePath)+32 > 2083*8 {
			return // grobotstxt cuts longer lines: a longer spelling would lose its end
		}
		urlPath, _, _ = strings.Cut(urlPath, "#")
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for _, tmpl := range []string{"User-agent: *\nDisallow: %s\n", "User-agent: *\nDisallow: /\nAllow: %s\n"} {
			want := parsed(fmt.Sprintf(tmpl, rulePath)).Check("http://h/" + urlPath)
			for range 4 {
				rp, up := respell(rulePath, rng), respell("/"+urlPath, rng)
				if got := parsed(fmt.Sprintf(tmpl, rp)).Check("http://h" + up); got != want {
					t.Fatalf("rule %q, URL path /%s: %v; respelled rule %q, URL path %s: %v", rulePath, urlPath, want, rp, up, got)
				}
			}
		}
	})
}

// FuzzAgainstGrobotstxt: where Google's matcher is not affected by the
// escape defects (no '%' in the body; URL paths of characters that no
// normalization changes and no pattern treats specially), the compiled
// rules give grobotstxt's verdict: the group selection, longest match and
// tie-breaking are its own.
func FuzzAgainstGrobotstxt(f *testing.F) {
	f.Add(rulesBody, "secret/open/x", "trawl")
	f.Add(rfcExample, "example/page.html", "foobot")
	f.Add("User-agent: a\nCrawl-delay: 1\nuser-agent: b\nAllow: /x\nDisallow: /\n", "x/index.html", "b")
	f.Add("User-Agent: *\nAllow: /d/index.html\nDisallow: /\n", "d/", "x")
	f.Fuzz(func(t *testing.T, body, path, agent string) {
		if strings.Contains(body, "%") || identity.ProductToken(agent) != agent || agent == "" {
			return
		}
		for i := 0; i < len(path); i++ {
			if !isUnreservedByte(path[i]) && !strings.ContainsRune("/?=&;:@!,+", rune(path[i])) {
				return
			}
		}
		u := "http://h/" + path
		want := Denied
		if grobotstxt.AgentAllowed(body, agent, u) {
			want = Allowed
		}
		g, err := compile(body, agent)
		if err != nil {
			t.Skip("grobotstxt's parser panicked") // FuzzRules reports it
		}
		r := &Rules{Outcome: Parsed, agent: agent, group: g}
		if got := r.Check(u); got != want {
			t.Fatalf("agent %q, %s: %v, grobotstxt says %v; rules kept:\n%s", agent, u, got, want, r.Text())
		}
	})
}
