package console_test

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/app"
	"github.com/trawl-crawler/trawl/services/seeder/internal/console"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control/controltest"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

const (
	token      = "console-token-0123456789"
	partitions = 4
)

// env is the API and the console over a real broker and ClickHouse, served
// as seeder serve serves them (app.Handler).
type env struct {
	url string
	// fleetURL serves a console told of fetchers whose --delay is
	// fleetDelay and whose --max-pages is fleetPages (Config.Fleet), over
	// the same crawls.
	fleetURL string
	store    *chstore.Store
	jobs     *crawljobs.Service
	clock    *controltest.Clock // the control table's
}

// fleetDelay and fleetPages are the --delay and --max-pages of the
// fetchers env.fleetURL's console knows.
const (
	fleetDelay = 2500 * time.Millisecond
	fleetPages = 7
)

func newEnv(t *testing.T) env {
	t.Helper()
	kc := kafkatest.Config(t, partitions)
	store := chtest.NewStore(t)
	reg := prometheus.NewRegistry()
	ctl, clock := controltest.Start(t, kc, reg)
	am, err := api.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New(store)
	j := crawljobs.New(ctl, st, nil, zap.NewNop())
	a := api.New(api.Config{Token: token}, j, st, am, zap.NewNop())
	cm, err := console.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ui, err := console.New(console.Config{Token: token, Partitions: partitions}, j, st, store.Conn(), cm, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(app.Handler(a.Handler(), ui.Handler()))
	fm, err := console.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	fleet := crawlsettings.Fleet{MaxPages: fleetPages, Politeness: hostdelay.Fleet{Delay: fleetDelay}}
	fleetUI, err := console.New(console.Config{Token: token, Partitions: partitions, Fleet: fleet}, j, st, store.Conn(), fm, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	fleetSrv := httptest.NewServer(app.Handler(a.Handler(), fleetUI.Handler()))
	t.Cleanup(func() {
		fleetSrv.Close()
		srv.Close()
	})
	return env{url: srv.URL, fleetURL: fleetSrv.URL, store: store, jobs: j, clock: clock}
}

// client is a browser: a cookie jar, redirects not followed.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func (e env) client(t *testing.T) *client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, base: e.url, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type response struct {
	code int
	body string
	hdr  http.Header
}

func (c *client) do(method, path string, form url.Values, hdr map[string]string) response {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return response{code: resp.StatusCode, body: string(b), hdr: resp.Header}
}

func (c *client) get(path string) response { c.t.Helper(); return c.do(http.MethodGet, path, nil, nil) }

// login logs in and returns the session's CSRF token (read from a page).
func (c *client) login() string {
	c.t.Helper()
	r := c.do(http.MethodPost, "/ui/login", url.Values{"token": {token}, "next": {"/ui/"}}, map[string]string{"Origin": c.base, "Sec-Fetch-Site": "same-origin"})
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/ui/" {
		c.t.Fatalf("login: %d %s", r.code, r.hdr.Get("Location"))
	}
	return c.csrf("/ui/new")
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *client) csrf(path string) string {
	c.t.Helper()
	r := c.get(path)
	m := csrfRE.FindStringSubmatch(r.body)
	if r.code != http.StatusOK || m == nil {
		c.t.Fatalf("GET %s: %d, no CSRF token", path, r.code)
	}
	return m[1]
}

func (c *client) post(path string, form url.Values) response {
	c.t.Helper()
	return c.do(http.MethodPost, path, form, map[string]string{"Origin": c.base, "Sec-Fetch-Site": "same-origin"})
}

