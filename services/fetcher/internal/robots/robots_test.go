package robots

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

const ua = "trawl/0.1 (+https://github.com/trawl-crawler/trawl)"

func serve(t *testing.T, ip string, h http.Handler) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

const rulesBody = `# test
User-agent: *
Disallow: /private
Crawl-delay: 5

User-agent: trawl
Disallow: /secret
Allow: /secret/open
Crawl-delay: 2.5

Sitemap: http://example.com/sitemap.xml
`

func TestCacheFetch(t *testing.T) {
	var requests atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(rulesBody))
	})
	// each "origin" below is emulated by a path prefix: the test calls
	// Fetch with origin = base + prefix.
	mux.HandleFunc("/missing/robots.txt", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("/forbidden/robots.txt", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(403) })
	mux.HandleFunc("/broken/robots.txt", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) })
	mux.HandleFunc("/limited/robots.txt", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(429) })
	mux.HandleFunc("/moved/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/moved2/robots.txt", http.StatusFound)
	})
	mux.HandleFunc("/moved2/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok/robots.txt", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop/robots.txt", http.StatusFound)
	})
	mux.HandleFunc("/huge/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("User-agent: *\nDisallow: /x\n"))
		_, _ = w.Write([]byte(strings.Repeat("# padding padding padding padding\n", 20000)))
		_, _ = w.Write([]byte("Disallow: /beyond-the-cap\n"))
	})
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		mux.ServeHTTP(w, r)
	}))
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		name         string
		origin       string
		wantOutcome  Outcome
		wantKind     failure.Kind
		wantRequests int
		wantDelay    time.Duration
		wantSitemaps int
		verdicts     map[string]Verdict // path → verdict
	}{
		{
			name: "parsed rules", origin: base + "/ok", wantOutcome: Parsed, wantRequests: 1,
			wantDelay: 2500 * time.Millisecond, wantSitemaps: 1,
			verdicts: map[string]Verdict{"/": Allowed, "/private": Allowed, "/secret/x": Denied, "/secret/open/x": Allowed},
		},
		{name: "404 allows all", origin: base + "/missing", wantOutcome: AllowAll, wantRequests: 1, verdicts: map[string]Verdict{"/anything": Allowed}},
		{name: "403 allows all", origin: base + "/forbidden", wantOutcome: AllowAll, wantRequests: 1, verdicts: map[string]Verdict{"/anything": Allowed}},
		{name: "503 disallows for now", origin: base + "/broken", wantOutcome: Unavailable, wantKind: failure.RobotsUnavailable, wantRequests: 1, verdicts: map[string]Verdict{"/": TryLater}},
		{name: "429 disallows for now", origin: base + "/limited", wantOutcome: Unavailable, wantKind: failure.RobotsUnavailable, wantRequests: 1, verdicts: map[string]Verdict{"/": TryLater}},
		{
			name: "redirects followed", origin: base + "/moved", wantOutcome: Parsed, wantRequests: 3, wantDelay: 2500 * time.Millisecond, wantSitemaps: 1,
			verdicts: map[string]Verdict{"/secret/x": Denied},
		},
		{name: "too many redirects allow all", origin: base + "/loop", wantOutcome: AllowAll, wantRequests: MaxRedirects + 1, verdicts: map[string]Verdict{"/": Allowed}},
		{
			name: "oversize body parsed up to the cap", origin: base + "/huge", wantOutcome: Parsed, wantRequests: 1,
			verdicts: map[string]Verdict{"/x/y": Denied, "/beyond-the-cap": Allowed, "/y": Allowed},
		},
		{name: "network failure disallows for now", origin: dead, wantOutcome: Unavailable, wantKind: failure.Connect, wantRequests: 1, verdicts: map[string]Verdict{"/": TryLater}},
	}
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, UserAgent: ua, FetchTimeout: 2 * time.Second})
	defer f.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Now()
			reg := prometheus.NewPedanticRegistry()
			c := NewCache(f, func() time.Time { return clock }, Options{UserAgent: ua, Metrics: reg})
			r := c.Fetch(t.Context(), tt.origin, "h")
			if r.Outcome != tt.wantOutcome || r.Kind != tt.wantKind || r.Requests != tt.wantRequests {
				t.Fatalf("outcome, kind, requests = %q %q %d (err %v), want %q %q %d", r.Outcome, r.Kind, r.Requests, r.Err, tt.wantOutcome, tt.wantKind, tt.wantRequests)
			}
			for _, o := range Outcomes { // one fetch, counted by its outcome
				if got, want := metricstest.Value(t, reg, "robots_total", "outcome", string(o)), map[bool]float64{true: 1}[o == tt.wantOutcome]; got != want {
					t.Errorf("robots_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
			if r.CrawlDelay != tt.wantDelay || len(r.Sitemaps) != tt.wantSitemaps {
				t.Errorf("crawl delay, sitemaps = %v %v, want %v %d", r.CrawlDelay, r.Sitemaps, tt.wantDelay, tt.wantSitemaps)
			}
			for path, want := range tt.verdicts {
				if got := r.Check("http://example.com" + path); got != want {
					t.Errorf("Check(%s) = %v, want %v", path, got, want)
				}
			}
			// cached until it expires
			before := requests.Load()
			if _, ok := c.Lookup(tt.origin); !ok {
				t.Fatalf("Lookup after Fetch missed")
			}
			ttl := DefaultTTL
			if tt.wantOutcome == Unavailable {
				ttl = DefaultErrorTTL
			}
			clock = clock.Add(ttl - time.Second)
			if _, ok := c.Lookup(tt.origin); !ok {
				t.Fatalf("Lookup before expiry missed")
			}
			clock = clock.Add(time.Second)
			if _, ok := c.Lookup(tt.origin); ok {
				t.Fatalf("Lookup after expiry hit")
			}
			if requests.Load() != before {
				t.Fatalf("Lookup made requests")
			}
		})
	}
}

