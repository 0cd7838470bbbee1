package consume

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
)

// Malformed is the drop reason of a record whose value does not decode as a
// DiscoveredURL.
const Malformed admit.Reason = "malformed"

// metrics is the scheduler's instrumentation. Names are relative to the
// registerer's prefix (crawler_scheduler_ in production).
type metrics struct {
	received  prometheus.Counter
	admitted  prometheus.Counter
	dropped   *prometheus.CounterVec // reason
	seenSize  prometheus.Gauge       // fingerprints held, over every owned partition
	seenLoad  prometheus.Histogram
	batchTime prometheus.Histogram
	deferred  prometheus.Counter // admitted URLs put in the frontier table by the host quota
	released  prometheus.Counter // frontier URLs released as fetch requests
	grants    prometheus.Counter // sites joined to a crawl's scope by a seed's redirect
	// reprioritized counts the reprioritize requests produced (known URLs
	// with new in-links).
	reprioritized prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "urls_received_total", Help: "Discovered URL records read.",
		}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "urls_admitted_total", Help: "URLs admitted and produced as fetch requests.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "urls_dropped_total", Help: "Discovered URLs not admitted, by reason (wrong_partition: re-published under the right key).",
		}, []string{"reason"}),
		seenSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "seen_set_size", Help: "URL fingerprints held in memory, over every owned partition.",
		}),
		seenLoad: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "seen_load_seconds", Help: "Time to load a partition's seen set from ClickHouse on assignment.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms .. ~22min
		}),
		batchTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "batch_duration_seconds", Help: "Time to decide, produce and persist one batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12), // 1ms .. ~60s
		}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "urls_deferred_total", Help: "Admitted URLs over their host's quota, stored in the frontier table.",
		}),
		released: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "urls_released_total", Help: "Frontier URLs released as fetch requests by the partition pumps.",
		}),
		grants: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scope_grants_total", Help: "Sites joined to a crawl's scope because a seed redirected to them (scope grants written to the control topic).",
		}),
		reprioritized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "reprioritized_total", Help: "Reprioritize requests produced to the fetch topic: known URLs whose in-links raised their priority.",
		}),
	}
	for _, r := range admit.Reasons {
		m.dropped.WithLabelValues(string(r))
	}
	m.dropped.WithLabelValues(string(Malformed))
	var errs []error
	for _, c := range []prometheus.Collector{m.received, m.admitted, m.dropped, m.seenSize, m.seenLoad, m.batchTime, m.deferred, m.released, m.grants, m.reprioritized} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register scheduler metrics: %w", err)
	}
	return m, nil
}
