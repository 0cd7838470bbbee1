package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// needTool returns the path of a Prometheus tool, skipping the test when
// it is missing outside CI (.ci/run installs Debian's prometheus package;
// in CI a missing tool fails the test).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s not found: .ci/run installs the prometheus package", name)
		}
		t.Skipf("%s not found: apt-get install prometheus", name)
	}
	return p
}

func monitoringDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deployments", "monitoring")
}

// TestPromtoolRules runs promtool's own checks: the rule file is valid and
// its unit tests (rules_test.yml) pass.
func TestPromtoolRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	dir := filepath.Join(monitoringDir(t), "prometheus")
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// query is one PromQL expression of a dashboard panel or a rule.
type query struct {
	where string // "crawl.json: Pages fetched/s by status class (A)"
	expr  string
	alert bool // an alert condition: valid and its metrics exist, data not required
}

// grafanaVars replaces the Grafana variables the dashboards use by what
// Grafana would substitute for a scrape interval of 1s.
var grafanaVars = strings.NewReplacer("$__rate_interval", "30s", "${__rate_interval}", "30s")

// dashboardQueries returns every target expression of every panel of the
// provisioned dashboards (rows' nested panels included).
func dashboardQueries(t testing.TB) []query {
	t.Helper()
	dir := filepath.Join(monitoringDir(t), "grafana", "dashboards")
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dir, err)
	}
	type panel struct {
		Title   string  `json:"title"`
		Panels  []panel `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var qs []query
	var walk func(file string, ps []panel)
	walk = func(file string, ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				qs = append(qs, query{where: fmt.Sprintf("%s: %s (%s)", file, p.Title, tg.RefID), expr: grafanaVars.Replace(tg.Expr)})
			}
			walk(file, p.Panels)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			UID    string  `json:"uid"`
			Panels []panel `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.UID == "" {
			t.Errorf("%s: no uid (provisioned dashboards need a stable one)", f)
		}
		walk(filepath.Base(f), d.Panels)
	}
	return qs
}