// TestAuth: without a session every page and asset answers 401 with the
// login form, the login form alone answers 200; a wrong token is refused;
// the right one sets an HttpOnly, SameSite=Strict cookie and redirects
// without the token in any URL; the API's bearer token still works.
func TestAuth(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	paths := []string{"/ui/", "/ui/new", "/ui/crawls/x", "/ui/crawls/x/pause", "/ui/crawls/x/hosts/h", "/ui/crawls/x/url?u=http://a/",
		"/ui/static/console.css", "/ui/static/console.js", "/ui/static/nope", "/ui/nope"}
	for _, p := range paths {
		r := c.get(p)
		if r.code != http.StatusUnauthorized || !strings.Contains(r.body, `name="token"`) {
			t.Errorf("GET %s without a session: %d, want 401 and the login form", p, r.code)
		}
	}
	for _, p := range []string{"/ui/crawls", "/ui/crawls/x/cancel", "/ui/logout"} {
		if r := c.post(p, url.Values{}); r.code != http.StatusUnauthorized {
			t.Errorf("POST %s without a session: %d, want 401", p, r.code)
		}
	}
	r := c.get("/ui/login")
	if r.code != http.StatusOK || !strings.Contains(r.body, `type="password"`) {
		t.Errorf("GET /ui/login: %d", r.code)
	}
	// The login form's stylesheet is inline (the static files need a
	// session), allowed by the response's nonce alone; no script.
	m := regexp.MustCompile(`<style nonce="([^"]+)">`).FindStringSubmatch(r.body)
	if m == nil || !strings.Contains(r.hdr.Get("Content-Security-Policy"), "style-src 'nonce-"+m[1]+"'") || strings.Contains(r.body, "<script") {
		t.Errorf("login page: CSP %q", r.hdr.Get("Content-Security-Policy"))
	}
	if r := c.post("/ui/login", url.Values{"token": {token + "x"}}); r.code != http.StatusUnauthorized || !strings.Contains(r.body, "Wrong token") {
		t.Errorf("wrong token: %d", r.code)
	}
	// A forged session cookie is no session.
	u, _ := url.Parse(e.url + "/ui/")
	c.hc.Jar.SetCookies(u, []*http.Cookie{{Name: "trawl_console", Value: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAA", Path: "/ui/"}})
	if r := c.get("/ui/"); r.code != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d, want 401", r.code)
	}
	r = c.do(http.MethodPost, "/ui/login", url.Values{"token": {token}, "next": {"/ui/new"}}, nil)
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/ui/new" || strings.Contains(r.hdr.Get("Location"), token) {
		t.Fatalf("login: %d %q", r.code, r.hdr.Get("Location"))
	}
	ck := r.hdr.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/"} {
		if !strings.Contains(ck, want) {
			t.Errorf("cookie %q lacks %s", ck, want)
		}
	}
	if strings.Contains(ck, token) {
		t.Errorf("cookie %q holds the token", ck)
	}
	// An open redirect is refused.
	if r := c.do(http.MethodPost, "/ui/login", url.Values{"token": {token}, "next": {"//evil.example/"}}, nil); r.hdr.Get("Location") != "/ui/" {
		t.Errorf("next //evil.example/: redirected to %q", r.hdr.Get("Location"))
	}
	for _, p := range []string{"/ui/", "/ui/new", "/ui/static/console.css", "/ui/static/console.js"} {
		if r := c.get(p); r.code != http.StatusOK {
			t.Errorf("GET %s with a session: %d", p, r.code)
		}
	}
	if r := c.get("/ui/"); r.hdr.Get("Content-Security-Policy") == "" || r.hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", r.hdr)
	}
	// The JSON API is untouched: bearer token, no cookie.
	if r := c.get("/v1/crawls"); r.code != http.StatusUnauthorized {
		t.Errorf("API with a console cookie only: %d, want 401", r.code)
	}
	if r := c.do(http.MethodGet, "/v1/crawls", nil, map[string]string{"Authorization": "Bearer " + token}); r.code != http.StatusOK {
		t.Errorf("API with the bearer token: %d", r.code)
	}
	// Logging out ends the session in the browser.
	csrf := c.csrf("/ui/")
	if r := c.post("/ui/logout", url.Values{"csrf": {csrf}}); r.code != http.StatusSeeOther {
		t.Errorf("logout: %d", r.code)
	}
	if r := c.get("/ui/"); r.code != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", r.code)
	}
}

// TestCSRF: a state-changing form needs the session's CSRF token and a
// same-origin request; the crawl's state does not change otherwise.
func TestCSRF(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	other := e.client(t)
	otherCSRF := other.login()
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {"csrf-crawl"}, "seeds_text": {"http://127.0.0.2/"}}); r.code != http.StatusSeeOther {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	tests := []struct {
		name string
		form url.Values
		hdr  map[string]string
	}{
		{"no token", url.Values{}, map[string]string{"Origin": e.url}},
		{"wrong token", url.Values{"csrf": {"AAAA"}}, map[string]string{"Origin": e.url}},
		{"another session's token", url.Values{"csrf": {otherCSRF}}, map[string]string{"Origin": e.url}},
		{"cross-site origin", url.Values{"csrf": {csrf}}, map[string]string{"Origin": "http://evil.example"}},
		{"cross-site fetch", url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"same-site fetch", url.Values{"csrf": {csrf}}, map[string]string{"Sec-Fetch-Site": "same-site"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			if r := c.do(http.MethodPost, "/ui/crawls/csrf-crawl/cancel", tt.form, tt.hdr); r.code != http.StatusForbidden {
				t.Errorf("%d, want 403", r.code)
			}
			if s := e.jobs.Crawl("csrf-crawl").GetState(); s != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
				t.Errorf("state %v after a refused request", s)
			}
		})
	}
	c.t = t
	if r := c.do(http.MethodPost, "/ui/login", url.Values{"token": {token}}, map[string]string{"Origin": "http://evil.example"}); r.code != http.StatusForbidden {
		t.Errorf("cross-site login: %d, want 403", r.code)
	}
	if r := c.post("/ui/crawls/csrf-crawl/pause", url.Values{"csrf": {csrf}}); r.code != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", r.code, r.body)
	}
	if s := e.jobs.Crawl("csrf-crawl").GetState(); s != crawlv1.CrawlState_CRAWL_STATE_PAUSED {
		t.Errorf("state %v after pause", s)
	}
}

// fieldErrorRE finds the errors shown at a field.
var fieldErrorRE = regexp.MustCompile(`<p class="field-error" data-field="([^"]*)">([^<]*)</p>`)

