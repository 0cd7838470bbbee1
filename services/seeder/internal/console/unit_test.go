package console

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

func TestFieldOf(t *testing.T) {
	tests := []struct{ api, want string }{
		{"crawl_id", "crawl_id"},
		{"seeds[3]", "seeds_text"},
		{"seeds", "seeds_text"},
		{"seeds_text line 7", "seeds_text"},
		{"keywords", "keywords.terms"},
		{"keywords.engines[0]", "keywords.engines"},
		{"scope.allow_patterns[2]", "scope.allow_patterns"},
		{"scope.sites[0].hosts[1]", "scope.sites"},
		{"revisit.max_interval", "revisit.max_interval"},
		{"identity.headers[1]", "identity.headers"},
		{"identity.user_agent", "identity.user_agent"},
		{"limits.max_duration", "limits.max_duration"},
		{"extract", "extract"},
		{"documents.content_types", "documents.content_types"},
		{"something.new", ""},
	}
	for _, tt := range tests {
		if got := fieldOf(tt.api); got != tt.want {
			t.Errorf("fieldOf(%q) = %q, want %q", tt.api, got, tt.want)
		}
	}
}

// TestSessions: a session verifies until it expires; a changed payload,
// signature or token does not; the CSRF token is the session's own.
func TestSessions(t *testing.T) {
	k := newKeys("token-0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	c := k.newSession(now)
	p := k.session(c, now.Add(time.Hour))
	if p == nil {
		t.Fatal("a fresh session does not verify")
	}
	if k.session(c, now.Add(SessionTTL+time.Second)) != nil {
		t.Error("an expired session verifies")
	}
	if newKeys("another-token-0123456").session(c, now) != nil {
		t.Error("a session verifies under another token")
	}
	enc, sig, _ := strings.Cut(c, ".")
	tampered := []byte(enc)
	tampered[3] ^= 1
	for _, bad := range []string{"", "x", enc, string(tampered) + "." + sig, enc + "." + sig[1:], enc + ".!!"} {
		if k.session(bad, now) != nil {
			t.Errorf("cookie %q verifies", bad)
		}
	}
	csrf := k.csrfToken(p)
	if !k.csrfOK(p, csrf) {
		t.Error("the session's CSRF token is refused")
	}
	other := k.session(k.newSession(now), now)
	if k.csrfOK(other, csrf) || k.csrfOK(p, "") || k.csrfOK(p, csrf+"A") {
		t.Error("a CSRF token of another session, or none, is accepted")
	}
	if !k.tokenOK("token-0123456789abcdef") || k.tokenOK("token-0123456789abcdeg") || k.tokenOK("") || newKeys("").tokenOK("") {
		t.Error("tokenOK")
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		origin, site string
		want         bool
	}{
		{"", "", true},
		{"http://console.example:8480", "same-origin", true},
		{"https://console.example:8480", "", true},
		{"http://evil.example", "", false},
		{"http://console.example:8481", "", false},
		{"null", "", false},
		{"", "cross-site", false},
		{"", "same-site", false},
		{"", "none", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://console.example:8480/ui/login", nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		if tt.site != "" {
			r.Header.Set("Sec-Fetch-Site", tt.site)
		}
		if got := sameOrigin(r); got != tt.want {
			t.Errorf("Origin %q, Sec-Fetch-Site %q: %v, want %v", tt.origin, tt.site, got, tt.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{"/ui/crawls/x?q=1": "/ui/crawls/x?q=1", "//evil/": "/ui/", "https://evil/": "/ui/",
		"/v1/crawls": "/ui/", "/ui/\\evil": "/ui/", "": "/ui/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCharts: every bucket of the window is a point, missing ones zero;
// the last, partial bucket's rate is over its elapsed part; errors by kind
// line up with the buckets.
func TestCharts(t *testing.T) {
	from := time.Unix(1_800_000_000, 0).UTC()
	to := from.Add(32 * time.Second)
	pts := []point{{T: from, All: 10, S2xx: 10}, {T: from.Add(20 * time.Second), All: 4, S2xx: 2, Errors: 2}, {T: from.Add(30 * time.Second), All: 2, S2xx: 2}}
	kinds := []kindPoint{{T: from.Add(20 * time.Second), Kind: "timeout", N: 2}}
	cs := charts(pts, kinds, from, to, 10*time.Second)
	if len(cs) != 3 {
		t.Fatalf("%d charts", len(cs))
	}
	rate := cs[0].Series[0].Values
	want := []float64{1, 0, 0.4, 1} // 2 attempts in the 2 s of the last bucket
	if len(rate) != len(want) {
		t.Fatalf("rate %v, want %v", rate, want)
	}
	for i := range want {
		if rate[i] != want[i] {
			t.Errorf("rate %v, want %v", rate, want)
			break
		}
	}
	if e := cs[2].Series; len(e) != 1 || e[0].Name != "timeout" || e[0].Values[2] != 2 || e[0].Values[0] != 0 {
		t.Errorf("errors by kind: %+v", e)
	}
	svg := string(cs[0].SVG())
	if !strings.Contains(svg, "<polyline") || !strings.Contains(svg, `aria-label="Fetch attempts per second"`) {
		t.Errorf("svg: %s", svg)
	}
	for v, want := range map[float64]float64{0.3: 0.5, 1: 1, 7: 10, 12: 20, 45: 50} {
		if got := niceCeil(v); got != want {
			t.Errorf("niceCeil(%v) = %v, want %v", v, got, want)
		}
	}
	for v, want := range map[float64]string{7.5: "7.5", 12.5: "12.5", 2500: "2.5k", 3e6: "3M", 0.333: "0.33"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestRuleRows: the crawl's rules in their order joined with the counts of
// its pages; a field is broken only when its rule matched pages and it
// missed every one; rules and fields the pages name that the spec lacks
// are added after; the pages of no rule are counted apart.
func TestRuleRows(t *testing.T) {
	spec := &crawlv1.Extraction{Rules: []*crawlv1.ExtractRule{
		{Name: "b", Fields: []*crawlv1.ExtractField{{Name: "x", Css: "h1"}, {Name: "y", Xpath: "//p", Attr: "title", List: true, Type: "date"}}},
		{Name: "a", Fields: []*crawlv1.ExtractField{{Name: "z", Css: "h2", Html: true}}},
	}}
	counts := []extractCount{
		{Rule: "", Field: "", N: 7}, {Rule: "", Field: "stray", N: 1, Example: "http://127.0.0.2/stray"},
		{Rule: "a", Field: "", N: 0},
		{Rule: "b", Field: "", N: 3}, {Rule: "b", Field: "x", N: 3, Example: "http://127.0.0.2/x"}, {Rule: "b", Field: "y", N: 1, Example: "http://127.0.0.2/y"}, {Rule: "b", Field: "w", N: 2, Example: "http://127.0.0.2/w"},
		{Rule: "c", Field: "", N: 2}, {Rule: "c", Field: "v", N: 1, Example: "http://127.0.0.2/v"},
	}
	rules, noRule := ruleRows(spec, counts)
	if noRule != 7 {
		t.Errorf("noRule = %d, want 7", noRule)
	}
	type row struct {
		rule   string
		inSpec bool
		pages  uint64
		fields []string // name:missing:broken
	}
	var got []row
	for _, r := range rules {
		rr := row{rule: r.Name, inSpec: r.InSpec, pages: r.Pages}
		for _, f := range r.Fields {
			rr.fields = append(rr.fields, fmt.Sprintf("%s:%d:%v:%v:%s", f.Name, f.Missing, f.Broken, f.InSpec, f.Example))
		}
		got = append(got, rr)
	}
	want := []row{
		{"b", true, 3, []string{"x:3:true:true:http://127.0.0.2/x", "y:1:false:true:http://127.0.0.2/y", "w:2:false:false:http://127.0.0.2/w"}},
		{"a", true, 0, []string{"z:0:false:true:"}},
		{"c", false, 2, []string{"v:1:false:false:http://127.0.0.2/v"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ruleRows = %v, want %v", got, want)
	}
	if y := rules[0].Fields[1]; y.Selector() != "//p" || y.Takes() != "@title, every match, date" || y.Share(rules[0].Pages) != 1.0/3 {
		t.Errorf("field y: selector %q, takes %q, share %v", y.Selector(), y.Takes(), y.Share(rules[0].Pages))
	}
	if z := rules[1].Fields[0]; z.Takes() != "inner HTML" || z.Share(0) != 0 {
		t.Errorf("field z: takes %q, share %v", z.Takes(), z.Share(0))
	}
	if rules, noRule := ruleRows(nil, nil); rules != nil || noRule != 0 {
		t.Errorf("no rules: %v, %d", rules, noRule)
	}
}

// TestRenderFromForm: the form's render fields make the request's render
// setting (sites one "hosts MODE" a line, written back the same way by
// formatRenderSite); a line without hosts and mode is an error naming its
// line; an empty form sets nothing; the API's errors find their field.
func TestRenderFromForm(t *testing.T) {
	errs := formErrors{}
	r := renderFromForm("auto", "app.example,shop.example:8080 always\n\n  docs.example never  \nlonely\n", true, errs)
	want := &jobs.Render{Mode: "auto", OtherHosts: true, Sites: []jobs.RenderSite{
		{Hosts: []string{"app.example", "shop.example:8080"}, Mode: "always"},
		{Hosts: []string{"docs.example"}, Mode: "never"},
	}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("renderFromForm = %+v, want %+v", r, want)
	}
	if got := errs["render.sites"]; len(got) != 1 || !strings.Contains(got[0], "line 3") {
		t.Errorf("errors %v, want one naming line 3 (lonely)", errs)
	}
	if r := renderFromForm(" ", "", false, formErrors{}); r != nil {
		t.Errorf("an empty form made %+v", r)
	}
	site := &crawlv1.RenderSite{Hosts: []string{"app.example", "shop.example:8080"}, Mode: crawlv1.RenderMode_RENDER_MODE_ALWAYS}
	if got := formatRenderSite(site); got != "app.example,shop.example:8080 always" {
		t.Errorf("formatRenderSite = %q", got)
	}
	for _, f := range []string{"render.sites[2].hosts[0]", "render.mode", "render.sites[0].mode"} {
		if got := fieldOf(f); got != "render.sites" && got != "render.mode" {
			t.Errorf("fieldOf(%q) = %q, want a render field", f, got)
		}
	}
}
