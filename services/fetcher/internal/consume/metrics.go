package consume

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// metrics of the fetch path (the requests' own are httpfetch's and
// robots.Cache's). Labels are bounded: status class, error kind, outcome.
type metrics struct {
	fetches         *prometheus.CounterVec // status_class, error_kind
	politenessWait  prometheus.Histogram
	hostsActive     prometheus.GaugeFunc // read from the live partitions at scrape time
	queueDepth      prometheus.GaugeFunc
	crawlDelayCaped prometheus.Counter
	poison          prometheus.Counter
	abandoned       prometheus.Counter
	writesFlushed   prometheus.Counter

	retries          *prometheus.CounterVec // outcome: queued, exhausted
	deferred         prometheus.Counter
	evicted          prometheus.Counter
	leaseLapses      prometheus.Counter
	budgetYields     prometheus.Counter
	pausedHeld       prometheus.Counter
	redirects        *prometheus.CounterVec // outcome: redirect* constants
	repeatsSkipped   *prometheus.CounterVec // by: skip* constants
	reprioritized    *prometheus.CounterVec // result: politeness.RaiseResult
	recordedErrors   prometheus.Counter
	unchanged        prometheus.Counter
	robotsVerdicts   *prometheus.CounterVec // verdict: allowed (counted in fetches), disallowed, unavailable
	hostStatesLoaded prometheus.Counter
	robotsRestored   prometheus.Counter
	sitemaps         prometheus.Counter
	proxyOutcomes    *prometheus.CounterVec // outcome (never the proxy: ids are unbounded)
	serverWaits      prometheus.Counter
	// serpRobotsOverridden: result pages fetched although robots.txt
	// disallows them (serp.go).
	serpRobotsOverridden prometheus.Counter
}

// newMetrics registers the fetch path's metrics with reg; queued and
// hosts report the requests queued and the hosts busy in every live
// partition (read at scrape time).
func newMetrics(reg prometheus.Registerer, queued, hosts func() float64) (*metrics, error) {
	var all []prometheus.Collector
	add := func(c prometheus.Collector) prometheus.Collector { all = append(all, c); return c }
	counter := func(name, help string) prometheus.Counter {
		return add(prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})).(prometheus.Counter)
	}
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return add(prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)).(*prometheus.CounterVec)
	}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return add(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)).(prometheus.GaugeFunc)
	}
	m := &metrics{
		fetches: vec("fetches_total", "Fetch attempts by HTTP status class and error kind (robots refusals included).", "status_class", "error_kind"),
		politenessWait: add(prometheus.NewHistogram(prometheus.HistogramOpts{Name: "politeness_wait_seconds",
			Help:    "Time from a request's arrival in its host queue to its dispatch.",
			Buckets: []float64{.01, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300}})).(prometheus.Histogram),
		hostsActive:          gauge("hosts_active", "Hosts with queued requests or a request in flight.", hosts),
		queueDepth:           gauge("queue_depth", "Requests waiting in host queues.", queued),
		crawlDelayCaped:      counter("crawl_delay_capped_total", "robots.txt Crawl-delay values above --max-crawl-delay (capped)."),
		poison:               counter("undecodable_requests_total", "Fetch request records that could not be decoded (logged, acked, skipped)."),
		abandoned:            counter("abandoned_total", "Requests abandoned unacked at partition close (redelivered to the next owner)."),
		writesFlushed:        counter("writes_flushed_total", "Times the requests of a partition waiting for their fetch-log insert reached the flush mark (half of --max-inflight-per-partition) and the insert was asked to go before --clickhouse-flush-interval."),
		retries:              vec("retries_total", "Transient failures by outcome: queued (next attempt produced) or exhausted (attempts used up).", "outcome"),
		pausedHeld:           counter("paused_held_total", "Requests of paused crawls deferred durably instead of fetched."),
		deferred:             counter("deferred_total", "Requests produced again to the fetch topic because their host queue was full or their not-before was far."),
		budgetYields:         counter("budget_yields_total", "Turns that made no request because the crawl's last pages of budget were kept for shallower requests of the partition."),
		leaseLapses:          counter("group_lease_lapses_total", "Times a partition stopped its requests because the consumer group's coordinator had not answered for nearly a session timeout (another fetcher may own its hosts)."),
		evicted:              counter("evicted_total", "Requests taken out of a full host queue for a shallower one of the host and deferred (also counted in deferred_total): the queue keeps the shallowest."),
		repeatsSkipped:       vec("repeats_skipped_total", "Fetch requests acked without a request because their attempt was done already, by how it was known: recorded (a previous owner's fetch-log row), published (a previous owner's FetchedPage without its fetch-log row, which is written then), held (held or finished by this fetcher).", "by"),
		reprioritized:        vec("reprioritized_total", "Reprioritize records (a known URL's priority raised by the scheduler), by result: raised (its queued request moved up), not_queued (no such request queued in this partition: in flight, fetched, deferred or elsewhere), not_higher (queued with that priority or a higher one already).", "result"),
		recordedErrors:       counter("recorded_query_errors_total", "Failed fetch-log look-ups of redelivered requests (retried with back-off; the partition waits)."),
		redirects:            vec("redirects_total", "Redirect answers, by outcome: published (target sent to the scheduler), loop (to itself), too_many (chain at --max-redirects), invalid (target not crawlable).", "outcome"),
		unchanged:            counter("unchanged_total", "Conditional GETs answered 304 Not Modified."),
		proxyOutcomes:        vec("proxy_outcomes_total", "Fetches through a proxy by outcome (success, timeout, blocked, error), reported to the pool.", "outcome"),
		sitemaps:             counter("robots_sitemaps_total", "Sitemap URLs from robots.txt published as discovered URLs (source SITEMAP)."),
		hostStatesLoaded:     counter("host_states_loaded_total", "Host politeness states loaded from the host-state topic at partition assignment."),
		robotsRestored:       counter("robots_restored_total", "Stored robots.txt entries (unexpired) put into the robots cache at partition assignment instead of being fetched again."),
		serverWaits:          counter("server_waits_total", "Requests put back in their host queue because another host on the same server (--server-delay) was being fetched or within its gap."),
		robotsVerdicts:       vec("robots_refusals_total", "URLs not requested because of robots.txt, by verdict (disallowed, unavailable).", "verdict"),
		serpRobotsOverridden: counter("serp_robots_overridden_total", "Search result pages generated from a crawl's keywords fetched although robots.txt disallows them, because the crawl's spec sets politeness.serp_ignore_robots."),
	}
	for _, c := range all {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, o := range []string{"queued", "exhausted"} {
		m.retries.WithLabelValues(o)
	}
	for _, b := range []string{skipRecorded, skipPublished, skipHeld} {
		m.repeatsSkipped.WithLabelValues(b)
	}
	for _, r := range []politeness.RaiseResult{politeness.Raised, politeness.NotQueued, politeness.NotHigher} {
		m.reprioritized.WithLabelValues(r.String())
	}
	for _, o := range []outcome.Redirect{outcome.RedirectPublished, outcome.RedirectLoop, outcome.RedirectTooMany, outcome.RedirectInvalid} {
		m.redirects.WithLabelValues(string(o))
	}
	for _, v := range []string{"disallowed", "unavailable"} {
		m.robotsVerdicts.WithLabelValues(v)
	}
	for _, k := range failure.Kinds {
		m.fetches.WithLabelValues("none", string(k))
	}
	return m, nil
}

// How a repeated fetch request was recognized (label of repeats_skipped_total).
const (
	skipRecorded  = "recorded"
	skipPublished = "published"
	skipHeld      = "held"
)
