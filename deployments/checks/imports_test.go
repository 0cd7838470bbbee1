package checks

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import rule of the pure packages (README.md, "The pure packages").
//
// A pure package is domain code as plain functions and data: the fetcher's
// turn decisions, the scheduler's admission, the parser's extraction, and
// the libraries every service shares for URLs, scope, politeness delays,
// page budgets, crawl identities, simhashes, back-off and ClickHouse row
// types. None of them may reach, through any chain of non-test imports, a
// package that talks to the outside:
//
//   - the broker client github.com/segmentio/kafka-go and our adapter over
//     it, libs/kafkaio;
//   - the ClickHouse driver github.com/ClickHouse/clickhouse-go/v2 and our
//     adapter over it, libs/chstore (its row types, libs/chstore/rows, are
//     pure and allowed);
//   - our HTTP clients, services/fetcher/internal/httpfetch and
//     services/fetcher/internal/proxies;
//   - net/http and everything under it.
//
// net/http is forbidden whole, server and client alike, rather than "its
// client": Go cannot tell which half of a package an import uses, and no
// pure package needs either (a status code is an int, a header a pair of
// strings). Two libraries the pure packages need import it for something
// they never call, and only those edges are exempt (auditedEdges, each
// with the reason): goquery, for NewDocumentFromResponse (extract parses
// bytes it is handed), and golang.org/x/net/publicsuffix, for
// net/http/cookiejar's PublicSuffixList interface (scope asks it for
// registrable domains). Any other way to net/http fails: one of our
// packages importing it, or a new library that does, until someone reads
// why and adds the edge here.
//
// The rule spans modules (libs and three services), so it is checked here,
// over the workspace, with the go command's own view of the graph (go list
// -deps: non-test imports, the build's tags). It needs no network: the
// modules it lists are those every module's tests build, which CI fetches
// first (.ci/run).

// purePackages are the packages the rule applies to, as go list names them
// from the workspace root.
var purePackages = []string{
	"./services/fetcher/internal/decide",
	"./services/fetcher/internal/partition",
	"./services/fetcher/internal/rendersniff",
	"./services/scheduler/internal/admit",
	"./services/parser/internal/extract",
	"./services/parser/internal/traps",
	"./libs/urlcanon",
	"./libs/scope",
	"./libs/hostdelay",
	"./libs/pagebudget",
	"./libs/crawlsettings",
	"./libs/priority",
	"./libs/fieldrules",
	"./libs/doctypes",
	"./libs/identity",
	"./libs/simhash",
	"./libs/backoff",
	"./libs/chstore/rows",
}

const module = "github.com/trawl-crawler/trawl/"

// forbiddenImport is one forbidden package and everything under it,
// except the subtrees in allow.
type forbiddenImport struct {
	path  string
	what  string
	allow []string
}

var forbiddenImports = []forbiddenImport{
	{path: "github.com/segmentio/kafka-go", what: "the Kafka client"},
	{path: module + "libs/kafkaio", what: "the Kafka adapter"},
	{path: "github.com/ClickHouse/clickhouse-go/v2", what: "the ClickHouse driver"},
	{path: module + "libs/chstore", what: "the ClickHouse adapter", allow: []string{module + "libs/chstore/rows"}},
	{path: module + "services/fetcher/internal/httpfetch", what: "our HTTP client"},
	{path: module + "services/fetcher/internal/proxies", what: "our proxy client"},
	{path: "net/http", what: "net/http"},
}

// auditedEdges are the imports of a forbidden package by a library that
// are read and exempt, with why. The exemption is of the one edge: what
// else the library imports is checked as anything else.
var auditedEdges = map[[2]string]string{
	{"github.com/PuerkitoBio/goquery", "net/http"}: "only NewDocumentFromResponse takes an *http.Response; " +
		"extract builds its documents from bytes (NewDocumentFromReader)",
	{"golang.org/x/net/publicsuffix", "net/http/cookiejar"}: "only asserts that its List is a cookiejar.PublicSuffixList; " +
		"scope calls EffectiveTLDPlusOne",
}