// TestFormErrors: a form with mistakes everywhere is refused with each of
// the API's field errors shown at its field (the same messages the JSON
// API gives for the same request), the values kept, nothing created.
func TestFormErrors(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	form := url.Values{
		"csrf": {csrf}, "crawl_id": {"bad id!"}, "seeds_text": {"http://127.0.0.2/\nnot a url\n"},
		"scope.allow_patterns": {"ok\n([unclosed"}, "politeness.delay": {"fast"},
		"revisit.enabled": {"1"}, "revisit.min_interval": {"2h"}, "revisit.max_interval": {"1h"},
		"keywords.terms": {"golang"}, "keywords.engines": {"no-such-engine"}, "scope.near_duplicate_distance": {"99"},
	}
	r := c.post("/ui/crawls", form)
	if r.code != http.StatusBadRequest {
		t.Fatalf("submit: %d, want 400", r.code)
	}
	shown := map[string][]string{}
	for _, m := range fieldErrorRE.FindAllStringSubmatch(r.body, -1) {
		shown[m[1]] = append(shown[m[1]], html.UnescapeString(m[2]))
	}
	// The API's own answer to the same request.
	req := jobs.Request{CrawlID: "bad id!", SeedsText: "http://127.0.0.2/\nnot a url\n",
		Scope:      &jobs.Scope{AllowPatterns: []string{"ok", "([unclosed"}, NearDuplicateDistance: 99},
		Politeness: &jobs.Politeness{Delay: "fast"}, Limits: &jobs.Limits{},
		Revisit:  &jobs.Revisit{Enabled: true, MinInterval: "2h", MaxInterval: "1h"},
		Keywords: &jobs.Keywords{Terms: []string{"golang"}, Engines: []string{"no-such-engine"}}}
	_, err := e.jobs.Create(t.Context(), req)
	var ae *crawljobs.Error
	if !errors.As(err, &ae) || len(ae.Fields) < 6 {
		t.Fatalf("API: %v, want at least 6 field errors", err)
	}
	wantAt := map[string]string{"crawl_id": "crawl_id", "seeds_text line 2": "seeds_text", "scope.allow_patterns[1]": "scope.allow_patterns",
		"politeness.delay": "politeness.delay", "revisit.max_interval": "revisit.max_interval", "keywords.engines[0]": "keywords.engines",
		"scope.near_duplicate_distance": "scope.near_duplicate_distance"}
	for _, fe := range ae.Fields {
		field, ok := wantAt[fe.Field]
		if !ok {
			field = fe.Field
		}
		found := false
		for _, msg := range shown[field] {
			found = found || strings.Contains(msg, fe.Message)
		}
		if !found {
			t.Errorf("API error %s: %q not shown at field %s (shown there: %q)", fe.Field, fe.Message, field, shown[field])
		}
	}
	for f := range wantAt {
		found := false
		for _, fe := range ae.Fields {
			found = found || fe.Field == f
		}
		if !found {
			t.Errorf("the API gave no error for %s: %v", f, ae.Fields)
		}
	}
	// Fields are marked invalid for assistive technology and keep their values.
	for _, want := range []string{`id="f-politeness-delay" name="politeness.delay" value="fast" aria-describedby="f-politeness-delay-msg" aria-invalid="true"`,
		`id="error-summary"`, `href="#f-scope-allow_patterns"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// A number that is no number is the form's own field error.
	r = c.post("/ui/crawls", url.Values{"csrf": {csrf}, "seeds_text": {"http://127.0.0.2/"}, "limits.max_pages": {"many"}})
	if r.code != http.StatusBadRequest || !strings.Contains(r.body, `data-field="limits.max_pages">want a whole number`) {
		t.Errorf("max_pages=many: %d", r.code)
	}
	if n := len(e.jobs.Crawls()); n != 0 {
		t.Errorf("%d crawls created by refused forms", n)
	}
}

// crawlRows writes a small crawl's rows into every table the pages read,
// as the services would: three admitted URLs of one host (one fetched,
// one that timed out and then redirected, its target fetched), a URL out
// of scope, a dropped link (the API counts three URLs fetched: a redirect
// is a fetch without error), a robots.txt with a Crawl-delay.
func crawlRows(t *testing.T, store *chstore.Store, id string) (host string, urls []string) {
	t.Helper()
	for _, raw := range []string{"http://127.0.0.2:8080/", "http://127.0.0.2:8080/b", "http://127.0.0.2:8080/c", "http://127.0.0.2:8080/x"} {
		u, err := urlcanon.Canonicalize(raw)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, u)
	}
	host, err := urlcanon.CanonicalKey(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	part := kafkaio.PartitionFor([]byte(host), partitions)
	fp := func(i int) uint64 { return fingerprint.URL(id, urls[i]) }
	now := time.Now().UTC().Truncate(time.Second)
	// exec inserts one row (a batch: the native protocol's INSERT).
	exec := func(q string, args ...any) {
		t.Helper()
		q, _, _ = strings.Cut(q, "\nVALUES")
		q, _, _ = strings.Cut(q, " VALUES")
		b, err := store.Conn().PrepareBatch(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := b.Append(args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := b.Send(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := range 3 {
		exec(`INSERT INTO url_seen (crawl_id, partition, fp, url, depth, first_seen) VALUES (?, ?, ?, ?, ?, ?)`, id, uint16(part), fp(i), urls[i], uint16(min(i, 1)), now)
	}
	fl := `INSERT INTO fetch_log (crawl_id, url, url_fp, host, partition, attempt, fetched_at, fetched_at_ms, status, error_kind, error_message, bytes, content_type, duration_ms, redirect_location, depth, fetcher, final)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	exec(fl, id, urls[0], fp(0), host, uint16(part), uint16(1), now.Add(-20*time.Second), uint16(0), uint16(200), "", "", uint64(1200), "text/html", uint32(40), "", uint16(0), "f1", uint8(1))
	exec(fl, id, urls[1], fp(1), host, uint16(part), uint16(1), now.Add(-15*time.Second), uint16(0), uint16(0), "timeout", "read: i/o timeout", uint64(0), "", uint32(5000), "", uint16(1), "f1", uint8(0))
	exec(fl, id, urls[1], fp(1), host, uint16(part), uint16(2), now.Add(-10*time.Second), uint16(0), uint16(301), "", "", uint64(0), "", uint32(30), urls[2], uint16(1), "f1", uint8(1))
	exec(fl, id, urls[2], fp(2), host, uint16(part), uint16(1), now.Add(-5*time.Second), uint16(0), uint16(200), "", "", uint64(900), "text/html", uint32(50), "", uint16(1), "f1", uint8(1))
	doc := `INSERT INTO documents (crawl_id, url, url_fp, host, fetched_at, status, title, text, content_fp, outlinks, content_type, language) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	exec(doc, id, urls[0], fp(0), host, now.Add(-20*time.Second), uint16(200), "Home page", "Welcome to the home page.", uint64(1), uint32(1), "text/html", "en")
	exec(doc, id, urls[2], fp(2), host, now.Add(-5*time.Second), uint16(200), "Target", "Where b leads.", uint64(2), uint32(0), "text/html", "en")
	exec(`INSERT INTO document_meta (crawl_id, url, url_fp, host, fetched_at, description, canonical_url, simhash, content_fp, is_duplicate, duplicate_of, is_detail, text_truncated, depth)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, urls[0], fp(0), host, now, "The home.", "", uint64(0), uint64(1), uint8(0), "", uint8(0), uint8(0), uint16(0))
	exec(`INSERT INTO links (crawl_id, target_host, target_url, target_fp, source_host, source_url, source_fp, position, anchor_text, rel, tag, depth, found_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, host, urls[1], fp(1), host, urls[0], fp(0), uint16(1), "to b", "", "a", uint16(1), now)
	exec(`INSERT INTO frontier_v2 (partition, crawl_id, host, fp, depth, url, parent_url, anchor_text, serp_engine, discovered_at, state, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, uint16(part), id, host, fp(1), uint16(1), urls[1], urls[0], "to b", "", now, uint8(1), now)
	exec(`INSERT INTO url_events (crawl_id, url, url_fp, host, partition, state, reason, depth, event_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, urls[3], fingerprint.URL(id, urls[3]), host, uint16(part), "out_of_scope", "deny_pattern", uint16(1), now)
	// Two months of a calendar the parser suspected as a trap.
	for _, m := range []string{"2027/1", "2027/2"} {
		u := "http://" + host + "/cal/" + m
		exec(`INSERT INTO url_events (crawl_id, url, url_fp, host, partition, state, reason, depth, event_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, u, fingerprint.URL(id, u), host, uint16(part), "trap_suspected", "trap_suspected", uint16(3), now)
	}
	// Counts of a crawl that began before links_dropped_v2 (per minute)
	// and went on after (per hour): the console sums both.
	exec(`INSERT INTO links_dropped (crawl_id, host, reason, minute, n) VALUES (?, ?, ?, ?, ?)`, id, host, "nofollow", now.Truncate(time.Minute), uint64(3))
	exec(`INSERT INTO links_dropped_v2 (crawl_id, host, reason, hour, n) VALUES (?, ?, ?, ?, ?)`, id, host, "nofollow", now.Truncate(time.Hour), uint64(4))
	exec(`INSERT INTO robots_txt (partition, origin, host, agent, outcome, status, rules, crawl_delay_ms, sitemaps, body_bytes, fetched_at, expires, fetcher)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, uint16(part), "http://"+host, host, "trawl", "ok", uint16(200), "User-agent: *\nDisallow: /private/", uint32(2000),
		[]string{"http://" + host + "/sitemap.xml"}, uint32(60), now, now.Add(24*time.Hour), "f1")
	return host, urls
}

// TestPages: a crawl submitted through the form, its rows in ClickHouse;
// every page renders what the tables hold, searches filter, pause and
// resume go through the confirmation.
func TestPages(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "pages-crawl"
	r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "name": {"Pages test"}, "seeds_text": {"http://127.0.0.2:8080/"},
		"limits.max_pages": {"4"}, "politeness.delay": {"1500ms"}, "politeness.max_crawl_delay": {"3s"}, "scope.same_host_only": {"1"}})
	if r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/ui/crawls/"+id {
		t.Fatalf("submit: %d %q %s", r.code, r.hdr.Get("Location"), r.body)
	}
	spec := e.jobs.Crawl(id)
	if spec.GetLimits().GetMaxPages() != 4 || !spec.GetScope().GetSameHostOnly() || spec.GetPoliteness().GetDelay().AsDuration() != 1500*time.Millisecond {
		t.Fatalf("spec from the form: %v", spec)
	}
	host, urls := crawlRows(t, e.store, id)

	contains := func(name, body string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
	}
	r = c.get("/ui/")
	if r.code != http.StatusOK {
		t.Fatalf("list: %d", r.code)
	}
	// Every admitted URL is final: the list shows the API's status (drained
	// or running by the pipeline's lag: here the seed nobody consumed).
	v := e.jobs.View(t.Context(), spec)
	if !v.Counts.Finished {
		t.Fatalf("counts %+v, want finished", v.Counts)
	}
	contains("list", r.body, `href="/ui/crawls/pages-crawl"`, "Pages test", `class="n fetched">3<`,
		`<span class="state `+v.Status+`">`+v.Status+`</span>`)
	if refreshes := strings.Contains(r.body, `data-refresh="5"`) && strings.Contains(r.body, `http-equiv="refresh"`); refreshes != (v.Status == "running") {
		t.Errorf("list refreshes %v with the crawl %s", refreshes, v.Status)
	}

	r = c.get("/ui/crawls/" + id)
	if r.code != http.StatusOK {
		t.Fatalf("crawl: %d %s", r.code, r.body)
	}
	contains("crawl", r.body, `<dd id="c-fetched">3</dd>`, `<dd id="c-admitted">3</dd>`, `<dd id="c-errors">1</dd>`, `<dd id="c-documents">2</dd>`,
		"of the budget of 4: 75%", `<svg class="chart"`, "timeout", "out_of_scope", "deny_pattern", `<td>nofollow</td><td class="n">7</td>`,
		"Home page", "Target", `href="/ui/crawls/pages-crawl/hosts/`+url.PathEscape(host)+`"`, `href="/ui/crawls/pages-crawl/pause"`)
	r = c.get("/ui/crawls/" + id + "?q=HOME")
	contains("search", r.body, "Home page")
	if strings.Contains(r.body, ">Target<") {
		t.Errorf("search for HOME lists the Target document")
	}
	r = c.get("/ui/crawls/" + id + "?q=" + url.QueryEscape("100%_"))
	contains("search with LIKE characters", r.body, "No document matches")

	r = c.get("/ui/crawls/" + id + "/hosts/" + url.PathEscape(host))
	if r.code != http.StatusOK {
		t.Fatalf("host: %d %s", r.code, r.body)
	}
	contains("host", r.body, "Disallow: /private/", "Crawl-delay 2000 ms", `<dd id="effective-delay">2s</dd>`, "1.5s", "honoured up to 3s",
		"read: i/o timeout", "sitemap.xml", "4 attempts",
		// The calendar's family, its two URLs counted.
		`<td class="url">/cal/#/#</td><td class="n">2</td>`)
	// The same host on fetchers whose --delay (2.5 s) is above the
	// Crawl-delay and the crawl's delay: the fleet's floor applies.
	fc := env{url: e.fleetURL}.client(t)
	fc.login()
	r = fc.get("/ui/crawls/" + id + "/hosts/" + url.PathEscape(host))
	contains("host on slower fetchers", r.body, `<dd id="effective-delay">2.5s</dd>`)
	// The crawl's own budget (4) wins over the fleet's --max-pages (7).
	r = fc.get("/ui/crawls/" + id)
	contains("crawl on a fleet with a budget", r.body, "of the budget of 4: 75%")
	if strings.Contains(r.body, "the fleet's --max-pages") {
		t.Errorf("a crawl with its own budget says the fleet's applies")
	}
	// A crawl whose spec sets no budget: none on the console of a fleet
	// without --max-pages, the fleet's where it has one.
	const unbounded = "pages-crawl-unbounded"
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {unbounded}, "seeds_text": {"http://127.0.0.2:8080/"}}); r.code != http.StatusSeeOther {
		t.Fatalf("submit %s: %d %s", unbounded, r.code, r.body)
	}
	r = c.get("/ui/crawls/" + unbounded)
	contains("crawl without a budget", r.body, "(no page budget)")
	r = fc.get("/ui/crawls/" + unbounded)
	contains("crawl without a budget on a fleet with one", r.body, "of the budget of 7 (the fleet's --max-pages): 0%")

	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape(urls[1]))
	if r.code != http.StatusOK {
		t.Fatalf("story: %d %s", r.code, r.body)
	}
	contains("story of b", r.body, "Admitted at depth 1", "to b", "timeout", "→ <a href=\"/ui/crawls/pages-crawl/url?u="+url.QueryEscape(urls[2]), "retry",
		"No document")
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape(urls[0]))
	contains("story of the seed", r.body, `<dd id="doc-title">Home page</dd>`, "Welcome to the home page.", "The home.", `id="outlinks"`, urls[1])
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape(urls[3]))
	contains("story of a dropped URL", r.body, "out_of_scope", "deny_pattern", "No fetch attempt recorded")
	if r := c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape("::not a url")); r.code != http.StatusBadRequest {
		t.Errorf("story of a bad URL: %d, want 400", r.code)
	}
	if r := c.get("/ui/crawls/nope"); r.code != http.StatusNotFound {
		t.Errorf("unknown crawl: %d", r.code)
	}

	// Pause and resume through their confirmation pages.
	for _, step := range []struct {
		action string
		want   crawlv1.CrawlState
	}{{"pause", crawlv1.CrawlState_CRAWL_STATE_PAUSED}, {"resume", crawlv1.CrawlState_CRAWL_STATE_RUNNING}, {"cancel", crawlv1.CrawlState_CRAWL_STATE_CANCELLED}} {
		path := "/ui/crawls/" + id + "/" + step.action
		token := c.csrf(path)
		if r := c.post(path, url.Values{"csrf": {token}}); r.code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", step.action, r.code, r.body)
		}
		if s := e.jobs.Crawl(id).GetState(); s != step.want {
			t.Errorf("after %s: %v", step.action, s)
		}
	}
	if r := c.post("/ui/crawls/"+id+"/resume", url.Values{"csrf": {csrf}}); r.code != http.StatusConflict {
		t.Errorf("resume a cancelled crawl: %d, want 409", r.code)
	}
	r = c.get("/ui/crawls/" + id)
	if strings.Contains(r.body, "data-refresh") || strings.Contains(r.body, `/pause"`) {
		t.Errorf("a cancelled crawl's page refreshes or offers pause")
	}
}

