// Package refresh runs the pool's check rounds: every interval it checks
// every proxy through a bounded number of concurrent checks, records the
// verdicts in the pool, publishes what changed, evicts dead harvested
// proxies, and harvests again (checking the newcomers at once) whenever
// fewer than the target size are usable.
package refresh

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// Checker checks one proxy; it blocks for at most its timeout and is safe
// for concurrent use (*check.Checker).
type Checker interface {
	Check(ctx context.Context, e proxylist.Entry) check.Result
}

// Publisher writes changes durably; it blocks until they are acknowledged
// (*publish.Publisher).
type Publisher interface {
	Publish(ctx context.Context, changes []pool.Change) error
}

// StateStore writes the pool's changed proxy states durably
// (*state.Store); it blocks until they are acknowledged.
type StateStore interface {
	Flush(ctx context.Context) error
}

// Harvester collects candidate proxies (*harvest.Harvester); a failing
// source is reported in its Result.
type Harvester interface {
	Harvest(ctx context.Context) []harvest.Result
}

// Config configures the rounds.
type Config struct {
	Interval    time.Duration // between the starts of two rounds
	Concurrency int           // checks in flight at once
	TargetSize  int           // harvest when fewer proxies are live or unchecked
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	if c.Interval <= 0 {
		return errors.New("check interval must be positive")
	}
	if c.Concurrency < 1 {
		return errors.New("check concurrency must be at least 1")
	}
	if c.TargetSize < 0 {
		return errors.New("target size must not be negative")
	}
	return nil
}

// Metrics are the pool's metrics.
type Metrics struct {
	proxies  *prometheus.GaugeVec   // proxies{state=live|dead}
	checks   *prometheus.CounterVec // checks_total{outcome}
	duration prometheus.Histogram   // check_duration_seconds
	harvests *prometheus.CounterVec // harvests_total{result=ok|error}
	added    prometheus.Counter     // harvested_proxies_total
	evicted  prometheus.Counter     // evicted_proxies_total
	stale    prometheus.Counter     // stale_proxies_tombstoned_total
}

// NewMetrics registers the metrics on reg (already prefixed
// crawler_proxypool_ by the caller).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		proxies: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "proxies",
			Help: "Checked proxies by state after the last round.",
		}, []string{"state"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checks_total",
			Help: "Proxy checks by outcome.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "check_duration_seconds",
			Help:    "Duration of one proxy check, failures included.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12), // 10ms .. ~20s
		}),
		harvests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "harvests_total",
			Help: "Source reads by result.",
		}, []string{"result"}),
		added: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "harvested_proxies_total",
			Help: "Harvested proxies added to the pool.",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "evicted_proxies_total",
			Help: "Harvested proxies evicted (dead or banned).",
		}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stale_proxies_tombstoned_total",
			Help: "Proxies a previous run left live on the topic, not in the pool, tombstoned.",
		}),
	}
	for _, c := range []prometheus.Collector{m.proxies, m.checks, m.duration, m.harvests, m.added, m.evicted, m.stale} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register proxypool metrics: %w", err)
		}
	}
	return m, nil
}

// Log fields of a proxy: its id and address, never its credentials.
func proxyID(id string) zap.Field { return zap.String("proxy_id", id) }
func proxyAddr(e proxylist.Entry) zap.Field {
	return zap.String("proxy_addr", e.String())
}

// Loop runs check rounds over a pool.
type Loop struct {
	cfg     Config
	pool    *pool.Pool
	checker Checker
	pub     Publisher
	log     *zap.Logger
	m       *Metrics
	harvest Harvester  // nil: no sources
	stale   []string   // ids live on the topic at start; nil once handled
	state   StateStore // nil: the state is kept in memory only
}

// New returns a loop; cfg must be valid.
func New(cfg Config, p *pool.Pool, c Checker, pub Publisher, log *zap.Logger, m *Metrics) *Loop {
	return &Loop{cfg: cfg, pool: p, checker: c, pub: pub, log: log, m: m}
}

// WithHarvester makes the loop harvest from h whenever fewer than
// TargetSize proxies are usable (and at the first round when the pool is
// empty). It returns l.
func (l *Loop) WithHarvester(h Harvester) *Loop {
	l.harvest = h
	return l
}

// WithState makes the loop write the pool's changed states to st after
// every round (verdicts, evictions, harvested proxies). It returns l.
func (l *Loop) WithState(st StateStore) *Loop {
	l.state = st
	return l
}

// WithStale gives the ids a previous run left live on the topic
// (stale.LiveIDs); after the first complete round, those the pool does not
// track are tombstoned. It returns l.
func (l *Loop) WithStale(ids []string) *Loop {
	l.stale = ids
	return l
}

// Run runs a round at once and then every interval, until ctx is done (nil)
// or publishing fails (the error).
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if err := l.Round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round checks every proxy of the pool once, publishes the changes and
// evicts dead harvested proxies; then, with a harvester, when fewer than
// TargetSize proxies are usable it harvests and checks the newcomers at
// once (one refill per round). When ctx ends mid-round, verdicts are
// discarded and nothing is published; the next start republishes
// everything anyway.
func (l *Loop) Round(ctx context.Context) error {
	if err := l.checkAndRefill(ctx); err != nil {
		return err
	}
	return l.tombstoneStale(ctx)
}

