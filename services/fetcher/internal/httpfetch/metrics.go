package httpfetch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// metrics of a Fetcher's requests (Options.Metrics): every Fetch, pages,
// robots.txt and sitemaps alike. Fetchers of one process share them.
type metrics struct {
	duration *prometheus.HistogramVec // status_class
	bytes    prometheus.Counter
	replays  prometheus.Counter
}

var statusClasses = []string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

// StatusClass is the status_class label of an HTTP status: "2xx" and so
// on, "none" without an answer.
func StatusClass(code int) string {
	if code < 100 || code > 599 {
		return "none"
	}
	return statusClasses[code/100]
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		duration: telemetry.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fetch_duration_seconds",
			Help:    "Duration of requests (pages, robots.txt, sitemaps) by status class.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"status_class"})),
		bytes: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "bytes_fetched_total",
			Help: "Body bytes received (after content decoding).",
		})),
		replays: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "replays_refused_total",
			Help: "Requests whose connection the site closed after the request was sent, which net/http would have sent again at once on another connection: failed instead (connect), retried on the host's turn.",
		})),
	}
	for _, c := range statusClasses {
		m.duration.WithLabelValues(c)
	}
	return m
}

// observe counts a finished request.
func (m *metrics) observe(r *Response) {
	m.duration.WithLabelValues(StatusClass(r.Status)).Observe(r.Duration.Seconds())
	m.bytes.Add(float64(r.BodyBytes))
	if r.ReplayRefused {
		m.replays.Inc()
	}
}
