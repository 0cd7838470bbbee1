package launcher

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
)

// GoRuntime is what a Go process's runtime counted of its own CPU by the
// end of the crawl (runtime/metrics' /cpu/classes, exported by every
// service's and the broker's /metrics, see telemetry.NewRegistry).
type GoRuntime struct {
	// CPU is the runtime's estimate of the CPU the process used:
	// /cpu/classes/total (GOMAXPROCS over its life) less /cpu/classes/idle.
	CPU float64 `json:"cpu_seconds"`
	GC  float64 `json:"gc_cpu_seconds"` // /cpu/classes/gc/total: the collector's part of it
}

// GCShare is the part of the process's CPU its garbage collector took.
func (r GoRuntime) GCShare() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return r.GC / r.CPU
}

// scrape reads the metric families an admin server at addr serves.
func scrape(ctx context.Context, addr string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", addr, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", addr, err)
	}
	return mfs, nil
}

// goRuntimeOf reads a process's GoRuntime from its scraped metrics.
func goRuntimeOf(mfs map[string]*dto.MetricFamily) GoRuntime {
	return GoRuntime{
		CPU: sumOf(mfs, "go_cpu_classes_total_cpu_seconds_total", nil) - sumOf(mfs, "go_cpu_classes_idle_cpu_seconds_total", nil),
		GC:  sumOf(mfs, "go_cpu_classes_gc_total_cpu_seconds_total", nil),
	}
}

// sumOf sums the counters or gauges of family name whose labels include
// every pair of match (a label value matched by suffix: topics carry the
// deployment's prefix).
func sumOf(mfs map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return 0
	}
	var sum float64
	for _, m := range mf.GetMetric() {
		if !labelsMatch(m, match) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			sum += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && strings.HasSuffix(lp.GetValue(), v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// scrapes is what the bench read from the processes' admin servers before
// stopping them.
type scrapes struct {
	runtime map[string]GoRuntime
	// fetchReads are the records the fetchers read from the fetch topic
	// (kafka_consumed_total): a request deferred back to the topic is
	// read again.
	fetchReads float64
	errs       []string
}

// scrapeProcesses reads the GoRuntime of every long-running service of p
// and of the broker (at brokerAdmin, when it runs as a process of its
// own), and the fetchers' reads of the fetch topic. A process that cannot
// be read is named in errs, not fatal: the bench prints what it has.
func scrapeProcesses(ctx context.Context, p *pipeline.Pipeline, brokerAdmin string) scrapes {
	out := scrapes{runtime: map[string]GoRuntime{}}
	targets := map[string]string{}
	for _, proc := range p.Processes() {
		targets[proc.Name()] = p.AdminAddr(proc)
	}
	if brokerAdmin != "" {
		targets["broker"] = brokerAdmin
	}
	for name, addr := range targets {
		mfs, err := scrape(ctx, addr)
		if err != nil {
			out.errs = append(out.errs, name+": "+err.Error())
			continue
		}
		out.runtime[name] = goRuntimeOf(mfs)
		if strings.HasPrefix(name, "fetcher") {
			out.fetchReads += sumOf(mfs, "crawler_fetcher_kafka_consumed_total", map[string]string{"topic": "urls.fetch"})
		}
	}
	slices.Sort(out.errs)
	return out
}
