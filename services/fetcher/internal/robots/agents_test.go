package robots

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

const agentsBody = `User-agent: *
Disallow: /private
Crawl-delay: 5

User-agent: trawl
Disallow: /secret

User-agent: examplebot
Disallow: /
Allow: /open
Crawl-delay: 2

User-agent: otherbot
Disallow: /other
`

// TestAgents: one robots.txt serves several agents. It is fetched with
// the User-Agent and headers of the crawl that asks, compiled for that
// crawl's product token, the cache's own and every agent asked for lately,
// and each agent gets its own group and Crawl-delay; an agent the entry
// was not compiled for misses, and its fetch compiles it too; the stored
// form brings every agent's rules back.
func TestAgents(t *testing.T) {
	type seen struct{ path, ua, hdr string }
	var (
		mu       sync.Mutex
		requests []seen
	)
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, seen{r.URL.Path, r.UserAgent(), r.Header.Get("X-Crawl")})
		mu.Unlock()
		_, _ = w.Write([]byte(agentsBody))
	}))
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(requests) }
	at := func(i int) seen { mu.Lock(); defer mu.Unlock(); return requests[i] }
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, UserAgent: ua})
	defer f.Close()
	clock := time.Now()
	c := NewCache(f, func() time.Time { return clock }, Options{UserAgent: ua})
	const exampleUA = "examplebot/1.0 (+https://example.org/bot)"
	a, b := base+"/a", base+"/b"

	// verdicts of each agent: path → verdict, and its Crawl-delay
	type want struct {
		verdicts map[string]Verdict
		delay    time.Duration
	}
	wants := map[string]want{
		"":           {map[string]Verdict{"/x": Allowed, "/secret/x": Denied, "/private": Allowed, "/open": Allowed}, 5 * time.Second},
		"examplebot": {map[string]Verdict{"/x": Denied, "/secret/x": Denied, "/private": Denied, "/open": Allowed}, 2 * time.Second},
		"otherbot":   {map[string]Verdict{"/x": Allowed, "/other": Denied, "/private": Allowed}, 5 * time.Second},
		"nobody":     {map[string]Verdict{"/x": Allowed, "/private": Denied, "/secret/x": Allowed}, 5 * time.Second},
	}
	check := func(t *testing.T, r *Rules, agent string) {
		t.Helper()
		w := wants[agent]
		if r.CrawlDelay != w.delay {
			t.Errorf("agent %q: crawl delay %v, want %v", agent, r.CrawlDelay, w.delay)
		}
		for path, v := range w.verdicts {
			if got := r.Check("http://example.com" + path); got != v {
				t.Errorf("agent %q: Check(%s) = %v, want %v", agent, path, got, v)
			}
		}
	}
	// The trawl group has no Crawl-delay: trawl gets the * one.
	wants[""] = want{wants[""].verdicts, 5 * time.Second}

	r := c.FetchAs(t.Context(), a, "h", As{UserAgent: exampleUA, Header: []identity.Header{{Name: "X-Crawl", Value: "example"}}})
	if r.Agent() != "examplebot" {
		t.Fatalf("FetchAs returned the rules of %q, want examplebot's", r.Agent())
	}
	check(t, r, "examplebot")
	if got := at(0); got != (seen{"/a/robots.txt", exampleUA, "example"}) {
		t.Errorf("robots.txt request %+v, want the crawl's User-Agent and header", got)
	}
	own, ok := c.LookupAs(a, "")
	if !ok || own.Agent() != "trawl" {
		t.Fatalf("the cache's own agent: %v %v", own, ok)
	}
	check(t, own, "")
	if r, ok := c.LookupAs(a, "ExampleBot"); !ok || r.Agent() != "examplebot" {
		t.Errorf("product tokens are matched case-insensitively: %v %v", r, ok)
	}
	if _, ok := c.LookupAs(a, "otherbot"); ok {
		t.Fatalf("an agent the entry was not compiled for hit")
	}
	check(t, c.FetchAs(t.Context(), a, "h", As{UserAgent: "otherbot/2 (ops@example.org)"}), "otherbot")
	if n := count(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	for _, agent := range []string{"", "examplebot", "otherbot"} {
		r, ok := c.LookupAs(a, agent)
		if !ok {
			t.Fatalf("agent %q missed after the second fetch", agent)
		}
		check(t, r, agent)
	}

	// Another origin fetched for the cache's own agent is compiled for the
	// agents asked for lately too: no request of theirs.
	c.Fetch(t.Context(), b, "h")
	if got := at(2); got != (seen{"/b/robots.txt", ua, ""}) {
		t.Errorf("robots.txt request %+v, want the fetcher's User-Agent and no header", got)
	}
	for _, agent := range []string{"", "examplebot", "otherbot"} {
		if r, ok := c.LookupAs(b, agent); !ok {
			t.Errorf("agent %q missed on an origin fetched after it was asked for", agent)
		} else {
			check(t, r, agent)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	// An agent no group names gets the * group.
	check(t, c.FetchAs(t.Context(), b, "h", As{UserAgent: "nobody (ops@example.org)"}), "nobody")

	// The stored form, read back into another cache (a restart).
	entry, _ := c.Lookup(b)
	rec, ok := entry.Record()
	if !ok {
		t.Fatal("no record")
	}
	agents, rules := rec.Columns()
	if agents != "trawl,examplebot,nobody,otherbot" || !strings.Contains(rules, "\n# agent: examplebot crawl-delay: 2s\nUser-agent: examplebot\nDisallow: /\nAllow: /open\n") {
		t.Errorf("columns %q, %q", agents, rules)
	}
	back := rec
	back.SetColumns(agents, rules)
	if back.Agent != "trawl" || back.Rules != rec.Rules || len(back.Others) != 3 {
		t.Fatalf("columns read back as %+v, want %+v", back, rec)
	}
	for i := range rec.Others {
		if back.Others[i] != rec.Others[i] {
			t.Errorf("other agent %d read back as %+v, want %+v", i, back.Others[i], rec.Others[i])
		}
	}
	restored := NewCache(nil, func() time.Time { return clock.Add(time.Hour) }, Options{UserAgent: ua})
	if !restored.Restore(back) {
		t.Fatal("not restored")
	}
	for _, agent := range []string{"", "examplebot", "otherbot", "nobody"} {
		if r, ok := restored.LookupAs(b, agent); !ok {
			t.Errorf("restored: agent %q missed", agent)
		} else {
			check(t, r, agent)
		}
	}
	// One agent: the columns are the record's own, as before.
	one := Record{Agent: "trawl", Rules: "User-agent: *\nDisallow: /x\n"}
	if agents, rules := one.Columns(); agents != one.Agent || rules != one.Rules {
		t.Errorf("columns of one agent: %q %q", agents, rules)
	}
	if n := count(); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
}

// TestAgentsBounded: a fetched robots.txt is compiled for at most
// MaxAgents agents besides the cache's own, the most recently asked for.
func TestAgentsBounded(t *testing.T) {
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(agentsBody))
	}))
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, UserAgent: ua})
	defer f.Close()
	c := NewCache(f, time.Now, Options{UserAgent: ua})
	names := make([]string, MaxAgents+2)
	for i := range names {
		names[i] = "bot-" + strings.Repeat("x", i)
		c.FetchAs(t.Context(), base+"/o", "h", As{UserAgent: names[i] + " (ops@example.org)"})
	}
	entry, _ := c.Lookup(base + "/o")
	if n := len(entry.views); n != MaxAgents {
		t.Errorf("compiled for %d other agents, want %d", n, MaxAgents)
	}
	for i, name := range names {
		if _, ok := c.LookupAs(base+"/o", name); ok != (i >= 2) {
			t.Errorf("agent %s compiled: %v", name, ok)
		}
	}
}

