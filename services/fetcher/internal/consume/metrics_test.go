package consume

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// TestMetricsRegistered: the metrics register once per registry, their
// bounded label values are there from the start (a dashboard's rate()
// sees a series before its first event), and a second registration fails.
func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	queued := func() float64 { return 7 }
	m, err := newMetrics(reg, queued, func() float64 { return 2 })
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.fetches); n != len(failure.Kinds) {
		t.Errorf("fetches_total has %d series at start, want one per error kind (%d)", n, len(failure.Kinds))
	}
	if n := testutil.CollectAndCount(m.repeatsSkipped); n != 3 {
		t.Errorf("repeats_skipped_total has %d series at start, want 3 (recorded, published, held)", n)
	}
	m.fetches.WithLabelValues(httpfetch.StatusClass(503), string(failure.None)).Inc()
	if got := testutil.ToFloat64(m.fetches.WithLabelValues("5xx", string(failure.None))); got != 1 {
		t.Errorf("fetches_total{5xx} = %v, want 1", got)
	}
	if q, h := testutil.ToFloat64(m.queueDepth), testutil.ToFloat64(m.hostsActive); q != 7 || h != 2 {
		t.Errorf("queue_depth %v, hosts_active %v: want what the partitions report (7, 2)", q, h)
	}
	if _, err := newMetrics(reg, queued, queued); err == nil {
		t.Error("a second registration with the same registry succeeded")
	}
}