func TestCacheBounded(t *testing.T) {
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("User-agent: *\nDisallow: /x\n"))
	}))
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	defer f.Close()
	c := NewCache(f, time.Now, Options{UserAgent: ua, MaxEntries: 3})
	for i := range 10 {
		c.Fetch(t.Context(), fmt.Sprintf("%s/o%d", base, i), "h")
		if _, ok := c.Lookup(base + "/o0"); !ok && i < 3 {
			t.Fatalf("origin 0 evicted after %d fetches although recently used", i+1)
		}
	}
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	if _, ok := c.Lookup(base + "/o9"); !ok {
		t.Fatalf("most recent origin missing")
	}
}

func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		name string
		body string
		want time.Duration
	}{
		{name: "none", body: "User-agent: *\nDisallow: /\n", want: 0},
		{name: "global", body: "User-agent: *\nCrawl-delay: 3\n", want: 3 * time.Second},
		{name: "specific wins", body: "User-agent: *\nCrawl-delay: 3\n\nUser-agent: Trawl\nCrawl-delay: 1\n", want: time.Second},
		{name: "specific before global", body: "User-agent: trawl\nCrawl-delay: 0.5\nUser-agent: *\nCrawl-delay: 9\n", want: 500 * time.Millisecond},
		{name: "multi agent group", body: "User-agent: other\nUser-agent: trawl\nCrawl-delay: 4\n", want: 4 * time.Second},
		{name: "other agent only", body: "User-agent: other\nCrawl-delay: 4\n", want: 0},
		{name: "invalid ignored", body: "User-agent: *\nCrawl-delay: soon\n", want: 0},
		{name: "negative ignored", body: "User-agent: *\nCrawl-delay: -1\n", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CrawlDelay(tt.body, "trawl"); got != tt.want {
				t.Fatalf("CrawlDelay = %v, want %v", got, tt.want)
			}
		})
	}
}

// parsed returns the Rules of a 2xx robots.txt body for the agent "trawl".
func parsed(body string) *Rules {
	c := NewCache(nil, time.Now, Options{UserAgent: ua})
	return &Rules{Outcome: Parsed, agent: c.agent, group: c.compile(body)}
}

// FuzzRules checks, for any robots.txt body and URL path, that parsing and
// matching never panic, that the crawl delay is never negative, that a
// body disallowing everything for * denies every path, and that the rules
// kept for the agent (Rules.Text) compile back to the same rules.
func FuzzRules(f *testing.F) {
	f.Add(rulesBody, "/secret/x")
	f.Add("User-agent: *\nDisallow: /\n", "/")
	f.Add("\xff\xfeUser-agent: *\x00Crawl-delay: 1e308", "/%zz?a#b")
	f.Add("User-agent: trawl\nAllow: /a/index.html\nDisallow: /%7e$x*$\n", "/a/")
	f.Fuzz(func(t *testing.T, body, path string) {
		if d := CrawlDelay(body, "trawl"); d < 0 {
			t.Fatalf("negative crawl delay %v", d)
		}
		g, err := compile(body, "trawl")
		if err != nil {
			t.Fatalf("compile: %v", err)
		}
		if again, err := compile(g.text("trawl"), "trawl"); err != nil || !reflect.DeepEqual(again.rules, g.rules) {
			t.Fatalf("rules of %q:\n%s compile back to %+v (%v), want %+v", body, g.text("trawl"), again.rules, err, g.rules)
		}
		u := "http://example.com/" + strings.TrimPrefix(path, "/")
		_ = parsed(body).Check(u)
		if v := parsed("User-agent: *\nDisallow: /\n").Check(u); v != Denied {
			t.Fatalf("disallow-all allowed %q", path)
		}
	})
}