// under reports whether p is path or a package below it.
func under(p, path string) bool {
	return p == path || strings.HasPrefix(p, path+"/")
}

// forbidden returns what p is when the rule forbids it, or "".
func forbidden(p string) string {
	for _, f := range forbiddenImports {
		if under(p, f.path) && !slices.ContainsFunc(f.allow, func(a string) bool { return under(p, a) }) {
			return f.what
		}
	}
	return ""
}

// importGraph maps a package to the packages it imports.
type importGraph map[string][]string

// violation is a pure package that reaches a forbidden one: chain runs
// from the pure package to the forbidden package.
type violation struct {
	chain []string
	what  string
}

func (v violation) String() string {
	short := make([]string, len(v.chain))
	for i, p := range v.chain {
		short[i] = strings.TrimPrefix(p, module)
	}
	return fmt.Sprintf("%s imports %s (%s): %s",
		short[0], short[len(short)-1], v.what, strings.Join(short, " → "))
}

// violations returns, for each root, every forbidden package it reaches
// through g, each with a shortest import chain, nearest first (imports in
// lexical order break ties, so the output is stable). A
// forbidden package ends its chain (what it imports is its own business)
// and an audited edge is not followed.
func violations(g importGraph, roots []string) []violation {
	var out []violation
	for _, root := range roots {
		parent := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			p := queue[0]
			queue = queue[1:]
			if what := forbidden(p); what != "" {
				var chain []string
				for q := p; q != ""; q = parent[q] {
					chain = append(chain, q)
				}
				slices.Reverse(chain)
				out = append(out, violation{chain: chain, what: what})
				continue
			}
			imports := slices.Clone(g[p])
			slices.Sort(imports)
			for _, q := range imports {
				if _, seen := parent[q]; seen {
					continue
				}
				if _, ok := auditedEdges[[2]string{p, q}]; ok {
					continue
				}
				parent[q] = p
				queue = append(queue, q)
			}
		}
	}
	return out
}

// TestPureImports checks the rule over the workspace's real import graph.
func TestPureImports(t *testing.T) {
	g, roots := listImports(t, purePackages)
	if len(roots) != len(purePackages) {
		t.Fatalf("go list named %d packages for the %d pure ones: %v", len(roots), len(purePackages), roots)
	}
	for _, v := range violations(g, roots) {
		t.Errorf("%v\n\tA pure package must not reach it (README.md, The pure packages): cut the edge, "+
			"or move what is needed into a package that does not import it.", v)
	}
	// An exemption that no longer matches any import is dropped, so that
	// the list says what is true.
	for edge := range auditedEdges {
		if !slices.Contains(g[edge[0]], edge[1]) {
			t.Errorf("audited edge %s → %s is not in the pure packages' graph any more: remove it from auditedEdges", edge[0], edge[1])
		}
	}
}

