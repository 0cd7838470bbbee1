package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control/controltest"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

const token = "test-token-0123456789"

// env is an API server over a real broker and a real ClickHouse.
type env struct {
	url   string
	srv   *httptest.Server
	kafka kafkaio.Config
	store *chstore.Store
	reg   *prometheus.Registry
	clock *controltest.Clock // the control table's
	jobs  *crawljobs.Service
}

func newEnv(t *testing.T) env {
	t.Helper()
	return newEnvWith(t, nil)
}

// newEnvWith is newEnv with a sitemap source.
func newEnvWith(t *testing.T, sm crawljobs.SitemapSource) env {
	t.Helper()
	return newEnvOn(t, kafkatest.Config(t, 2), chtest.NewStore(t), sm)
}

// newEnvOn is an API server over the given broker and ClickHouse: several
// of them on one broker are API servers of one deployment.
func newEnvOn(t *testing.T, kc kafkaio.Config, store *chstore.Store, sm crawljobs.SitemapSource) env {
	t.Helper()
	reg := prometheus.NewRegistry()
	ctl, clock := controltest.Start(t, kc, reg)
	m, err := api.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New(store)
	j := crawljobs.New(ctl, st, sm, zap.NewNop())
	server := api.New(api.Config{Token: token, MaxBodyBytes: 64 << 10}, j, st, m, zap.NewNop())
	srv := httptest.NewServer(server.Handler())
	t.Cleanup(srv.Close)
	return env{url: srv.URL, srv: srv, kafka: kc, store: store, reg: reg, clock: clock, jobs: j}
}

// do sends a request with the token and decodes a JSON answer into out
// (when not nil); it returns the status and the raw body.
func (e env) do(t *testing.T, method, path, body string, out any) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode, raw
}

type errorBody struct {
	Error  string           `json:"error"`
	Fields jobs.FieldErrors `json:"fields"`
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	for _, r := range api.Routes() {
		path := strings.ReplaceAll(r.Path, "{id}", "some-crawl")
		for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", token} {
			req, _ := http.NewRequestWithContext(t.Context(), r.Method, e.url+path, strings.NewReader("{}"))
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusUnauthorized
			if r.Path == "/v1/openapi.json" {
				want = http.StatusOK
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s with %q: status %d, want %d", r.Method, path, auth, resp.StatusCode, want)
			}
		}
	}
	// Requests are counted by route pattern, never by crawl id. The
	// middleware counts after the handler returns, which for a large body
	// (openapi.json) can be after the client read the whole response:
	// closing the server waits for every request's handler to return.
	e.srv.Close()
	if counted := requestCounts(t, e.reg); counted["GET /v1/crawls/{id} 401"] != 4 || counted["GET /v1/openapi.json 200"] != 4 {
		t.Errorf("api_requests_total = %v", counted)
	}
}

// requestCounts returns api_requests_total by "route code".
func requestCounts(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "api_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "code":
					code = l.GetValue()
				}
			}
			counted[route+" "+code] += m.GetCounter().GetValue()
		}
	}
	return counted
}

// TestStatus: each kind of refused or failed operation answers the
// status code the API has always answered it with (and the console too).
func TestStatus(t *testing.T) {
	tests := []struct {
		kind crawljobs.Kind
		want int
	}{
		{crawljobs.Invalid, http.StatusBadRequest},
		{crawljobs.NotFound, http.StatusNotFound},
		{crawljobs.Conflict, http.StatusConflict},
		{crawljobs.Gone, http.StatusGone},
		{crawljobs.Unavailable, http.StatusServiceUnavailable},
		{0, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := api.Status(tt.kind); got != tt.want {
			t.Errorf("Status(%d) = %d, want %d", tt.kind, got, tt.want)
		}
	}
}

// TestOpenAPIInSync checks that every route is described in the served
// OpenAPI document and that the document describes no other route.
func TestOpenAPIInSync(t *testing.T) {
	e := newEnv(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+"/v1/openapi.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi version %q", doc.OpenAPI)
	}
	routes := make(map[string]bool)
	for _, r := range api.Routes() {
		key := strings.ToLower(r.Method) + " " + r.Path
		routes[key] = true
		if _, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]; !ok {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if !routes[method+" "+path] {
				t.Errorf("openapi.json describes %s %s, which is not served", method, path)
			}
		}
	}
}

