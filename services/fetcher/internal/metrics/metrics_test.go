package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// TestNew: the metrics register once per registry, their bounded label
// values are there from the start (a dashboard's rate() sees a series
// before its first event), and a second registration fails.
func TestNew(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.Fetches); n != len(failure.Kinds) {
		t.Errorf("fetches_total has %d series at start, want one per error kind (%d)", n, len(failure.Kinds))
	}
	if n := testutil.CollectAndCount(m.RepeatsSkipped); n != 3 {
		t.Errorf("repeats_skipped_total has %d series at start, want 3 (recorded, published, held)", n)
	}
	m.Fetches.WithLabelValues(StatusClass(503), string(failure.None)).Inc()
	if got := testutil.ToFloat64(m.Fetches.WithLabelValues("5xx", string(failure.None))); got != 1 {
		t.Errorf("fetches_total{5xx} = %v, want 1", got)
	}
	if _, err := New(reg); err == nil {
		t.Error("a second registration with the same registry succeeded")
	}
}

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{0: "none", 99: "none", 100: "1xx", 200: "2xx", 304: "3xx", 404: "4xx", 599: "5xx", 600: "none"} {
		if got := StatusClass(code); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", code, got, want)
		}
	}
}
