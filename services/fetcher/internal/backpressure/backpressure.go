// Package backpressure holds the fetcher back while the stage after it
// falls behind. A crawl is done when its last document is stored, not when
// its last page is fetched: a fetcher that runs ahead of the parser and
// ClickHouse fills the fetched-pages topic (0.6-1.4 M records waited in a
// crawl of 1.1 M pages), and the end of the crawl becomes a long catch-up
// in which almost nothing is fetched.
//
// A Monitor reads, every Interval, the records produced to the
// fetched-pages topic and those the parser committed (it commits a batch
// once its documents are inserted), and from the times it saw the produced
// count pass the committed one, how long ago the oldest page not yet
// stored was fetched: the lag, in seconds, whatever the rate. At High it
// pauses the start of new requests (the turns running finish). It resumes
// them once what waits would be stored within Low/2 at the rate the parser
// stored pages over the last rateWindow (a parser commits in bursts, and
// the gap to Low keeps a noisy rate from pausing and resuming by turns):
// not once the lag is under Low,
// which a pause cannot bring about (nothing new is fetched, so the
// youngest page waiting ages with the pause, and the pipeline would run
// dry before each resume). Nor does it pause when what waits would be
// stored within Low, however old the oldest page: right after a resume
// that would pause again at once. Every fetcher measures the same lag and holds back
// alike. A lag that cannot be measured (the broker unreachable) pauses
// nothing: the crawl does not stop for its monitor.
//
// A pause is the last resort. From Low on, the Monitor slows new requests
// down instead (Gate.Limit): to the rate the parser stores pages at, times
// this fetcher's share of the pages fetched, times a gain that is 1.5 at
// Low, 1 halfway to High and 0.5 at High. The lag settles halfway,
// fetching and parsing go on side by side, and the parser does not run dry
// (on a shared core a pause of 13-15 s, three times in a crawl of 165 000
// pages of six sites, left the pipeline idle for a quarter of the crawl).
// Under Low the cap is lifted.
package backpressure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Gate is what the Monitor holds back: the fetcher's worker pool.
type Gate interface {
	Pause()
	Resume()
	// Limit caps the rate new requests start at, per second; 0 lifts it.
	Limit(perSecond float64)
	// Started is the number of requests started so far.
	Started() int64
}

// Options configures a Monitor.
type Options struct {
	// High is the lag at which new requests pause.
	High time.Duration
	// Low: an old page pauses nothing while what waits would be stored
	// within Low, and requests resume once it would be within Low/2
	// (default High/2).
	Low time.Duration
	// Interval is the time between two measures (default 1s).
	Interval time.Duration
}

// DefaultInterval is the default of Options.Interval.
const DefaultInterval = time.Second

// Offsets reads the records produced to the next stage's topic and those
// it has taken (committed), summed over the partitions.
type Offsets func(context.Context) (produced, taken int64, err error)

// Monitor pauses and resumes a Gate by the lag it measures.
type Monitor struct {
	opts    Options
	offsets Offsets
	seen    []sample // produced counts with when first seen, oldest first
	taken   []sample // taken counts of the last rateWindow, oldest first
	made    []sample // produced counts of the last rateWindow, oldest first
	starts  []sample // the gate's requests started, of the last rateWindow
	limit   float64  // the cap set on the gate, requests per second; 0: none
	gate    Gate
	log     *zap.Logger
	m       metrics
	paused  time.Time // when the current pause began; zero: not paused
	failed  bool      // the last measure failed (logged once per streak)
}

// sample is a count and when the Monitor saw it.
type sample struct {
	at       time.Time
	produced int64 // or taken
}

// rateWindow is how far back the parser's rate is measured.
const rateWindow = 5 * time.Second

// minLimit is the lowest cap set: a fetcher slowed down never stops
// (that is the pause's work, at High).
const minLimit = 1.0

type metrics struct {
	lag      prometheus.Gauge
	records  prometheus.Gauge
	active   prometheus.Gauge
	limit    prometheus.Gauge
	pauses   prometheus.Counter
	seconds  prometheus.Counter
	failures prometheus.Counter
}