// FuzzColumns: reading a stored row never panics, and what Columns writes
// reads back the same.
func FuzzColumns(f *testing.F) {
	f.Add("trawl,examplebot", "User-agent: trawl\nDisallow: /a\n# agent: examplebot crawl-delay: 2s\nUser-agent: *\n", "/x", int64(time.Second))
	f.Add("trawl", "", "", int64(0))
	f.Fuzz(func(t *testing.T, agents, rules, pattern string, delay int64) {
		var rec Record
		rec.SetColumns(agents, rules)
		pattern = strings.Map(func(r rune) rune {
			if r == '\n' || r == '#' || r == '\r' {
				return -1
			}
			return r
		}, pattern)
		want := Record{Agent: "trawl", Rules: "User-agent: trawl\nDisallow: /s\n",
			Others: []AgentRules{{Agent: "a-bot", Rules: "User-agent: *\nDisallow: " + pattern + "\n", CrawlDelay: time.Duration(delay)}, {Agent: "b_bot", Rules: "User-agent: b_bot\n"}}}
		var got Record
		got.SetColumns(want.Columns())
		if got.Agent != want.Agent || got.Rules != want.Rules || len(got.Others) != 2 || got.Others[0] != want.Others[0] || got.Others[1] != want.Others[1] {
			t.Fatalf("read back %+v, want %+v", got, want)
		}
	})
}