func TestCreateRejects(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name       string
		body       string
		ctype      string
		wantStatus int
		wantFields []string // every field named, in order
	}{
		{name: "malformed", body: `{"seeds": [`, wantStatus: 400},
		{name: "trailing data", body: `{"seeds":["http://127.0.0.2/"]} {}`, wantStatus: 400},
		{name: "unknown field", body: `{"seed": ["http://127.0.0.2/"]}`, wantStatus: 400, wantFields: []string{"seed"}},
		{name: "wrong type", body: `{"seeds": "http://127.0.0.2/"}`, wantStatus: 400, wantFields: []string{"seeds"}},
		{name: "nothing", body: `{}`, wantStatus: 400, wantFields: []string{"seeds"}},
		{name: "bad id and seeds", body: `{"crawl_id":"a/b","seeds":["http://127.0.0.2/","not a url","  ","javascript:void(0)"]}`,
			wantStatus: 400, wantFields: []string{"crawl_id", "seeds[1]", "seeds[2]", "seeds[3]"}},
		{name: "seeds text lines", body: `{"seeds_text":"# c\nhttp://127.0.0.2/\nnope\n\njavascript:x\n"}`,
			wantStatus: 400, wantFields: []string{"seeds_text line 3", "seeds_text line 5"}},
		{name: "scope", body: `{"seeds":["http://127.0.0.2/"],"scope":{"allow_patterns":["(unclosed"],"deny_hosts":["a/b",""]}}`,
			wantStatus: 400, wantFields: []string{"scope.deny_hosts[0]", "scope.deny_hosts[1]", "scope.allow_patterns[0]"}},
		{name: "durations", body: `{"seeds":["http://127.0.0.2/"],"politeness":{"delay":"soon"},"revisit":{"enabled":true,"min_interval":"2h","max_interval":"1h","initial_interval":"-1s"}}`,
			wantStatus: 400, wantFields: []string{"politeness.delay", "revisit.initial_interval", "revisit.max_interval"}},
		{name: "keywords", body: `{"keywords":{"terms":["a"],"engines":["altavista"],"templates":[{"name":"x","url":"http://127.0.0.2/s"}],"pages":1000}}`,
			wantStatus: 400, wantFields: []string{"keywords.pages", "keywords.engines[0]", "keywords.templates[0]"}},
		{name: "keyword mode", body: `{"keywords":{"terms":["a"],"combine":"zip","engines":["google"]}}`,
			wantStatus: 400, wantFields: []string{"keywords.combine"}},
		{name: "sitemap urls", body: `{"seeds":["http://127.0.0.2/"],"sitemap_urls":["ftp://127.0.0.2/s.xml","/relative.xml","http://127.0.0.2/ok.xml"]}`,
			wantStatus: 400, wantFields: []string{"sitemap_urls[0]", "sitemap_urls[1]"}},
		{name: "priority rules", body: `{"seeds":["http://127.0.0.2/"],"priority":{"rules":[{"pattern":"/ok/","delta":5},{"pattern":"(","delta":5},{"pattern":"/x/","delta":0},{"pattern":"/y/","delta":2000}]}}`,
			wantStatus: 400, wantFields: []string{"priority.rules[1]", "priority.rules[2]", "priority.rules[3]"}},
		{name: "priority unknown field", body: `{"seeds":["http://127.0.0.2/"],"priority":{"rules":[{"pattern":"/ok/","boost":5}]}}`,
			wantStatus: 400, wantFields: []string{"boost"}},
		{name: "sitemaps not enabled", body: `{"seeds":["http://127.0.0.2/"],"sitemaps":true}`,
			wantStatus: 400, wantFields: []string{"sitemaps"}},
		{name: "too large", body: `{"seeds_text":"` + strings.Repeat("x", 70<<10) + `"}`, wantStatus: 413},
		{name: "content type", body: `{}`, ctype: "text/plain", wantStatus: 415},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+"/v1/crawls", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body errorBody
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("decode error body: %v", err)
			}
			if resp.StatusCode != tt.wantStatus || body.Error == "" {
				t.Fatalf("status %d error %q, want %d", resp.StatusCode, body.Error, tt.wantStatus)
			}
			var got []string
			for _, f := range body.Fields {
				got = append(got, f.Field)
				if f.Message == "" {
					t.Errorf("field %s without message", f.Field)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.wantFields, ",") {
				t.Errorf("fields %v (%+v), want %v", got, body.Fields, tt.wantFields)
			}
		})
	}
	if code, _ := e.do(t, http.MethodGet, "/v1/crawls", "", nil); code != http.StatusOK {
		t.Errorf("list status %d", code)
	}
	var list api.ListResponse
	e.do(t, http.MethodGet, "/v1/crawls", "", &list)
	if len(list.Crawls) != 0 {
		t.Errorf("rejected requests created crawls: %+v", list.Crawls)
	}
}