// tombstoneStale tombstones the ids of WithStale that the pool does not
// track (once: the harvested and file proxies it tracks are published by
// the rounds).
func (l *Loop) tombstoneStale(ctx context.Context) error {
	if len(l.stale) == 0 {
		l.stale = nil
		return nil
	}
	tracked := make(map[string]bool)
	for _, st := range l.pool.Snapshot() {
		tracked[st.Entry.ID()] = true
	}
	var tombs []pool.Change
	for _, id := range l.stale {
		if !tracked[id] {
			tombs = append(tombs, pool.Change{ID: id, Delete: true})
		}
	}
	if err := l.pub.Publish(ctx, tombs); err != nil {
		return err // Run stops; the next start reads the topic again
	}
	l.m.stale.Add(float64(len(tombs)))
	l.log.Info("stale proxies tombstoned", zap.Int("tombstoned", len(tombs)), zap.Int("live_at_start", len(l.stale)))
	l.stale = nil
	return nil
}

func (l *Loop) checkAndRefill(ctx context.Context) error {
	if l.harvest != nil && l.pool.Usable() < l.cfg.TargetSize && len(l.pool.Snapshot()) == 0 {
		l.refill(ctx) // the first round has nothing to check yet
	}
	if err := l.round(ctx); err != nil {
		return err
	}
	if l.harvest == nil || l.pool.Usable() >= l.cfg.TargetSize {
		return nil
	}
	if l.refill(ctx) == 0 {
		return nil
	}
	return l.round(ctx)
}

// refill harvests every source and adds the new proxies; it returns how
// many were added.
func (l *Loop) refill(ctx context.Context) int {
	added := 0
	for _, r := range l.harvest.Harvest(ctx) {
		if r.Err != nil {
			l.m.harvests.WithLabelValues("error").Inc()
			l.log.Warn("proxy source skipped", zap.String("source", redactSource(r.Source)), zap.Error(r.Err))
			continue
		}
		l.m.harvests.WithLabelValues("ok").Inc()
		n := l.pool.Add(r.Entries)
		added += n
		l.log.Info("proxies harvested", zap.String("source", redactSource(r.Source)),
			zap.Int("found", len(r.Entries)), zap.Int("added", n), zap.Int("skipped", r.Skipped))
	}
	l.m.added.Add(float64(added))
	return added
}

// redactSource keeps a source's scheme, host and path: its query may hold
// an API key.
func redactSource(src string) string {
	u, err := url.Parse(src)
	if err != nil || u.Host == "" {
		return src // a file path
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func (l *Loop) round(ctx context.Context) error {
	start := time.Now()
	statuses := l.pool.Snapshot()
	sem := make(chan struct{}, l.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, st := range statuses {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(e proxylist.Entry) {
			defer wg.Done()
			defer func() { <-sem }()
			l.checkOne(ctx, e)
		}(st.Entry)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}

	changes := l.pool.Changes()
	if err := l.pub.Publish(ctx, changes); err != nil {
		return err // kept pending: the next round retries them
	}
	l.pool.MarkPublished(changes)
	for _, c := range changes {
		if c.Delete {
			l.log.Info("proxy removed",
				proxyID(c.ID), proxyAddr(c.Status.Entry),
				zap.String("outcome", c.Status.Outcome), zap.String("reason", c.Status.Error))
		} else {
			l.log.Info("proxy live",
				proxyID(c.ID), proxyAddr(c.Status.Entry),
				zap.Duration("latency", c.Status.Latency), zap.Float64("score", c.Status.Score))
		}
	}
	removed, evicted := l.pool.Evict()
	if len(removed) > 0 {
		if err := l.pub.Publish(ctx, removed); err != nil {
			return err // evicted already: the next start republishes everything anyway
		}
		for _, c := range removed {
			l.log.Info("proxy removed", proxyID(c.ID), proxyAddr(c.Status.Entry), zap.String("outcome", c.Status.Outcome))
		}
	}
	if evicted > 0 {
		l.m.evicted.Add(float64(evicted))
		l.log.Info("proxies evicted", zap.Int("evicted", evicted))
	}
	live, dead := l.pool.Counts()
	l.m.proxies.WithLabelValues("live").Set(float64(live))
	l.m.proxies.WithLabelValues("dead").Set(float64(dead))
	l.log.Info("check round done",
		zap.Int("live", live), zap.Int("dead", dead), zap.Int("published", len(changes)),
		zap.Duration("took", time.Since(start)))
	if l.state != nil {
		if err := l.state.Flush(ctx); err != nil {
			return err // Run stops; the next leader reloads the topic
		}
	}
	return nil
}

func (l *Loop) checkOne(ctx context.Context, e proxylist.Entry) {
	r := l.checker.Check(ctx, e)
	if r.Outcome == check.Canceled {
		return
	}
	l.m.checks.WithLabelValues(r.Outcome).Inc()
	l.m.duration.Observe(r.Latency.Seconds())
	fields := []zap.Field{proxyID(e.ID()), proxyAddr(e), zap.String("outcome", r.Outcome), zap.Duration("latency", r.Latency)}
	if r.Err != nil {
		fields = append(fields, zap.Error(r.Err), telemetry.ErrorKind(r.Outcome))
	}
	l.log.Debug("proxy checked", fields...)
	l.pool.Record(r)
}