// listImports returns the non-test import graph of pkgs and their
// dependencies, and the import paths of pkgs themselves.
func listImports(t *testing.T, pkgs []string) (importGraph, []string) {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{if .DepOnly}}dep{{else}}root{{end}} {{.ImportPath}} {{join .Imports \" \"}}"}, pkgs...)
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = repoRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.Bytes())
	}
	g := importGraph{}
	var roots []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			t.Fatalf("go list -deps: unexpected line %q", sc.Text())
		}
		g[f[1]] = f[2:]
		if f[0] == "root" {
			roots = append(roots, f[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return g, roots
}

// TestViolations: the checker fails what the rule forbids, with the chain
// that reaches it, and passes what it allows.
func TestViolations(t *testing.T) {
	const (
		decide    = module + "services/fetcher/internal/decide"
		robots    = module + "services/fetcher/internal/robots"
		httpfetch = module + "services/fetcher/internal/httpfetch"
		extract   = module + "services/parser/internal/extract"
		scope     = module + "libs/scope"
		urlcanon  = module + "libs/urlcanon"
		rows      = module + "libs/chstore/rows"
		chstore   = module + "libs/chstore"
		goquery   = "github.com/PuerkitoBio/goquery"
		suffix    = "golang.org/x/net/publicsuffix"
	)
	tests := []struct {
		name  string
		g     importGraph
		roots []string
		want  []string
	}{
		{
			name:  "clean",
			g:     importGraph{decide: {"time", urlcanon}, urlcanon: {"net/url"}},
			roots: []string{decide},
		},
		{
			name:  "through the robots.txt cache to the HTTP client",
			g:     importGraph{decide: {robots}, robots: {httpfetch, "strings"}, httpfetch: {"net/http"}},
			roots: []string{decide},
			want:  []string{"services/fetcher/internal/decide imports services/fetcher/internal/httpfetch (our HTTP client): services/fetcher/internal/decide → services/fetcher/internal/robots → services/fetcher/internal/httpfetch"},
		},
		{
			name:  "net/http for a constant",
			g:     importGraph{decide: {robots}, robots: {"net/http"}},
			roots: []string{decide},
			want:  []string{"services/fetcher/internal/decide imports net/http (net/http): services/fetcher/internal/decide → services/fetcher/internal/robots → net/http"},
		},
		{
			name:  "a package under net/http",
			g:     importGraph{decide: {"net/http/httptrace"}},
			roots: []string{decide},
			want:  []string{"services/fetcher/internal/decide imports net/http/httptrace (net/http): services/fetcher/internal/decide → net/http/httptrace"},
		},
		{
			name:  "the row types, not the adapter",
			g:     importGraph{rows: {"time"}, scope: {rows}},
			roots: []string{scope, rows},
		},
		{
			name:  "the ClickHouse adapter",
			g:     importGraph{scope: {chstore}, chstore: {"github.com/ClickHouse/clickhouse-go/v2", rows}},
			roots: []string{scope},
			want:  []string{"libs/scope imports libs/chstore (the ClickHouse adapter): libs/scope → libs/chstore"},
		},
		{
			name:  "a subpackage of the broker client",
			g:     importGraph{urlcanon: {"github.com/segmentio/kafka-go/protocol"}},
			roots: []string{urlcanon},
			want:  []string{"libs/urlcanon imports github.com/segmentio/kafka-go/protocol (the Kafka client): libs/urlcanon → github.com/segmentio/kafka-go/protocol"},
		},
		{
			name:  "a name that only starts like a forbidden one",
			g:     importGraph{urlcanon: {"github.com/segmentio/kafka-gopher", module + "libs/chstorex", "net/httpx"}},
			roots: []string{urlcanon},
		},
		{
			name: "the audited edges",
			g: importGraph{extract: {goquery}, goquery: {"net/http", "golang.org/x/net/html"},
				scope: {suffix}, suffix: {"net/http/cookiejar"}},
			roots: []string{extract, scope},
		},
		{
			name:  "an audited library's other imports are still checked",
			g:     importGraph{extract: {goquery}, goquery: {"net/http", module + "libs/kafkaio"}},
			roots: []string{extract},
			want:  []string{"services/parser/internal/extract imports libs/kafkaio (the Kafka adapter): services/parser/internal/extract → github.com/PuerkitoBio/goquery → libs/kafkaio"},
		},
		{
			name:  "net/http through an unaudited library",
			g:     importGraph{scope: {"example.com/lib"}, "example.com/lib": {"net/http"}},
			roots: []string{scope},
			want:  []string{"libs/scope imports net/http (net/http): libs/scope → example.com/lib → net/http"},
		},
		{
			name: "the shortest chain, every forbidden package, every root",
			g: importGraph{decide: {"a", robots}, "a": {"b"}, "b": {httpfetch}, robots: {httpfetch, chstore},
				urlcanon: {"net/http"}},
			roots: []string{decide, urlcanon},
			want: []string{
				"services/fetcher/internal/decide imports libs/chstore (the ClickHouse adapter): services/fetcher/internal/decide → services/fetcher/internal/robots → libs/chstore",
				"services/fetcher/internal/decide imports services/fetcher/internal/httpfetch (our HTTP client): services/fetcher/internal/decide → services/fetcher/internal/robots → services/fetcher/internal/httpfetch",
				"libs/urlcanon imports net/http (net/http): libs/urlcanon → net/http",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, v := range violations(tt.g, tt.roots) {
				got = append(got, v.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