// New returns a Monitor of gate by the lag of the next stage on offsets.
// reg receives its metrics.
func New(o Options, offsets Offsets, gate Gate, log *zap.Logger, reg prometheus.Registerer) (*Monitor, error) {
	if o.High <= 0 {
		return nil, errors.New("backpressure: Options.High must be positive")
	}
	if o.Low <= 0 || o.Low >= o.High {
		o.Low = o.High / 2
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	m := metrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "downstream_lag_seconds",
			Help: "How long ago the oldest fetched page the parser has not stored yet was fetched, as last measured.",
		}),
		records: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "downstream_lag_records",
			Help: "Fetched pages the parser has not stored yet (its consumer group's lag on the fetched-pages topic), as last measured.",
		}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "backpressure_paused",
			Help: "1 while new requests are paused because the parser is behind (--max-downstream-lag), else 0.",
		}),
		limit: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "backpressure_rate_limit",
			Help: "The cap on new requests per second set while the parser is somewhat behind (its lag between half of --max-downstream-lag and all of it), 0 when none.",
		}),
		pauses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "backpressure_pauses_total",
			Help: "Times new requests were paused because the parser's lag reached --max-downstream-lag.",
		}),
		seconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "backpressure_paused_seconds_total",
			Help: "Seconds new requests spent paused because the parser was behind.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "downstream_lag_failures_total",
			Help: "Measures of the parser's lag that failed (nothing is paused while it is unknown).",
		}),
	}
	for _, c := range []prometheus.Collector{m.lag, m.records, m.active, m.limit, m.pauses, m.seconds, m.failures} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register backpressure metrics: %w", err)
		}
	}
	return &Monitor{opts: o, offsets: offsets, gate: gate, log: log, m: m}, nil
}

// Run measures the lag every Interval until ctx is done, then resumes the
// gate if it paused it.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.opts.Interval)
	defer t.Stop()
	for {
		m.Step(ctx, time.Now())
		select {
		case <-ctx.Done():
			m.resume(time.Now(), "stopping", 0)
			m.setLimit(0, "stopping", 0)
			return nil
		case <-t.C:
		}
	}
}

// Step measures the lag once at now and pauses or resumes the gate.
func (m *Monitor) Step(ctx context.Context, now time.Time) {
	produced, taken, err := m.offsets(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		m.m.failures.Inc()
		if !m.failed {
			m.log.Warn("cannot measure the parser's lag; fetching goes on unthrottled", zap.Error(err))
		}
		m.failed = true
		m.resume(now, "lag unknown", 0)
		m.setLimit(0, "lag unknown", 0)
		return
	}
	m.failed = false
	lag := m.lag(now, produced, taken)
	waiting := max(produced-taken, 0)
	drain, known := m.drain(now, taken, waiting)
	m.m.lag.Set(lag.Seconds())
	m.m.records.Set(float64(waiting))
	switch {
	case m.paused.IsZero() && lag >= m.opts.High && !(known && drain < m.opts.Low):
		m.paused = now
		m.gate.Pause()
		m.m.active.Set(1)
		m.m.pauses.Inc()
		m.log.Info("parser behind: new requests paused", zap.Duration("lag", lag), zap.Int64("pages", waiting),
			zap.Duration("resume_within", m.opts.Low/2))
	case !m.paused.IsZero() && known && drain < m.opts.Low/2:
		m.resume(now, "parser catching up", lag)
	}
	m.slow(now, lag, produced, taken)
}