// ruleQueries returns the expression of every recording and alert rule.
func ruleQueries(t testing.TB) (qs []query, recorded []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(monitoringDir(t), "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Record string `json:"record"`
				Alert  string `json:"alert"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("rules.yml: %v", err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
				qs = append(qs, query{where: "rules.yml: record " + r.Record, expr: r.Expr})
			} else {
				qs = append(qs, query{where: "rules.yml: alert " + r.Alert, expr: r.Expr, alert: true})
			}
		}
	}
	return qs, recorded
}

// metricRefs returns the metric names and the __name__ regexps an
// expression selects.
func metricRefs(expr string) (names []string, patterns []*labels.Matcher, err error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, nil, err
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type != labels.MatchEqual {
				patterns = append(patterns, m)
			}
		}
		return nil
	})
	return names, patterns, nil
}

// promAPI is a client of Prometheus's HTTP API; its requests end with ctx.
type promAPI struct {
	ctx  context.Context //nolint:containedctx // a test's client: its requests end with the test
	base string
}

type apiResult struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (p promAPI) get(path string, q url.Values) (apiResult, error) {
	var r apiResult
	req, err := http.NewRequestWithContext(p.ctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return r, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return r, fmt.Errorf("decode %s: %w", path, err)
	}
	if r.Status != "success" {
		return r, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r, nil
}

// instant evaluates expr now and returns the number of series (or 1 for a
// scalar).
func (p promAPI) instant(expr string) (int, error) {
	r, err := p.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		return 0, err
	}
	if d.ResultType == "scalar" || d.ResultType == "string" {
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(d.Result, &series); err != nil {
		return 0, err
	}
	return len(series), nil
}

// names returns every metric name Prometheus holds.
func (p promAPI) names() (map[string]bool, error) {
	r, err := p.get("/api/v1/label/__name__/values", url.Values{})
	if err != nil {
		return nil, err
	}
	var vs []string
	if err := json.Unmarshal(r.Data, &vs); err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m, nil
}

// startPrometheus runs Prometheus scraping every admin address once a
// second under a job named after the service, with the rules loaded.
func startPrometheus(t *testing.T, prom string, admin map[string]string, logDir string) promAPI {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - %s\nscrape_configs:\n",
		filepath.Join(monitoringDir(t), "prometheus", "rules.yml"))
	jobs := make([]string, 0, len(admin))
	for job := range admin {
		jobs = append(jobs, job)
	}
	sort.Strings(jobs)
	for _, job := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, admin[job])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProc(t, logDir, "prometheus", prom, []string{
		"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr}, nil, nil)
	waitHTTP(t, p, "http://"+addr+"/-/ready", 60*time.Second)
	return promAPI{ctx: t.Context(), base: "http://" + addr}
}

// TestDashboardsAndRulesAgainstACrawl starts the five services the way
// the compose file does (CRAWLER_* variables, `seeder serve`, a crawl
// submitted with trawlctl) and a real Prometheus scraping every admin
// server with the rules loaded. While the crawl runs, every expression of
// every dashboard panel and every recording rule must return data, every
// alert expression must be a valid query, and every metric any of them
// names must be one a service exports (or a recording rule's).
func TestDashboardsAndRulesAgainstACrawl(t *testing.T) {
	prom := needTool(t, "prometheus")
	if testing.Short() {
		t.Skip("starts a crawl and Prometheus")
	}
	dash := dashboardQueries(t)
	rules, recorded := ruleQueries(t)
	all := append(dash, rules...)

	// Every expression parses before anything starts.
	for _, q := range all {
		if _, _, err := metricRefs(q.expr); err != nil {
			t.Errorf("%s: %v\n%s", q.where, err, q.expr)
		}
	}
	if t.Failed() {
		return
	}

	s := startStack(t)
	api := startPrometheus(t, prom, s.admin, s.logDir)
	s.submit(t, "opscheck")

	// Poll until every expression that must return data has, or the
	// deadline: a crawl of the small web lasts about a minute.
	pending := map[int]string{}
	for i, q := range all {
		if !q.alert {
			pending[i] = "no data"
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	poll := time.NewTicker(3 * time.Second)
	defer poll.Stop()
	for len(pending) > 0 && time.Now().Before(deadline) {
		<-poll.C
		s.checkAlive(t)
		for i := range pending {
			n, err := api.instant(all[i].expr)
			switch {
			case err != nil:
				pending[i] = err.Error()
			case n > 0:
				delete(pending, i)
			}
		}
	}
	for i, why := range pending {
		t.Errorf("%s: %s during the crawl:\n%s", all[i].where, why, all[i].expr)
	}

	// Alert expressions are valid queries.
	for _, q := range rules {
		if q.alert {
			if _, err := api.instant(q.expr); err != nil {
				t.Errorf("%s: %v", q.where, err)
			}
		}
	}

	// Every metric named is exported by a service (or recorded by a rule).
	exported, err := api.names()
	if err != nil {
		t.Fatal(err)
	}
	for name := range exported {
		if strings.HasPrefix(name, "scrape_") || strings.HasPrefix(name, "prometheus_") || strings.HasPrefix(name, "ALERTS") {
			delete(exported, name)
		}
	}
	for _, r := range recorded {
		exported[r] = true
	}
	for _, q := range all {
		names, patterns, _ := metricRefs(q.expr)
		for _, n := range names {
			if !exported[n] {
				t.Errorf("%s names %s, which no service exports", q.where, n)
			}
		}
		for _, m := range patterns {
			if m.Type != labels.MatchRegexp {
				continue
			}
			found := false
			for n := range exported {
				if m.Matches(n) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: no exported metric matches %s", q.where, m)
			}
		}
	}
	if t.Failed() {
		for name, p := range s.procs {
			t.Logf("%s log tail:\n%s", name, p.tail(10))
		}
	}
}