// readTopic reads records of topic until n arrived (and 300ms more).
func readTopic(t *testing.T, kc kafkaio.Config, topic string, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var (
		out   []kafka.Message
		extra *time.Timer
	)
	if err := kafkaio.Follow(ctx, kc, topic, func(m kafka.Message) {
		out = append(out, m)
		if len(out) == n && extra == nil {
			extra = time.AfterFunc(300*time.Millisecond, cancel)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if extra != nil {
		extra.Stop()
	}
	return out
}

func TestCrawlLifecycle(t *testing.T) {
	e := newEnv(t)
	body := `{"crawl_id":"life","name":"life test",
		"seeds":["http://127.0.0.2/a","HTTP://127.0.0.2/a"],
		"keywords":{"terms":["go","c++"],"templates":[{"name":"local","url":"http://127.0.0.3/search?q={query}&p={page}"}],"pages":2},
		"scope":{"allow_domains":["Example.ORG"],"deny_patterns":["\\?sort="]},
		"limits":{"max_depth":3,"max_pages":100},
		"priority":{"rules":[{"pattern":"/product/","delta":50,"hosts":["127.0.0.2"]}],"breadth_first":true},
		"politeness":{"delay":"1500ms"},
		"revisit":{"enabled":true,"min_interval":"1h","max_interval":"24h"}}`
	var created crawljobs.CreateResponse
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, &created); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	if created.CrawlID != "life" || created.State != "running" || created.Revision != 1 || created.SeedsPublished != 5 {
		t.Errorf("created = %+v", created)
	}
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, nil); code != http.StatusConflict {
		t.Errorf("second create: %d %s, want 409", code, raw)
	}

	// The seeds, result pages marked with their engine.
	got := make(map[string]string)
	for _, m := range readTopic(t, e.kafka, e.kafka.Topics().Discovered, 5) {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Fatal(err)
		}
		if d.CrawlId != "life" || d.Source != crawlv1.Source_SOURCE_SEED {
			t.Errorf("seed %+v", &d)
		}
		got[d.Url] = d.SerpEngine
	}
	want := map[string]string{
		"http://127.0.0.2/a":                    "",
		"http://127.0.0.3/search?q=go&p=1":      "local",
		"http://127.0.0.3/search?q=go&p=2":      "local",
		"http://127.0.0.3/search?q=c%2B%2B&p=1": "local",
		"http://127.0.0.3/search?q=c%2B%2B&p=2": "local",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("seeds %v, want %v", got, want)
	}

	// Counts come from ClickHouse.
	insertRows(t, e.store)
	var v crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/life", "", &v); code != http.StatusOK {
		t.Fatalf("get: %d %s", code, raw)
	}
	// The 5 seeds are still unconsumed on the discovered topic: in flight.
	wantCounts := jobs.Counts{Admitted: 3, Terminal: 2, Pending: 1, Queued: 1, Fetched: 1, Errors: 2, Documents: 1, InFlight: 5}
	if v.Counts == nil || *v.Counts != wantCounts || v.Status != "running" {
		t.Errorf("get: counts %+v status %q (%s), want %+v running", v.Counts, v.Status, v.CountsError, wantCounts)
	}
	var spec struct {
		Scope struct {
			AllowDomains []string `json:"allow_domains"`
		} `json:"scope"`
		Limits struct {
			MaxDepth int `json:"max_depth"`
		} `json:"limits"`
		Polite struct {
			Delay string `json:"delay"`
		} `json:"politeness"`
		Priority jobs.Priority `json:"priority"`
	}
	if err := json.Unmarshal(v.Spec, &spec); err != nil || spec.Scope.AllowDomains[0] != "example.org" || spec.Limits.MaxDepth != 3 || spec.Polite.Delay != "1.500s" ||
		fmt.Sprint(spec.Priority) != "{[{/product/ 50 [127.0.0.2]}] true}" {
		t.Errorf("spec %s (%v)", v.Spec, err)
	}

	// Transitions: each a new revision on the control topic.
	steps := []struct {
		action    string
		wantCode  int
		wantState string
		wantRev   uint64
	}{
		{"pause", 200, "paused", 2},
		{"pause", 200, "paused", 2}, // idempotent
		{"resume", 200, "running", 3},
		{"cancel", 200, "cancelled", 4},
		{"resume", 409, "", 0},
		{"pause", 409, "", 0},
	}
	for _, s := range steps {
		var v crawljobs.CrawlView
		code, raw := e.do(t, http.MethodPost, "/v1/crawls/life/"+s.action, "", nil)
		if code != s.wantCode {
			t.Fatalf("%s: %d %s, want %d", s.action, code, raw, s.wantCode)
		}
		if code != 200 {
			continue
		}
		_ = json.Unmarshal(raw, &v)
		if v.State != s.wantState || v.Revision != s.wantRev {
			t.Errorf("%s: state %s revision %d, want %s %d", s.action, v.State, v.Revision, s.wantState, s.wantRev)
		}
	}
	specs := crawlcontrol.NewSpecs()
	for _, m := range readTopic(t, e.kafka, e.kafka.Topics().Control, 5) {
		if crawlcontrol.IsClaim(m) {
			continue // the crawl id's claim, before revision 1
		}
		var s crawlv1.CrawlSpec
		if err := kafkaio.Decode(m, &s); err != nil {
			t.Fatal(err)
		}
		specs.Apply(&s)
	}
	if s := specs.Get("life"); s.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED || s.GetRevision() != 4 || s.GetLimits().GetMaxPages() != 100 {
		t.Errorf("control topic spec = %v", s)
	}
	if code, _ := e.do(t, http.MethodGet, "/v1/crawls/life", "", &v); code != 200 || v.Status != "cancelled" {
		t.Errorf("after cancel: %d status %q", code, v.Status)
	}
	for _, path := range []string{"/v1/crawls/nope", "/v1/crawls/nope/documents"} {
		if code, _ := e.do(t, http.MethodGet, path, "", nil); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
	if code, _ := e.do(t, http.MethodPost, "/v1/crawls/nope/cancel", "", nil); code != http.StatusNotFound {
		t.Errorf("cancel unknown: %d, want 404", code)
	}

	// Export.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+"/v1/crawls/life/documents", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/x-ndjson" {
		t.Fatalf("documents: %d %s", resp.StatusCode, ct)
	}
	var docs []jobs.Document
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var d jobs.Document
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		docs = append(docs, d)
		// The structured data and the fields are JSON values, not texts;
		// empty ones are [] and {}.
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &keys); err != nil {
			t.Fatal(err)
		}
		for k, want := range map[string]string{"json_ld": `[{"@type":"Product","name":"Kettle"}]`, "fields": `{"name":"Kettle","price":19.5}`,
			"opengraph": `{}`, "microdata": `[]`, "properties": `{}`, "language_detected": `"en"`} {
			if string(keys[k]) != want {
				t.Errorf("document line: %s = %s, want %s", k, keys[k], want)
			}
		}
	}
	if len(docs) != 1 || docs[0].URL != "http://127.0.0.2/a" || docs[0].Title != "Newer title" || docs[0].Status != 200 {
		t.Errorf("documents = %+v", docs)
	}

	var list api.ListResponse
	e.do(t, http.MethodGet, "/v1/crawls", "", &list)
	if len(list.Crawls) != 1 || list.Crawls[0].CrawlID != "life" || list.Crawls[0].State != "cancelled" {
		t.Errorf("list = %+v", list)
	}
}