// TestFormIdentityAndTimeLimit: the form's user agent, extra headers and
// time limit reach the crawl's spec as the API takes them, the crawl's page
// shows them and, once the limit has passed, the crawl cancelled by its
// time limit; bad ones are shown at their fields with the API's messages,
// the values kept.
func TestFormIdentityAndTimeLimit(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const (
		id = "identity-crawl"
		ua = "examplebot/1.0 (+https://example.org/bot)"
	)
	r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"},
		"identity.user_agent": {ua}, "identity.headers": {"accept-language: en\n\nFrom: ops@example.org\n"}, "limits.max_duration": {"1s"}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	spec := e.jobs.Crawl(id)
	hs := spec.GetIdentity().GetHeaders()
	if spec.GetIdentity().GetUserAgent() != ua || len(hs) != 2 || hs[0].GetName() != "Accept-Language" || hs[0].GetValue() != "en" ||
		hs[1].GetName() != "From" || spec.GetLimits().GetMaxDuration().AsDuration() != time.Second {
		t.Fatalf("spec from the form: %v", spec)
	}
	r = c.get("/ui/crawls/" + id)
	for _, want := range []string{"time limit 1s, until", "<code>" + ua + "</code>", "<code>Accept-Language: en</code>", `id="pause"`} {
		if !strings.Contains(html.UnescapeString(r.body), want) {
			t.Errorf("crawl page lacks %s", want)
		}
	}
	e.clock.Add(time.Second)
	r = c.get("/ui/crawls/" + id)
	if !strings.Contains(r.body, `id="crawl-state">cancelled</span> <span id="crawl-state-reason">(time limit)</span>`) || strings.Contains(r.body, `id="pause"`) {
		t.Errorf("crawl page after the time limit: %d, want cancelled (time limit) and no pause", r.code)
	}

	bad := url.Values{"csrf": {csrf}, "seeds_text": {"http://127.0.0.2:8080/"}, "identity.user_agent": {"nobody"},
		"identity.headers": {"X-Ok: 1\nCookie: a=b\nno colon"}, "limits.max_duration": {"-1m"}}
	r = c.post("/ui/crawls", bad)
	if r.code != http.StatusBadRequest {
		t.Fatalf("bad form: %d, want 400", r.code)
	}
	shown := map[string][]string{}
	for _, m := range fieldErrorRE.FindAllStringSubmatch(r.body, -1) {
		shown[m[1]] = append(shown[m[1]], html.UnescapeString(m[2]))
	}
	for field, want := range map[string][]string{
		"identity.user_agent": {"no contact"},
		"identity.headers":    {"identity.headers[1]: header Cookie may not be set", `identity.headers[2]: "no colon": want "Name: value"`},
		"limits.max_duration": {"-1m0s, want a positive duration"},
	} {
		for _, w := range want {
			found := false
			for _, msg := range shown[field] {
				found = found || strings.Contains(msg, w)
			}
			if !found {
				t.Errorf("field %s: %q not shown (shown: %q)", field, w, shown[field])
			}
		}
	}
	if !strings.Contains(r.body, ">X-Ok: 1\nCookie: a=b\nno colon</textarea>") || !strings.Contains(r.body, `name="limits.max_duration" value="-1m"`) {
		t.Errorf("the form lost its values")
	}
	if n := len(e.jobs.Crawls()); n != 1 {
		t.Errorf("%d crawls, want only the first", n)
	}
}