// TestRecordRestore: the durable form of a fetched robots.txt comes back
// with its rules, Crawl-delay and Sitemap lines into another cache (as
// after a restart), unless it is expired, for another agent, not a valid
// answer, or older than what that cache holds; an Unavailable result has no
// durable form.
func TestRecordRestore(t *testing.T) {
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok/robots.txt":
			_, _ = w.Write([]byte(rulesBody))
		case "/gone/robots.txt":
			http.NotFound(w, r)
		default:
			w.WriteHeader(503)
		}
	}))
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, UserAgent: ua})
	defer f.Close()
	fetchedAt := time.Now()
	first := NewCache(f, func() time.Time { return fetchedAt }, Options{UserAgent: ua})
	ok := first.Fetch(t.Context(), base+"/ok", "h")
	gone := first.Fetch(t.Context(), base+"/gone", "h")
	down := first.Fetch(t.Context(), base+"/down", "h")
	if _, kept := down.Record(); kept {
		t.Fatalf("an Unavailable robots.txt has a durable form")
	}
	okRec, _ := ok.Record()
	goneRec, _ := gone.Record()

	tests := []struct {
		name   string
		rec    Record
		agent  string        // of the new cache
		later  time.Duration // its clock, after the fetch
		cached *Record       // already in the new cache
		want   bool
	}{
		{name: "parsed", rec: okRec, agent: ua, later: time.Hour, want: true},
		{name: "allow all", rec: goneRec, agent: ua, later: time.Hour, want: true},
		{name: "expired", rec: okRec, agent: ua, later: DefaultTTL, want: false},
		{name: "other agent", rec: okRec, agent: "otherbot/1.0", later: time.Hour, want: false},
		{name: "unavailable", rec: func() Record { r := okRec; r.Outcome = Unavailable; return r }(), agent: ua, later: time.Hour, want: false},
		{name: "newer already cached", rec: okRec, agent: ua, later: time.Hour, cached: func() *Record {
			r := goneRec
			r.Origin, r.FetchedAt = okRec.Origin, okRec.FetchedAt.Add(time.Minute)
			return &r
		}(), want: false},
		{name: "older already cached", rec: okRec, agent: ua, later: time.Hour, cached: func() *Record {
			r := goneRec
			r.Origin, r.FetchedAt = okRec.Origin, okRec.FetchedAt.Add(-time.Minute)
			return &r
		}(), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCache(nil, func() time.Time { return fetchedAt.Add(tt.later) }, Options{UserAgent: tt.agent})
			if tt.cached != nil && !c.Restore(*tt.cached) {
				t.Fatalf("could not cache the older entry")
			}
			if got := c.Restore(tt.rec); got != tt.want {
				t.Fatalf("Restore = %v, want %v", got, tt.want)
			}
			r, found := c.Lookup(tt.rec.Origin)
			if !tt.want {
				if found && tt.cached == nil {
					t.Fatalf("refused record cached anyway")
				}
				return
			}
			if !found || r.Outcome != tt.rec.Outcome || r.CrawlDelay != tt.rec.CrawlDelay || !reflect.DeepEqual(r.Sitemaps, tt.rec.Sitemaps) ||
				!r.Expires.Equal(tt.rec.Expires) || r.Requests != 0 {
				t.Fatalf("restored %+v (found %v), want the record's outcome, delay, sitemaps and expiry", r, found)
			}
			for _, path := range []string{"/", "/private", "/secret/x", "/secret/open/x", "/%73ecret/x"} {
				src := ok
				if tt.rec.Outcome == AllowAll {
					src = gone
				}
				if got, want := r.Check("http://example.com"+path), src.Check("http://example.com"+path); got != want {
					t.Errorf("restored Check(%s) = %v, fetched rules say %v", path, got, want)
				}
			}
		})
	}
	if okRec.Rules != "User-agent: trawl\nDisallow: /secret\nAllow: /secret/open\n" || okRec.BodyBytes != len(rulesBody) ||
		okRec.Status != 200 || okRec.Agent != "trawl" {
		t.Errorf("record = %+v", okRec)
	}
}

func TestVerdictAllow(t *testing.T) {
	for _, c := range []struct {
		v                      Verdict
		exempt                 bool
		allow, exempted, asked bool
	}{
		{Allowed, false, true, false, false},
		{Allowed, true, true, false, false},
		{Denied, false, false, false, true},
		{Denied, true, true, true, true},
		{Verdict(-1), true, false, false, false}, // robots.txt unavailable: nothing is exempt
	} {
		asked := false
		allow, exempted := c.v.Allow(func() bool { asked = true; return c.exempt })
		if allow != c.allow || exempted != c.exempted || asked != c.asked {
			t.Errorf("%v.Allow(exempt %v) = %v %v asked %v, want %v %v asked %v", c.v, c.exempt, allow, exempted, asked, c.allow, c.exempted, c.asked)
		}
	}
}