func TestCreateSkipInvalidAndGeneratedID(t *testing.T) {
	e := newEnv(t)
	var created crawljobs.CreateResponse
	code, raw := e.do(t, http.MethodPost, "/v1/crawls",
		`{"skip_invalid_seeds":true,"seeds":["http://127.0.0.2/","bad seed"],"seeds_text":"http://127.0.0.4/\n\nalso bad\n"}`, &created)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	var fields []string
	for _, f := range created.InvalidSeeds {
		fields = append(fields, f.Field)
	}
	sort.Strings(fields)
	if created.SeedsPublished != 2 || strings.Join(fields, ",") != "seeds[1],seeds_text line 3" || !jobs.ValidCrawlID(created.CrawlID) {
		t.Errorf("created %+v", created)
	}
	if code, _ := e.do(t, http.MethodGet, "/v1/crawls/"+created.CrawlID, "", nil); code != 200 {
		t.Errorf("get generated id: %d", code)
	}
}

// insertRows stores a small crawl: 3 admitted URLs, one fetched, one
// failed twice, one never attempted (robots.txt, fetched but never
// admitted, does not make it look attempted); a document stored twice.
func insertRows(t *testing.T, s *chstore.Store) {
	t.Helper()
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	insert(t, ctx, s, chstore.URLSeen, []chstore.SeenRow{
		{CrawlID: "life", FP: 1, URL: "http://127.0.0.2/a", FirstSeen: now},
		{CrawlID: "life", FP: 2, URL: "http://127.0.0.2/b", FirstSeen: now},
		{CrawlID: "life", FP: 3, URL: "http://127.0.0.2/c", FirstSeen: now},
		{CrawlID: "other", FP: 4, URL: "http://127.0.0.2/d", FirstSeen: now},
	})
	insert(t, ctx, s, chstore.FetchLog, []chstore.FetchLogRow{
		{CrawlID: "life", URLFP: 1, URL: "http://127.0.0.2/a", Status: 200, FetchedAt: now, Final: true},
		{CrawlID: "life", URLFP: 2, URL: "http://127.0.0.2/b", ErrorKind: "timeout", FetchedAt: now},
		{CrawlID: "life", URLFP: 2, URL: "http://127.0.0.2/b", ErrorKind: "timeout", Attempt: 1, FetchedAt: now, Final: true},
		{CrawlID: "life", URLFP: 9, URL: "http://127.0.0.2/robots.txt", Status: 200, FetchedAt: now, Final: true},
		{CrawlID: "other", URLFP: 4, URL: "http://127.0.0.2/d", Status: 200, FetchedAt: now, Final: true},
	})
	insert(t, ctx, s, chstore.Documents, []chstore.DocumentRow{
		{CrawlID: "life", URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, Title: "Old title", FetchedAt: now.Add(-time.Hour)},
		{CrawlID: "life", URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, Title: "Newer title", FetchedAt: now,
			JSONLD: `[{"@type":"Product","name":"Kettle"}]`, Fields: `{"name":"Kettle","price":19.5}`, LanguageDetected: "en"},
		{CrawlID: "other", URLFP: 4, URL: "http://127.0.0.2/d", Status: 200, FetchedAt: now},
	})
}

func insert[T any](t *testing.T, ctx context.Context, s *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	var cols bytes.Buffer
	cols.WriteString(strings.Join(table.Columns, ", "))
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+table.Name+" ("+cols.String()+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(table.Values(r)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}
