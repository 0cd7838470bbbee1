package launcher

import (
	"context"
	"math"
	"net/http"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// TestScrape reads what the bench reads from a real admin server: the
// runtime's CPU classes and a service's consumed records by topic.
func TestScrape(t *testing.T) {
	reg := telemetry.NewRegistry()
	consumed := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_consumed_total", Help: "records"}, []string{"topic"})
	telemetry.Registerer(reg, "fetcher").MustRegister(consumed)
	consumed.WithLabelValues("crawler.urls.fetch").Add(120)
	consumed.WithLabelValues("crawler.control").Add(7)
	runtime.GC() // the runtime updates its CPU classes at a collection

	admin := telemetry.NewAdmin("127.0.0.1:0", reg, zap.NewNop())
	addr, err := admin.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- admin.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		http.DefaultClient.CloseIdleConnections()
	}()

	mfs, err := scrape(t.Context(), addr.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := sumOf(mfs, "crawler_fetcher_kafka_consumed_total", map[string]string{"topic": "urls.fetch"}); got != 120 {
		t.Errorf("fetch topic reads = %v, want 120", got)
	}
	if got := sumOf(mfs, "crawler_fetcher_kafka_consumed_total", nil); got != 127 {
		t.Errorf("all reads = %v, want 127", got)
	}
	r := goRuntimeOf(mfs)
	if r.CPU <= 0 || r.GC <= 0 || math.IsNaN(r.GCShare()) || r.GCShare() > 1 {
		t.Errorf("go runtime %+v (gc share %v): want cpu and gc counted, gc share in (0, 1]", r, r.GCShare())
	}
	if _, err := scrape(t.Context(), "127.0.0.1:1"); err == nil {
		t.Error("scrape of a closed port: no error")
	}
}
