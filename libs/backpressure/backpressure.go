// Package backpressure holds the fetcher back while a stage after it
// falls behind. A crawl is done when its last document is stored and its
// last link known, not when its last page is fetched: a fetcher that runs
// ahead of the parser and ClickHouse fills the fetched-pages topic
// (0.6-1.4 M records waited in a crawl of 1.1 M pages), a pipeline that
// runs ahead of the scheduler fills the discovered topic (10 M records in
// a crawl of 1.5 M pages of six huge sites), and the end of the crawl
// becomes a long catch-up in which almost nothing is fetched. The fetcher
// watches both (--max-downstream-lag, --max-scheduler-lag), with one
// Monitor each over one Hold: new requests wait while either is behind.
// Only the fetcher holds back, the source of all the work: a parser that
// paused for the scheduler would let the pages it has not stored age, and
// what waits for the scheduler is at most what the parser stores of the
// pages fetched before the pause.
//
// A Monitor reads, every Interval, the records produced to the next
// stage's topic and those the next stage committed (the parser commits a
// batch once its documents are inserted, the scheduler once its URLs are
// decided), and from the times it saw the produced count pass the
// committed one, how long ago the oldest record not yet taken was
// produced: the lag, in seconds, whatever the rate. At High it pauses its
// Gate (the fetcher's new requests, through a Hold; the requests running
// finish). It resumes once what waits would be taken within
// Low/2 at the rate the next stage took records over the last rateWindow
// (a stage commits in bursts, and the gap to Low keeps a noisy rate from
// pausing and resuming by turns): not once the lag is under Low, which a
// pause cannot bring about (nothing new is produced, so the youngest
// record waiting ages with the pause, and the pipeline would run dry
// before each resume). Nor does it pause when what waits would be taken
// within Low, however old the oldest record: right after a resume that
// would pause again at once. Every instance of a stage measures the same
// lag and holds back alike. A lag that cannot be measured (the broker
// unreachable) pauses nothing: the crawl does not stop for its monitor.
package backpressure

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Gate is what the Monitor holds back (a Hold over the fetcher's worker
// pool). Pause and Resume come in pairs.
type Gate interface {
	Pause()
	Resume()
}

// Options configures a Monitor.
type Options struct {
	// Next names the stage watched: the next label of the metrics and
	// the field of the logs ("parser", "scheduler"; required).
	Next string
	// High is the lag at which the Gate pauses.
	High time.Duration
	// Low: an old record pauses nothing while what waits would be taken
	// within Low, and the Gate resumes once it would be within Low/2
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

// rateWindow is how far back the next stage's rate is measured.
const rateWindow = 5 * time.Second

type metrics struct {
	lag      prometheus.Gauge
	records  prometheus.Gauge
	pauses   prometheus.Counter
	failures prometheus.Counter
}

// New returns a Monitor of gate by the lag of the next stage on offsets.
// reg receives its metrics, labelled next=o.Next (the Monitors of one
// process share the vectors).
func New(o Options, offsets Offsets, gate Gate, log *zap.Logger, reg prometheus.Registerer) (*Monitor, error) {
	if o.High <= 0 {
		return nil, errors.New("backpressure: Options.High must be positive")
	}
	if o.Next == "" {
		return nil, errors.New("backpressure: Options.Next must name the stage watched")
	}
	if o.Low <= 0 || o.Low >= o.High {
		o.Low = o.High / 2
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	gauge := func(name, help string) prometheus.Gauge {
		return telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"next"})).WithLabelValues(o.Next)
	}
	counter := func(name, help string) prometheus.Counter {
		return telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"next"})).WithLabelValues(o.Next)
	}
	m := metrics{
		lag:      gauge("downstream_lag_seconds", "How long ago the oldest record the next stage (parser, scheduler) has not taken yet was produced, as last measured."),
		records:  gauge("downstream_lag_records", "Records the next stage (parser, scheduler) has not taken yet (its consumer group's lag), as last measured."),
		pauses:   counter("backpressure_pauses_total", "Times new requests were paused because the next stage's lag reached its limit (--max-downstream-lag, --max-scheduler-lag)."),
		failures: counter("downstream_lag_failures_total", "Measures of the next stage's lag that failed (nothing is paused for it while it is unknown)."),
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
			m.log.Warn("cannot measure the next stage's lag; fetching goes on unthrottled by it", zap.String("next", m.opts.Next), zap.Error(err))
		}
		m.failed = true
		m.resume(now, "lag unknown", 0)
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
		m.m.pauses.Inc()
		m.log.Info("next stage behind: new requests paused", zap.String("next", m.opts.Next),
			zap.Duration("lag", lag), zap.Int64("records", waiting), zap.Duration("resume_within", m.opts.Low/2))
	case !m.paused.IsZero() && known && drain < m.opts.Low/2:
		m.resume(now, "catching up", lag)
	}
}

// drain records taken as seen at now and returns how long the next stage
// needs to take the waiting records at its rate over the last rateWindow;
// not known while it took nothing in that window, unless nothing waits.
func (m *Monitor) drain(now time.Time, taken, waiting int64) (time.Duration, bool) {
	m.taken = append(m.taken, sample{at: now, produced: taken})
	for len(m.taken) > 2 && !m.taken[1].at.After(now.Add(-rateWindow)) {
		m.taken = m.taken[1:]
	}
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
	m.log.Info("new requests resumed", zap.String("next", m.opts.Next), zap.String("why", why), zap.Duration("lag", lag), zap.Duration("paused_for", d))
}
