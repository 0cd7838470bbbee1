package consume

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// metrics of the fetch path (the requests' own are httpfetch's). Labels are bounded: status class, error kind,
// robots outcome.
type metrics struct {
	fetches         *prometheus.CounterVec // status_class, error_kind
	politenessWait  prometheus.Histogram
	hostsActive     prometheus.GaugeFunc // read from the live partitions at scrape time
	queueDepth      prometheus.GaugeFunc
	crawlDelayCaped prometheus.Counter
	poison          prometheus.Counter
	abandoned       prometheus.Counter

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
	m := &metrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fetches_total",
			Help: "Fetch attempts by HTTP status class and error kind (robots refusals included).",
		}, []string{"status_class", "error_kind"}),
		politenessWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "politeness_wait_seconds",
			Help:    "Time from a request's arrival in its host queue to its dispatch.",
			Buckets: []float64{.01, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300},
		}),
		hostsActive: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hosts_active",
			Help: "Hosts with queued requests or a request in flight.",
		}, hosts),
		queueDepth: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "queue_depth",
			Help: "Requests waiting in host queues.",
		}, queued),
		crawlDelayCaped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawl_delay_capped_total",
			Help: "robots.txt Crawl-delay values above --max-crawl-delay (capped).",
		}),
		poison: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "undecodable_requests_total",
			Help: "Fetch request records that could not be decoded (logged, acked, skipped).",
		}),
		abandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "abandoned_total",
			Help: "Requests abandoned unacked at partition close (redelivered to the next owner).",
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retries_total",
			Help: "Transient failures by outcome: queued (next attempt produced) or exhausted (attempts used up).",
		}, []string{"outcome"}),
		pausedHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paused_held_total",
			Help: "Requests of paused crawls deferred durably instead of fetched.",
		}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "deferred_total",
			Help: "Requests produced again to the fetch topic because their host queue was full or their not-before was far.",
		}),
		budgetYields: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "budget_yields_total",
			Help: "Turns that made no request because the crawl's last pages of budget were kept for shallower requests of the partition.",
		}),
		leaseLapses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "group_lease_lapses_total",
			Help: "Times a partition stopped its requests because the consumer group's coordinator had not answered for nearly a session timeout (another fetcher may own its hosts).",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evicted_total",
			Help: "Requests taken out of a full host queue for a shallower one of the host and deferred (also counted in deferred_total): the queue keeps the shallowest.",
		}),
		repeatsSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "repeats_skipped_total",
			Help: "Fetch requests acked without a request because their attempt was done already, by how it was known: recorded (a previous owner's fetch-log row), published (a previous owner's FetchedPage without its fetch-log row, which is written then), held (held or finished by this fetcher).",
		}, []string{"by"}),
		reprioritized: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "reprioritized_total",
			Help: "Reprioritize records (a known URL's priority raised by the scheduler), by result: raised (its queued request moved up), not_queued (no such request queued in this partition: in flight, fetched, deferred or elsewhere), not_higher (queued with that priority or a higher one already).",
		}, []string{"result"}),
		recordedErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "recorded_query_errors_total",
			Help: "Failed fetch-log look-ups of redelivered requests (retried with back-off; the partition waits).",
		}),
		redirects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redirects_total",
			Help: "Redirect answers, by outcome: published (target sent to the scheduler), loop (to itself), too_many (chain at --max-redirects), invalid (target not crawlable).",
		}, []string{"outcome"}),
		unchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "unchanged_total",
			Help: "Conditional GETs answered 304 Not Modified.",
		}),
		proxyOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "proxy_outcomes_total",
			Help: "Fetches through a proxy by outcome (success, timeout, blocked, error), reported to the pool.",
		}, []string{"outcome"}),
		sitemaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "robots_sitemaps_total",
			Help: "Sitemap URLs from robots.txt published as discovered URLs (source SITEMAP).",
		}),
		hostStatesLoaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "host_states_loaded_total",
			Help: "Host politeness states loaded from the host-state topic at partition assignment.",
		}),
		robotsRestored: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "robots_restored_total",
			Help: "Stored robots.txt entries (unexpired) put into the robots cache at partition assignment instead of being fetched again.",
		}),
		serverWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "server_waits_total",
			Help: "Requests put back in their host queue because another host on the same server (--server-delay) was being fetched or within its gap.",
		}),
		robotsVerdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "robots_refusals_total",
			Help: "URLs not requested because of robots.txt, by verdict (disallowed, unavailable).",
		}, []string{"verdict"}),
		serpRobotsOverridden: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "serp_robots_overridden_total",
			Help: "Search result pages generated from a crawl's keywords fetched although robots.txt disallows them, because the crawl's spec sets politeness.serp_ignore_robots.",
		}),
	}
	for _, c := range []prometheus.Collector{m.fetches, m.politenessWait,
		m.hostsActive, m.queueDepth, m.crawlDelayCaped, m.poison, m.abandoned,
		m.retries, m.deferred, m.evicted, m.leaseLapses, m.budgetYields, m.pausedHeld, m.redirects, m.repeatsSkipped, m.reprioritized, m.recordedErrors, m.unchanged, m.robotsVerdicts, m.hostStatesLoaded, m.robotsRestored, m.proxyOutcomes, m.sitemaps, m.serverWaits, m.serpRobotsOverridden} {
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