// slow sets the gate's cap for a lag at now (see the package comment):
// none under Low, else the parser's rate of the last rateWindow times this
// fetcher's share of what was produced in it times the gain. A rate not
// measured yet (the first measures, or nothing stored in the window)
// leaves the cap as it was.
func (m *Monitor) slow(now time.Time, lag time.Duration, produced, taken int64) {
	stored, storedOK := rate(m.taken, now)
	m.made = window(m.made, now, produced)
	made, madeOK := rate(m.made, now)
	m.starts = window(m.starts, now, m.gate.Started())
	own, ownOK := rate(m.starts, now)
	switch {
	case lag < m.opts.Low:
		m.setLimit(0, "parser caught up", lag)
	case !m.paused.IsZero() || !storedOK || stored <= 0:
	default:
		share := 1.0 // this fetcher's part of the pages fetched
		if madeOK && ownOK && made > 0 && own > 0 {
			share = min(own/made, 1)
		}
		gain := 1.5 - float64(lag-m.opts.Low)/float64(m.opts.High-m.opts.Low)
		gain = min(max(gain, 0.5), 1.5)
		m.setLimit(max(stored*share*gain, minLimit), "parser behind", lag)
	}
}

// window appends the count n seen at now to samples and drops those
// older than rateWindow (keeping two at least).
func window(samples []sample, now time.Time, n int64) []sample {
	samples = append(samples, sample{at: now, produced: n})
	for len(samples) > 2 && !samples[1].at.After(now.Add(-rateWindow)) {
		samples = samples[1:]
	}
	return samples
}

// rate is the growth per second of the counts in samples up to now, and
// whether it is measured (two samples at different times).
func rate(samples []sample, now time.Time) (float64, bool) {
	if len(samples) < 2 {
		return 0, false
	}
	first, last := samples[0], samples[len(samples)-1]
	span := now.Sub(first.at).Seconds()
	if span <= 0 {
		return 0, false
	}
	return float64(last.produced-first.produced) / span, true
}

// setLimit caps the gate at perSecond (0: no cap), logging when a cap
// begins or ends.
func (m *Monitor) setLimit(perSecond float64, why string, lag time.Duration) {
	if perSecond == m.limit {
		return
	}
	switch {
	case m.limit == 0:
		m.log.Info("parser behind: new requests slowed down", zap.Duration("lag", lag), zap.Float64("per_second", perSecond))
	case perSecond == 0:
		m.log.Info("new requests at full speed again", zap.String("why", why), zap.Duration("lag", lag))
	}
	m.limit = perSecond
	m.gate.Limit(perSecond)
	m.m.limit.Set(perSecond)
}

// drain records taken as seen at now and returns how long the parser
// needs to store waiting pages at its rate over the last rateWindow; not
// known while it stored nothing in that window, unless nothing waits.
func (m *Monitor) drain(now time.Time, taken, waiting int64) (time.Duration, bool) {
	m.taken = window(m.taken, now, taken)
	if waiting == 0 {
		return 0, true
	}
	first := m.taken[0]
	stored, span := taken-first.produced, now.Sub(first.at)
	if stored <= 0 || span <= 0 {
		return 0, false
	}
	return time.Duration(float64(waiting) / float64(stored) * float64(span)), true
}

// lag records produced as seen at now and returns how long ago the
// Monitor first saw a produced count that reaches taken: the age of the
// oldest record not yet taken (0 when every record was taken). Records
// produced before the first measure count as produced then. The samples
// older than that one are dropped: taken never goes back.
func (m *Monitor) lag(now time.Time, produced, taken int64) time.Duration {
	if n := len(m.seen); n == 0 || m.seen[n-1].produced < produced {
		m.seen = append(m.seen, sample{at: now, produced: produced})
	}
	if taken >= produced {
		m.seen = m.seen[:0]
		return 0
	}
	i := 0
	for i < len(m.seen)-1 && m.seen[i].produced <= taken {
		i++
	}
	m.seen = append(m.seen[:0], m.seen[i:]...)
	return now.Sub(m.seen[0].at)
}

// resume ends a pause, if one is on.
func (m *Monitor) resume(now time.Time, why string, lag time.Duration) {
	if m.paused.IsZero() {
		return
	}
	d := now.Sub(m.paused)
	m.paused = time.Time{}
	m.gate.Resume()
	m.m.active.Set(0)
	m.m.seconds.Add(d.Seconds())
	m.log.Info("new requests resumed", zap.String("why", why), zap.Duration("lag", lag), zap.Duration("paused_for", d))
}