// TestFormPriority: the form's priority rules, one "PATTERN=+N" a line,
// hosts first for a rule of some hosts, and breadth-first reach the
// crawl's spec and show on its page; a line that is no rule, and a rule
// the API refuses, are errors on the field, nothing dropped, no crawl made.
func TestFormPriority(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "priority-crawl"
	r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"},
		"priority.rules": {"/product/=+50\n\nShop.Example,127.0.0.2:8080 \\?sort==-100\n"}, "priority.breadth_first": {"on"}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	p := e.jobs.Crawl(id).GetPriority()
	if rs := p.GetRules(); !p.GetBreadthFirst() || len(rs) != 2 || rs[0].GetPattern() != "/product/" || rs[0].GetDelta() != 50 || len(rs[0].GetHosts()) != 0 ||
		rs[1].GetPattern() != `\?sort=` || rs[1].GetDelta() != -100 || !slices.Equal(rs[1].GetHosts(), []string{"shop.example", "127.0.0.2:8080"}) {
		t.Fatalf("priority from the form: %v", p)
	}
	r = c.get("/ui/crawls/" + id)
	for _, want := range []string{"breadth-first: every signal ignored", "<code>/product/=+50</code>", "<code>shop.example,127.0.0.2:8080 \\?sort==-100</code>"} {
		if !strings.Contains(html.UnescapeString(r.body), want) {
			t.Errorf("crawl page lacks %s", want)
		}
	}

	bad := url.Values{"csrf": {csrf}, "seeds_text": {"http://127.0.0.2:8080/"}, "priority.rules": {"/ok/=+1\n/no-number/\n(=+5\n/x/=+2000"}}
	r = c.post("/ui/crawls", bad)
	if r.code != http.StatusBadRequest {
		t.Fatalf("bad form: %d, want 400", r.code)
	}
	var shown []string
	for _, m := range fieldErrorRE.FindAllStringSubmatch(r.body, -1) {
		if m[1] == "priority.rules" {
			shown = append(shown, html.UnescapeString(m[2]))
		}
	}
	for _, w := range []string{"line 2: priority rule \"/no-number/\"", "line 3: priority rule \"(=+5\"", "line 4: priority rule \"/x/=+2000\": delta 2000 not in [-1000, 1000]"} {
		if !slices.ContainsFunc(shown, func(m string) bool { return strings.Contains(m, w) }) {
			t.Errorf("priority.rules: %q not shown (shown: %q)", w, shown)
		}
	}
	if n := len(e.jobs.Crawls()); n != 1 {
		t.Errorf("%d crawls, want only the first", n)
	}
}

