package launcher

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

var now = time.Date(2026, 11, 22, 4, 5, 6, 0, time.UTC)

// parse parses args (and env) the way cmd/crawl does.
func parse(t *testing.T, args []string, env map[string]string) (Config, error) {
	t.Helper()
	var cfg Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.RegisterFlags(fs)
	err := envflag.Parse(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		err = cfg.Validate()
	}
	return cfg, err
}

func TestCrawlRequestMerge(t *testing.T) {
	tests := []struct {
		name    string
		spec    string // file content; "" = no --spec
		extract string // --extract file content; "" = no --extract
		args    []string
		env     map[string]string
		want    crawlspec.Request
	}{
		{
			name: "flags only",
			args: []string{"--demo", "--deny-pattern", `/sec1/`, "--deny-pattern", `\?sort=`, "--same-host-only", "--max-pages-per-host", "5"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Scope:  &crawlspec.Scope{DenyPatterns: []string{`/sec1/`, `\?sort=`}, SameHostOnly: true},
				Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth, MaxPagesPerHost: 5}},
		},
		{
			name: "follow traps",
			args: []string{"--demo", "--follow-traps"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Scope:  &crawlspec.Scope{FollowTraps: true},
				Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "priority rules and breadth-first",
			args: []string{"--demo", "--priority", `/product/=+50`, "--priority", `\?sort==-100`, "--breadth-first"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Priority: &crawlspec.Priority{Rules: []crawlspec.PriorityRule{{Pattern: `/product/`, Delta: 50}, {Pattern: `\?sort=`, Delta: -100}},
					BreadthFirst: true},
				Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "--priority replaces the file's rules, keeps its breadth_first",
			spec: `{"priority": {"rules": [{"pattern": "/old/", "delta": 3, "hosts": ["a.example"]}], "breadth_first": true}}`,
			args: []string{"--demo", "--priority", `/new/=-7`},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Priority: &crawlspec.Priority{Rules: []crawlspec.PriorityRule{{Pattern: `/new/`, Delta: -7}}, BreadthFirst: true},
				Limits:   &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "the spec file's priority rules, hosts and all",
			spec: `{"priority": {"rules": [{"pattern": "/news/", "delta": 20, "hosts": ["a.example"]}]}}`,
			args: []string{"--demo"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Priority: &crawlspec.Priority{Rules: []crawlspec.PriorityRule{{Pattern: `/news/`, Delta: 20, Hosts: []string{"a.example"}}}},
				Limits:   &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "no scope at all: only the default depth",
			args: []string{"--seed", "http://127.0.0.2/"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "flags override the file's fields, the rest stays",
			spec: `{"crawl_id": "from-file", "seeds": ["http://127.0.0.2/"],
				"scope": {"deny_patterns": ["a"], "allow_hosts": ["127.0.0.2"], "same_host_only": true},
				"limits": {"max_depth": 3, "max_pages": 100},
				"politeness": {"delay": "2s"}}`,
			args: []string{"--deny-pattern", "b", "--max-pages", "0", "--same-host-only=false"},
			want: crawlspec.Request{CrawlID: "from-file", Seeds: []string{"http://127.0.0.2/"},
				Scope:      &crawlspec.Scope{DenyPatterns: []string{"b"}, AllowHosts: []string{"127.0.0.2"}},
				Limits:     &crawlspec.Limits{MaxDepth: 3},
				Politeness: &crawlspec.Politeness{Delay: "2s"}},
		},
		{
			name: "crawl-id flag and environment",
			spec: `{"crawl_id": "from-file", "seeds": ["http://127.0.0.2/"], "limits": {"max_depth": 0, "max_pages_per_host": 9}}`,
			args: []string{"--crawl-id", "from-flag"},
			env:  map[string]string{"CRAWLER_ALLOW_DOMAIN": "example.org", "CRAWLER_MAX_DEPTH": "4"},
			want: crawlspec.Request{CrawlID: "from-flag", Seeds: []string{"http://127.0.0.2/"},
				Scope:  &crawlspec.Scope{AllowDomains: []string{"example.org"}},
				Limits: &crawlspec.Limits{MaxDepth: 4, MaxPagesPerHost: 9}},
		},
		{
			name: "scope mode flag replaces the file's",
			spec: `{"seeds": ["http://127.0.0.2/"], "scope": {"mode": "web"}}`,
			args: []string{"--scope", "host"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", Seeds: []string{"http://127.0.0.2/"},
				Scope: &crawlspec.Scope{Mode: "host"}, Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "identity and time limit flags",
			args: []string{"--demo", "--user-agent", "examplebot/1.0 (+https://example.org/bot)", "--header", "Accept-Language: en",
				"--header", "From: ops@example.org", "--max-duration", "30m"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Limits:   &crawlspec.Limits{MaxDepth: DefaultMaxDepth, MaxDuration: "30m"},
				Identity: &crawlspec.Identity{UserAgent: "examplebot/1.0 (+https://example.org/bot)", Headers: []string{"Accept-Language: en", "From: ops@example.org"}}},
		},
		{
			name: "identity flags replace the file's fields, the rest stays",
			spec: `{"seeds": ["http://127.0.0.2/"], "limits": {"max_duration": "1h", "max_pages": 7},
				"identity": {"user_agent": "filebot (+https://example.org/)", "headers": ["X-A: 1", "X-B: 2"]}}`,
			args: []string{"--header", "X-C: 3"},
			env:  map[string]string{"CRAWLER_MAX_DURATION": "2h"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", Seeds: []string{"http://127.0.0.2/"},
				Limits:   &crawlspec.Limits{MaxDepth: DefaultMaxDepth, MaxPages: 7, MaxDuration: "2h"},
				Identity: &crawlspec.Identity{UserAgent: "filebot (+https://example.org/)", Headers: []string{"X-C: 3"}}},
		},
		{
			name:    "--extract and --documents",
			extract: `{"rules": [{"name": "product", "pattern": "/product/", "fields": [{"name": "price", "css": ".price", "type": "number"}, {"name": "images", "xpath": "//img/@src", "type": "url", "list": true}]}]}`,
			args:    []string{"--demo", "--documents", "pdf, docx"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506",
				Extract: &crawlspec.Extraction{Rules: []crawlspec.ExtractRule{{Name: "product", Pattern: "/product/", Fields: []crawlspec.ExtractField{
					{Name: "price", CSS: ".price", Type: "number"}, {Name: "images", XPath: "//img/@src", Type: "url", List: true}}}}},
				Documents: &crawlspec.Documents{ContentTypes: []string{"application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}},
				Limits:    &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name:    "--extract and --documents replace the file's, the rest stays",
			spec:    `{"seeds": ["http://127.0.0.2/"], "extract": {"rules": [{"name": "old", "fields": [{"name": "t", "css": "title"}]}]}, "documents": {"content_types": ["pdf"]}}`,
			extract: `{"rules": [{"name": "new", "hosts": ["127.0.0.2"], "fields": [{"name": "h", "css": "h1"}]}]}`,
			args:    []string{"--documents", "office"},
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", Seeds: []string{"http://127.0.0.2/"},
				Extract: &crawlspec.Extraction{Rules: []crawlspec.ExtractRule{{Name: "new", Hosts: []string{"127.0.0.2"}, Fields: []crawlspec.ExtractField{{Name: "h", CSS: "h1"}}}}},
				Documents: &crawlspec.Documents{ContentTypes: []string{
					"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
					"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
					"application/vnd.openxmlformats-officedocument.presentationml.presentation",
					"application/vnd.oasis.opendocument.text", "application/vnd.oasis.opendocument.spreadsheet",
					"application/vnd.oasis.opendocument.presentation"}},
				Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "the spec file's extract and documents without the flags",
			spec: `{"seeds": ["http://127.0.0.2/"], "extract": {"rules": [{"name": "old", "fields": [{"name": "t", "css": "title"}]}]}, "documents": {"content_types": ["pdf"]}}`,
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", Seeds: []string{"http://127.0.0.2/"},
				Extract:   &crawlspec.Extraction{Rules: []crawlspec.ExtractRule{{Name: "old", Fields: []crawlspec.ExtractField{{Name: "t", CSS: "title"}}}}},
				Documents: &crawlspec.Documents{ContentTypes: []string{"pdf"}},
				Limits:    &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
		{
			name: "spec max_depth 0 means the default",
			spec: `{"seeds_text": "http://127.0.0.2/\n", "limits": {"max_depth": 0}}`,
			want: crawlspec.Request{CrawlID: "crawl-20261122-040506", SeedsText: "http://127.0.0.2/\n", Limits: &crawlspec.Limits{MaxDepth: DefaultMaxDepth}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.spec != "" {
				args = append([]string{"--spec", writeTemp(t, tt.spec)}, args...)
			}
			if tt.extract != "" {
				args = append([]string{"--extract", writeTemp(t, tt.extract)}, args...)
			}
			cfg, err := parse(t, args, tt.env)
			if err != nil {
				t.Fatalf("flags: %v", err)
			}
			got, err := cfg.CrawlRequest(now)
			if err != nil {
				t.Fatalf("CrawlRequest: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("request\n%s\nwant\n%s", specJSON(got), specJSON(tt.want))
			}
		})
	}
}

// TestDescribeScope: the launcher says which sites a crawl stays on, from
// the seeds of its flags, its seeds file and its spec, and warns about a
// crawl of the web without a page budget.
func TestDescribeScope(t *testing.T) {
	file := writeTemp(t, "# my sites\nhttp://blog.example.org/\n\nhttps://www.example.org/a\nnot a url\n")
	seeds := knownSeeds([]string{"http://127.0.0.2:8080/"}, file, crawlspec.Request{Seeds: []string{"http://other.example.net/"}})
	tests := []struct {
		name    string
		req     crawlspec.Request
		want    []string
		wantNot string
	}{
		{"default: the seeds' domains", crawlspec.Request{}, []string{"scope: domain", "example.org", "127.0.0.2:8080"}, "warning"},
		{"hosts", crawlspec.Request{Scope: &crawlspec.Scope{Mode: "host"}}, []string{"scope: host", "blog.example.org", "www.example.org"}, "warning"},
		{"web without a budget", crawlspec.Request{Scope: &crawlspec.Scope{Mode: "web"}}, []string{"scope: web", "warning", "--max-pages"}, ""},
		{"web with a budget", crawlspec.Request{Scope: &crawlspec.Scope{Mode: "web"}, Limits: &crawlspec.Limits{MaxPages: 100}}, []string{"scope: web"}, "warning"},
		{"keywords: the web", crawlspec.Request{Keywords: &crawlspec.Keywords{Terms: []string{"go"}}}, []string{"scope: web"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeScope(tt.req, seeds)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("describeScope = %q, want it to contain %q", got, w)
				}
			}
			if tt.wantNot != "" && strings.Contains(got, tt.wantNot) {
				t.Errorf("describeScope = %q, want no %q", got, tt.wantNot)
			}
		})
	}
}

func TestCrawlRequestRejects(t *testing.T) {
	tests := []struct {
		name       string
		spec       string
		args       []string
		wantFields []string // the FieldErrors' fields, in order
		wantMsg    string   // else: a plain error containing this
		wantIs     error
	}{
		{name: "spec not JSON", spec: `{"scope": {`, wantMsg: "malformed JSON"},
		{name: "spec with trailing data", spec: `{} {}`, wantMsg: "data after the JSON object"},
		{name: "unknown field", spec: `{"scope": {"deny_pattern": ["x"]}}`, args: []string{"--demo"}, wantFields: []string{"deny_pattern"}},
		{name: "wrong type", spec: `{"limits": {"max_pages": "10"}}`, args: []string{"--demo"}, wantFields: []string{"limits.max_pages"}},
		{name: "every problem of the file at once", spec: `{"seeds": ["http://127.0.0.2/", "no url"], "scope": {"deny_patterns": ["(", "ok"], "allow_hosts": ["a/b"]}, "politeness": {"delay": "-1s"}}`,
			wantFields: []string{"seeds[1]", "scope.allow_hosts[0]", "scope.deny_patterns[0]", "politeness.delay"}},
		{name: "invalid regexp from a flag", args: []string{"--demo", "--allow-pattern", "ok", "--allow-pattern", "[z-a]"},
			wantFields: []string{"scope.allow_patterns[1] (--allow-pattern)"}},
		{name: "flag error next to a file error", spec: `{"scope": {"deny_patterns": ["("]}}`, args: []string{"--demo", "--deny-host", "a b"},
			wantFields: []string{"scope.deny_hosts[0] (--deny-host)", "scope.deny_patterns[0]"}},
		{name: "bad crawl id flag", args: []string{"--demo", "--crawl-id", "a/b"}, wantFields: []string{"crawl_id (--crawl-id)"}},
		{name: "unknown scope", args: []string{"--demo", "--scope", "planet"}, wantFields: []string{"scope.mode (--scope)"}},
		{name: "a bad priority rule in the file", spec: `{"priority": {"rules": [{"pattern": "/ok/", "delta": 1}, {"pattern": "/x/", "delta": 2, "hosts": ["a b"]}]}}`,
			args: []string{"--demo"}, wantFields: []string{"priority.rules[1]"}},
		{name: "bad crawl id in the file", spec: `{"crawl_id": "a b"}`, args: []string{"--demo"}, wantFields: []string{"crawl_id"}},
		{name: "user agent without contact", args: []string{"--demo", "--user-agent", "examplebot/1.0"}, wantFields: []string{"identity.user_agent (--user-agent)"}},
		{name: "forbidden and malformed headers", args: []string{"--demo", "--header", "From: a@example.org", "--header", "Cookie: a=b", "--header", "X-Bad"},
			wantFields: []string{"identity.headers[1] (--header)", "identity.headers[2] (--header)"}},
		{name: "negative time limit", args: []string{"--demo", "--max-duration", "-5m"}, wantFields: []string{"limits.max_duration (--max-duration)"}},
		{name: "time limit without unit", args: []string{"--demo", "--max-duration", "30"}, wantFields: []string{"limits.max_duration (--max-duration)"}},
		{name: "header in the file", spec: `{"identity": {"headers": ["Host: x"]}}`, args: []string{"--demo"}, wantFields: []string{"identity.headers[0]"}},
		{name: "nothing to crawl", spec: `{"scope": {"same_host_only": true}}`, wantMsg: "nothing to crawl"},
		{name: "missing spec file", args: []string{"--demo", "--spec", filepath.Join(os.TempDir(), "no-such-spec.json")}, wantIs: os.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if tt.spec != "" {
				args = append([]string{"--spec", writeTemp(t, tt.spec)}, args...)
			}
			cfg, err := parse(t, args, nil)
			if err != nil {
				t.Fatalf("flags: %v", err)
			}
			_, err = cfg.CrawlRequest(now)
			checkErr(t, err, tt.wantFields, tt.wantMsg, tt.wantIs)
		})
	}
}

func TestFlagsRejected(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"max-depth 0", []string{"--demo", "--max-depth", "0"}, "max-depth 0: want at least 1"},
		{"negative max-depth", []string{"--demo", "--max-depth", "-1"}, "want a whole number"},
		{"max-depth over uint32", []string{"--demo", "--max-depth", "4294967296"}, "want a whole number from 0 to 4294967295"},
		{"same-host-only not a bool", []string{"--demo", "--same-host-only=maybe"}, "want true or false"},
		{"follow-traps not a bool", []string{"--demo", "--follow-traps=perhaps"}, "want true or false"},
		{"priority without a number", []string{"--demo", "--priority", "/product/"}, `priority rule "/product/": want PATTERN=+N`},
		{"priority not a whole number", []string{"--demo", "--priority", "/product/=+1.5"}, `"+1.5" is not a whole number`},
		{"priority bad pattern", []string{"--demo", "--priority", "(=+5"}, "missing closing )"},
		{"priority delta 0", []string{"--demo", "--priority", "/x/=0"}, "delta 0 changes nothing"},
		{"priority delta out of range", []string{"--demo", "--priority", "/x/=+5000"}, "delta 5000 not in [-1000, 1000]"},
		{"breadth-first not a bool", []string{"--demo", "--breadth-first=often"}, "want true or false"},
		{"nothing to crawl", []string{"--max-pages", "3"}, "nothing to crawl"},
		{"unknown document type", []string{"--demo", "--documents", "pdf,exe"}, `content type "exe"`},
		{"document type HTML", []string{"--demo", "--documents", "text/html"}, `content type "text/html"`},
		{"no restart tolerated", []string{"--demo", "--restart-max", "0"}, "restart-max at least 1"},
		{"zero back-off", []string{"--demo", "--restart-backoff", "0s"}, "must be positive"},
		{"back-off above its maximum", []string{"--demo", "--restart-backoff", "1m", "--restart-max-backoff", "10s"}, "above its maximum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.args, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantMsg)
			}
		})
	}
}

// TestExtractRejects: a bad --extract file is an error that names the
// file and, when it is one rule's, the rule: a decoding problem at once, a
// bad selector, pattern or type as the request's field error "extract
// (--extract FILE)".
func TestExtractRejects(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		wantField bool     // a crawlspec.FieldErrors naming --extract FILE
		wantMsg   []string // the error also contains these
	}{
		{"not JSON", `{"rules": [`, false, []string{"unexpected EOF"}},
		{"the request, not its extract object", `{"extract": {"rules": []}}`, false, []string{`unknown field "extract"`, `want {"rules": [...]}`}},
		{"no rules", `{"rules": []}`, false, []string{"no rules"}},
		{"unknown field of a rule", `{"rules": [{"name": "a", "fields": [{"name": "x", "css": "p"}]}, {"name": "price", "fields": [{"name": "p", "csss": ".price"}]}]}`,
			false, []string{`rule 2 ("price")`, `unknown field "csss"`}},
		{"wrong type", `{"rules": [{"name": "list", "fields": [{"name": "x", "css": "p", "list": "yes"}]}]}`, false, []string{`rule 1 ("list")`}},
		{"bad css", `{"rules": [{"name": "product", "fields": [{"name": "price", "css": "..price"}]}]}`, true, []string{`rule 1 ("product")`, `field 1 ("price")`}},
		{"bad pattern", `{"rules": [{"name": "ok", "fields": [{"name": "t", "css": "title"}]}, {"name": "broken", "pattern": "(", "fields": [{"name": "t", "css": "title"}]}]}`,
			true, []string{`rule 2 ("broken")`, "pattern"}},
		{"css and xpath", `{"rules": [{"name": "both", "fields": [{"name": "t", "css": "title", "xpath": "//title"}]}]}`, true, []string{`rule 1 ("both")`, "give one of them"}},
		{"bad type", `{"rules": [{"name": "typed", "fields": [{"name": "t", "css": "title", "type": "money"}]}]}`, true, []string{`rule 1 ("typed")`, `type "money"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeTemp(t, tt.file)
			cfg, err := parse(t, []string{"--demo", "--extract", file}, nil)
			if err != nil {
				t.Fatalf("flags: %v", err)
			}
			_, err = cfg.CrawlRequest(now)
			if err == nil {
				t.Fatal("no error")
			}
			var fe crawlspec.FieldErrors
			if got := errors.As(err, &fe); got != tt.wantField {
				t.Errorf("field errors %v, want %v: %v", got, tt.wantField, err)
			}
			if tt.wantField && (len(fe) != 1 || fe[0].Field != "extract (--extract "+file+")") {
				t.Errorf("field errors %v, want one of field \"extract (--extract %s)\"", fe, file)
			}
			for _, w := range append(tt.wantMsg, file) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v, want it to contain %q", err, w)
				}
			}
		})
	}
	cfg, err := parse(t, []string{"--demo", "--extract", filepath.Join(t.TempDir(), "none.json")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.CrawlRequest(now); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want %v", err, os.ErrNotExist)
	}
}

// TestShopRulesFile: the shop's committed rules file is what --extract
// takes.
func TestShopRulesFile(t *testing.T) {
	cfg, err := parse(t, []string{"--demo", "--extract", "../../bench/shop-extract.json", "--documents", "pdf,docx"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err := cfg.CrawlRequest(now)
	if err != nil {
		t.Fatalf("CrawlRequest: %v", err)
	}
	if req.Extract == nil || len(req.Extract.Rules) != 1 || len(req.Extract.Rules[0].Fields) < 10 {
		t.Errorf("extract %+v, want the product rule", req.Extract)
	}
}

// TestRunRejectsBadSpecFirst: a bad spec stops Run before it builds or
// starts anything: the data directory is not even created.
func TestRunRejectsBadSpecFirst(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg, err := parse(t, []string{"--demo", "--data-dir", dataDir, "--spec",
		writeTemp(t, `{"scope": {"deny_patterns": ["(unclosed"]}, "limits": {"max_pagez": 1}}`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = Run(t.Context(), cfg, strings.NewReader(""), out)
	checkErr(t, err, []string{"max_pagez"}, "", nil)
	if _, serr := os.Stat(dataDir); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("data dir exists after a rejected spec (stat: %v)", serr)
	}
	if b, _ := os.ReadFile(out.Name()); len(b) > 0 {
		t.Errorf("Run wrote %q before rejecting the spec", b)
	}
}

func checkErr(t *testing.T, err error, wantFields []string, wantMsg string, wantIs error) {
	t.Helper()
	var fe crawlspec.FieldErrors
	switch {
	case err == nil:
		t.Fatal("no error")
	case wantIs != nil:
		if !errors.Is(err, wantIs) {
			t.Errorf("err = %v, want %v", err, wantIs)
		}
	case wantFields != nil:
		if !errors.As(err, &fe) {
			t.Fatalf("err = %v, want field errors %v", err, wantFields)
		}
		var got []string
		for _, f := range fe {
			got = append(got, f.Field)
		}
		if !reflect.DeepEqual(got, wantFields) {
			t.Errorf("fields %q, want %q (%v)", got, wantFields, err)
		}
	default:
		if errors.As(err, &fe) || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("err = %v, want a plain error containing %q", err, wantMsg)
		}
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func specJSON(r crawlspec.Request) string {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// TestWriteSpecRoundTrip: the file handed to the seeder's --spec decodes
// (strictly, as the seeder reads it) to the request the launcher checked.
func TestWriteSpecRoundTrip(t *testing.T) {
	req := crawlspec.Request{CrawlID: "c-1", Seeds: []string{"http://127.0.0.2/"},
		Scope:   &crawlspec.Scope{SameHostOnly: true, DenyPatterns: []string{`\?sort=`}, AllowDomains: []string{"example.org"}},
		Limits:  &crawlspec.Limits{MaxDepth: 3, MaxPagesPerHost: 5},
		Revisit: &crawlspec.Revisit{Enabled: false, MinInterval: "1h"}}
	path, err := writeSpec(t.TempDir(), req)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "c-1.json" {
		t.Errorf("spec file %s, want c-1.json", path)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := crawlspec.Decode(f)
	if err != nil {
		t.Fatalf("decode the written spec: %v", err)
	}
	if !reflect.DeepEqual(got, req) {
		t.Errorf("round trip\n%s\nwant\n%s", specJSON(got), specJSON(req))
	}
}

// TestServiceArgs: --store-links reaches the parser, and only the parser;
// without it no service gets extra flags.
func TestServiceArgs(t *testing.T) {
	if got := serviceArgs(Config{}, 0); got != nil {
		t.Errorf("default: %v, want none", got)
	}
	got := serviceArgs(Config{StoreLinks: true}, 0)
	if len(got) != 1 || len(got["parser"]) != 1 || got["parser"][0] != "--store-links" {
		t.Errorf("--store-links: %v, want the parser's --store-links", got)
	}
	if got := serviceArgs(Config{Console: true}, 0); len(got["parser"]) != 1 || got["parser"][0] != "--store-links" {
		t.Errorf("--console: %v, want the parser's --store-links (the URL story's links)", got)
	}
}

// TestBudgetWindow: a crawl with a page budget gets fetchers whose window
// holds four times its budget's share of a partition (what the scheduler
// may send it), within [1000, 16000], and a memory limit raised by what
// that window holds; a small budget or none changes nothing.
func TestBudgetWindow(t *testing.T) {
	cases := []struct {
		pages      uint64
		partitions int
		want       int
	}{
		{0, 8, 1000},
		{424, 8, 1000},      // 212 a partition: the default holds it
		{21200, 8, 10600},   // the best-first bench at 200 sites
		{1000000, 8, 16000}, // larger budgets: the scheduler's frontier
		{21200, 0, 1000},
	}
	for _, c := range cases {
		if got := budgetWindow(c.pages, c.partitions); got != c.want {
			t.Errorf("budgetWindow(%d, %d) = %d, want %d", c.pages, c.partitions, got, c.want)
		}
	}
	if got := serviceArgs(Config{Partitions: 8}, 424); got != nil {
		t.Errorf("budget 424: %v, want no extra flags", got)
	}
	got := serviceArgs(Config{Partitions: 8}, 21200)
	if want := []string{"--max-inflight-per-partition", "10600", "--max-host-queue", "1000"}; !reflect.DeepEqual(got["fetcher"], want) {
		t.Errorf("budget 21200: fetcher args %v, want %v", got["fetcher"], want)
	}
	if l := memoryLimits(424, 8, false); l != nil {
		t.Errorf("budget 424: memory limits %v, want the defaults (nil)", l)
	}
	l := memoryLimits(21200, 8, false)
	if want := pipeline.DefaultMemoryLimits["fetcher"] + 9600*8*windowBytes; l["fetcher"] != want {
		t.Errorf("budget 21200: fetcher limit %d, want %d", l["fetcher"], want)
	}
	if l["parser"] != pipeline.DefaultMemoryLimits["parser"] {
		t.Errorf("budget 21200: parser limit %d, want the default %d", l["parser"], pipeline.DefaultMemoryLimits["parser"])
	}
	// The WARC archive's state is added to the fetcher's, with or without
	// a budget.
	if l := memoryLimits(0, 8, true); l["fetcher"] != pipeline.DefaultMemoryLimits["fetcher"]+warcMemory {
		t.Errorf("warc: fetcher limit %d, want %d", l["fetcher"], pipeline.DefaultMemoryLimits["fetcher"]+warcMemory)
	}
	if l := memoryLimits(21200, 8, true); l["fetcher"] != pipeline.DefaultMemoryLimits["fetcher"]+9600*8*windowBytes+warcMemory {
		t.Errorf("warc and budget 21200: fetcher limit %d", l["fetcher"])
	}
}

// TestDescribeContent: the launcher says at the start which extraction
// rules (and from which file) and which documents the crawl takes; nothing
// when it takes neither.
func TestDescribeContent(t *testing.T) {
	if got := describeContent(crawlspec.Request{}, ""); got != "" {
		t.Errorf("no rules nor documents: %q, want nothing", got)
	}
	req := crawlspec.Request{
		Extract: &crawlspec.Extraction{Rules: []crawlspec.ExtractRule{{Name: "product", Fields: make([]crawlspec.ExtractField, 3)},
			{Name: "list", Fields: make([]crawlspec.ExtractField, 1)}}},
		Documents: &crawlspec.Documents{ContentTypes: []string{"application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}},
	}
	got := describeContent(req, "shop.json")
	for _, want := range []string{"extraction rules: product (3 fields), list (1 field) from shop.json", "documents kept beyond HTML: pdf, docx"} {
		if !strings.Contains(got, want) {
			t.Errorf("describeContent = %q, want it to contain %q", got, want)
		}
	}
}
