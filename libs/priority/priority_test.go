package priority

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

func TestOf(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	rules, err := Compile(&crawlv1.Priority{Rules: []*crawlv1.PriorityRule{
		{Pattern: `/product/`, Delta: 50},
		{Pattern: `\?sort=`, Delta: -100},
		{Pattern: `/news/`, Delta: 20, Hosts: []string{"a.example"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		in   Input
		want int32
		sig  string
	}{
		{"no signal", Input{URL: "http://a.example/x", Host: "a.example"}, 0, ""},
		{"rule", Input{URL: "http://a.example/product/1", Host: "a.example"}, 50, "rule"},
		{"two rules add", Input{URL: "http://a.example/product/1?sort=asc", Host: "a.example"}, -50, "rule"},
		{"host rule on its host", Input{URL: "http://a.example/news/1", Host: "a.example"}, 20, "rule"},
		{"host rule with a port", Input{URL: "http://a.example:8080/news/1", Host: "a.example:8080"}, 20, "rule"},
		{"host rule elsewhere", Input{URL: "http://b.example/news/1", Host: "b.example"}, 0, ""},
		{"sitemap 1.0", Input{URL: "http://b.example/", Host: "b.example", HasSitemap: true, SitemapPriority: 1}, 10, "sitemap"},
		{"sitemap 0.5", Input{URL: "http://b.example/", Host: "b.example", HasSitemap: true, SitemapPriority: 0.5}, 0, ""},
		{"sitemap 0.0", Input{URL: "http://b.example/", Host: "b.example", HasSitemap: true, SitemapPriority: 0}, -10, "sitemap"},
		{"sitemap over 1", Input{URL: "http://b.example/", Host: "b.example", HasSitemap: true, SitemapPriority: 7}, 10, "sitemap"},
		{"lastmod this week", Input{URL: "http://b.example/", Host: "b.example", Lastmod: now.Add(-48 * time.Hour), Now: now}, 2, "sitemap"},
		{"lastmod this month", Input{URL: "http://b.example/", Host: "b.example", Lastmod: now.Add(-20 * 24 * time.Hour), Now: now}, 1, "sitemap"},
		{"lastmod old", Input{URL: "http://b.example/", Host: "b.example", Lastmod: now.Add(-90 * 24 * time.Hour), Now: now}, 0, ""},
		{"lastmod in the future", Input{URL: "http://b.example/", Host: "b.example", Lastmod: now.Add(48 * time.Hour), Now: now}, 0, ""},
		{"one in-link", Input{URL: "http://b.example/", Host: "b.example", InLinks: 1}, 0, ""},
		{"two in-links", Input{URL: "http://b.example/", Host: "b.example", InLinks: 2}, 1, "inlinks"},
		{"eight in-links", Input{URL: "http://b.example/", Host: "b.example", InLinks: 8}, 3, "inlinks"},
		{"all three", Input{URL: "http://a.example/product/2", Host: "a.example", HasSitemap: true, SitemapPriority: 0.8, InLinks: 4}, 58, "rule+sitemap+inlinks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, sig := rules.Of(c.in)
			if got != c.want || sig.String() != c.sig {
				t.Errorf("Of = %d (%q), want %d (%q)", got, sig, c.want, c.sig)
			}
		})
	}
}

func TestBreadthFirstIgnoresSignals(t *testing.T) {
	rules, err := Compile(&crawlv1.Priority{BreadthFirst: true, Rules: []*crawlv1.PriorityRule{{Pattern: `.`, Delta: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	if p, sig := rules.Of(Input{URL: "http://a.example/", Host: "a.example", InLinks: 64, HasSitemap: true, SitemapPriority: 1}); p != 0 || sig != 0 {
		t.Fatalf("breadth-first Of = %d (%v), want 0", p, sig)
	}
	var none *Rules
	if p, _ := none.Of(Input{InLinks: 4}); p != 2 {
		t.Fatalf("nil rules: in-links give %d, want 2", p)
	}
}

func TestClamp(t *testing.T) {
	var rs []*crawlv1.PriorityRule
	for range 5 {
		rs = append(rs, &crawlv1.PriorityRule{Pattern: `x`, Delta: 900})
	}
	rules, err := Compile(&crawlv1.Priority{Rules: rs})
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := rules.Of(Input{URL: "http://x/", Host: "x"}); p != Max {
		t.Fatalf("five rules of 900 give %d, want %d", p, Max)
	}
}

func TestCompileErrors(t *testing.T) {
	bad := []*crawlv1.PriorityRule{
		{Pattern: "", Delta: 1},
		{Pattern: "(", Delta: 1},
		{Pattern: "x", Delta: 1001},
		{Pattern: "x", Delta: -1001},
		{Pattern: "x", Delta: 0},
		{Pattern: "x", Delta: 1, Hosts: []string{"a b"}},
	}
	for _, pr := range bad {
		r, err := Compile(&crawlv1.Priority{Rules: []*crawlv1.PriorityRule{pr, {Pattern: "ok", Delta: 3}}})
		if err == nil {
			t.Errorf("rule %v: no error", pr)
		}
		if p, _ := r.Of(Input{URL: "http://h/ok", Host: "h"}); p != 3 {
			t.Errorf("rule %v: the valid rule beside it gives %d, want 3", pr, p)
		}
	}
}

func TestParseRule(t *testing.T) {
	good := map[string]int32{`/product/=+50`: 50, `/a=b=-3`: -3, `x=7`: 7}
	for s, want := range good {
		pr, err := ParseRule(s)
		if err != nil || pr.GetDelta() != want {
			t.Errorf("ParseRule(%q) = %v, %v; want delta %d", s, pr, err, want)
		}
	}
	if pr, _ := ParseRule(`/a=b=-3`); pr.GetPattern() != "/a=b" {
		t.Errorf("pattern %q, want /a=b", pr.GetPattern())
	}
	for _, s := range []string{"", "x", "=5", "x=", "x=+", "x=5a", "x=0", "(=5", "x=2000"} {
		if _, err := ParseRule(s); err == nil {
			t.Errorf("ParseRule(%q): no error", s)
		}
	}
}

func TestInLinksBoost(t *testing.T) {
	for n, want := range map[uint32]int32{0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 7: 2, 8: 3, 1 << 16: 16, 1 << 31: 16} {
		if got := InLinksBoost(n); got != want {
			t.Errorf("InLinksBoost(%d) = %d, want %d", n, got, want)
		}
	}
}

// FuzzRank: a higher priority always goes first; at equal priority the
// shallower; and priority 0 orders by depth alone (today's breadth-first).
func FuzzRank(f *testing.F) {
	f.Add(int32(0), uint32(0), int32(0), uint32(1))
	f.Add(int32(5), uint32(9), int32(4), uint32(0))
	f.Add(int32(-2000), uint32(1<<20), int32(2000), uint32(0))
	f.Fuzz(func(t *testing.T, p1 int32, d1 uint32, p2 int32, d2 uint32) {
		r1, r2 := Rank(p1, d1), Rank(p2, d2)
		c1, c2 := clamp(int64(p1)), clamp(int64(p2))
		e1, e2 := min(d1, 0xffff), min(d2, 0xffff)
		switch {
		case c1 > c2 && r1 >= r2:
			t.Fatalf("priority %d ranks %d, not before priority %d's %d", p1, r1, p2, r2)
		case c1 == c2 && e1 < e2 && r1 >= r2:
			t.Fatalf("equal priority: depth %d ranks %d, not before depth %d's %d", d1, r1, d2, r2)
		case c1 == c2 && e1 == e2 && r1 != r2:
			t.Fatalf("equal priority and depth rank %d and %d", r1, r2)
		}
	})
}

func TestParseSignals(t *testing.T) {
	for s := Signals(0); s < 8; s++ {
		if got := ParseSignals(s.String()); got != s {
			t.Errorf("ParseSignals(%q) = %v, want %v", s.String(), got, s)
		}
	}
	if got := ParseSignals("rule+bogus"); got != Rule {
		t.Errorf("unknown name: %v", got)
	}
}