// TestPriorityShown: where the console shows a URL's fetches (the host's
// fetch log, the URL's story) it shows the priority its request had and
// why (fetch_log.priority, priority_reason), and for a URL ended as
// budget_exhausted its priority (url_events); a priority of 0 without a
// reason shows nothing.
func TestPriorityShown(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "priority-shown"
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"}}); r.code != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	const host = "127.0.0.2:8080"
	best, plain, late := "http://"+host+"/product/1", "http://"+host+"/", "http://"+host+"/archive/9"
	part := uint16(kafkaio.PartitionFor([]byte(host), partitions))
	now := time.Now().UTC().Truncate(time.Second)
	exec := func(q string, args ...any) {
		t.Helper()
		q, _, _ = strings.Cut(q, " VALUES")
		b, err := e.store.Conn().PrepareBatch(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := b.Append(args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if err := b.Send(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	fl := `INSERT INTO fetch_log (crawl_id, url, url_fp, host, partition, attempt, fetched_at, fetched_at_ms, status, bytes, content_type, duration_ms, depth, fetcher, final, priority, priority_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	exec(fl, id, best, fingerprint.URL(id, best), host, part, uint16(1), now.Add(-2*time.Second), uint16(0), uint16(200), uint64(10), "text/html", uint32(5), uint16(2), "f1", uint8(1), int32(52), "rule+inlinks")
	exec(fl, id, plain, fingerprint.URL(id, plain), host, part, uint16(1), now.Add(-3*time.Second), uint16(0), uint16(200), uint64(10), "text/html", uint32(5), uint16(0), "f1", uint8(1), int32(0), "")
	exec(`INSERT INTO url_events (crawl_id, url, url_fp, host, partition, state, reason, depth, event_time, priority, priority_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, late, fingerprint.URL(id, late), host, part, "budget_exhausted", "max_pages", uint16(3), now, int32(-8), "sitemap")

	r := c.get("/ui/crawls/" + id + "/hosts/" + url.PathEscape(host))
	if r.code != http.StatusOK {
		t.Fatalf("host: %d %s", r.code, r.body)
	}
	if !strings.Contains(html.UnescapeString(r.body), `<span class="sub priority">priority 52 (rule+inlinks)</span>`) {
		t.Errorf("host page lacks the priority of %s", best)
	}
	if n := strings.Count(r.body, `class="sub priority"`); n != 1 {
		t.Errorf("host page shows %d priorities, want 1 (none for priority 0)", n)
	}
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape(best))
	if !strings.Contains(html.UnescapeString(r.body), "priority 52 (rule+inlinks)") {
		t.Errorf("story of %s lacks its priority: %d", best, r.code)
	}
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape(late))
	if !strings.Contains(r.body, "budget_exhausted") || !strings.Contains(r.body, "max_pages <span class=\"sub priority\">priority -8 (sitemap)</span>") {
		t.Errorf("story of %s lacks its priority: %d", late, r.code)
	}
}

// TestDelete: a crawl's page offers Delete…, which asks for a
// confirmation; the POST needs the session's CSRF token; confirmed, the
// crawl is deleted through the API (marked deleted on the control topic,
// its rows removed from ClickHouse, warc_files included), its page then
// shows it deleted with its deletion's progress and no action, it leaves
// the crawls' list, its confirmation page answers 410, and deleting it
// again or deleting an unknown crawl is refused or harmless as the API
// says.
func TestDelete(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "delete-crawl"
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"}}); r.code != http.StatusSeeOther {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	crawlRows(t, e.store, id)
	b, err := e.store.Conn().PrepareBatch(t.Context(), "INSERT INTO warc_files ("+strings.Join(chstore.WarcFiles.Columns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(chstore.WarcFiles.Values(chstore.WarcFileRow{File: "trawl-delete~2dcrawl-20260101000000-00001-f1.warc.gz",
		Dir: "/warc", Fetcher: "f1", OpenedAt: time.Now(), ClosedAt: time.Now(), Bytes: 100, Records: 3, Responses: 1, CrawlID: id})...); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if left, err := e.store.CrawlRows(t.Context(), id); err != nil || left["warc_files"] != 1 {
		t.Fatalf("rows of the crawl before its deletion: %v, %v", left, err)
	}
	r := c.get("/ui/crawls/" + id)
	if r.code != http.StatusOK || !strings.Contains(r.body, `href="/ui/crawls/`+id+`/delete" id="delete"`) {
		t.Fatalf("crawl page: %d, no Delete…", r.code)
	}
	path := "/ui/crawls/" + id + "/delete"
	token := c.csrf(path)
	if r := c.get(path); !strings.Contains(r.body, "its WARC files and their CDXJ indexes") || !strings.Contains(r.body, `id="confirm" class="delete">Delete `+id) {
		t.Errorf("confirmation page lacks the explanation or the button:\n%s", r.body)
	}
	if r := c.post(path, url.Values{}); r.code != http.StatusForbidden || e.jobs.Crawl(id).GetDeletedAt() != nil {
		t.Fatalf("delete without CSRF token: %d, deleted %v", r.code, e.jobs.Crawl(id).GetDeletedAt() != nil)
	}
	if r := c.post(path, url.Values{"csrf": {token}}); r.code != http.StatusSeeOther || r.hdr.Get("Location") != "/ui/crawls/"+id {
		t.Fatalf("delete: %d %q %s", r.code, r.hdr.Get("Location"), r.body)
	}
	spec := e.jobs.Crawl(id)
	if spec.GetDeletedAt() == nil || spec.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		t.Fatalf("after delete: %v", spec)
	}
	r = c.get("/ui/crawls/" + id)
	if r.code != http.StatusOK || !strings.Contains(r.body, `id="crawl-state">deleted</span>`) || !strings.Contains(r.body, `id="deletion"`) ||
		strings.Contains(r.body, `id="delete"`) || strings.Contains(r.body, `id="cancel"`) || strings.Contains(r.body, "data-refresh") {
		t.Errorf("deleted crawl's page: %d\n%s", r.code, r.body)
	}
	if r := c.get("/ui/"); strings.Contains(r.body, id) {
		t.Error("the crawls' list still shows the deleted crawl")
	}
	if r := c.get(path); r.code != http.StatusGone {
		t.Errorf("confirmation page of a deleted crawl: %d, want 410", r.code)
	}
	if r := c.post(path, url.Values{"csrf": {token}}); r.code != http.StatusSeeOther {
		t.Errorf("delete again: %d, want 303 (the API's delete is idempotent)", r.code)
	}
	if r := c.post("/ui/crawls/nope/delete", url.Values{"csrf": {token}}); r.code != http.StatusNotFound {
		t.Errorf("delete an unknown crawl: %d, want 404", r.code)
	}
	if r := c.post("/ui/crawls/bad%20id/delete", url.Values{"csrf": {token}}); r.code != http.StatusBadRequest {
		t.Errorf("delete an invalid id: %d, want 400", r.code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		left, err := e.store.CrawlRows(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		total := uint64(0)
		for _, n := range left {
			total += n
		}
		if total == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rows of the deleted crawl left: %v", left)
		case <-time.After(50 * time.Millisecond):
		}
	}
	r = c.get("/ui/crawls/" + id)
	if !strings.Contains(r.body, "Its rows are removed from every ClickHouse table") {
		t.Errorf("deleted crawl's page once its rows are gone:\n%s", r.body)
	}
}
