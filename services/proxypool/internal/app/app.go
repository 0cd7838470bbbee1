// Package app assembles the proxy pool from its configuration: New reads
// the proxies file and builds the pool, the check loop with its harvester
// (refresh, check, harvest), the publisher of the proxies topic, the store
// of the pool's state (the proxy-state topic), the feedback consumer's
// metrics and the API server (bound at once). keeper.go is the pool's main
// component: once the topics exist it follows the proxy-state topic and
// competes for the lead; the leader loads the state, tombstones what was
// left live, and runs the check loop and the feedback group (leader.go).
// cmd/proxypool adds the parts to the service's run group; Close releases
// the Kafka writer once the group is done.
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/config"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/state"
)

// Name is the service's name: its metric prefix and its log field.
const Name = "proxypool"

// Proxypool is the proxy pool's parts, built from its configuration.
type Proxypool struct {
	log    *zap.Logger
	writer *kafkaio.Writer
	keeper *keeper
	api    *api.Server
}

// New builds the proxy pool, nothing running yet but the API server
// bound. The topics are created by Keep, not here: the API answers while
// the broker is still out of reach. On error, what was opened is closed
// again.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, reg prometheus.Registerer) (_ *Proxypool, err error) {
	pp := &Proxypool{log: log}
	defer func() {
		if err != nil {
			pp.Close()
		}
	}()
	entries, err := loadProxies(cfg.ProxiesFile)
	if err != nil {
		return nil, err
	}
	cfg.Pool.CheckTimeout = cfg.Check.Timeout
	p := pool.NewWithConfig(cfg.Pool)
	p.Set(entries)
	metrics, err := refresh.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	pp.writer = kafkaio.NewWriter(cfg.Kafka, log, reg)
	instance := newInstanceID()
	log = log.With(zap.String("instance", instance))
	pp.log = log
	k := &keeper{
		kafka: cfg.Kafka, publisher: publish.New(pp.writer, cfg.Kafka.Topics().Proxies), log: log,
		pool: p, entries: entries, reg: reg,
		proxies: len(entries), sources: len(cfg.Sources), interval: cfg.Refresh.Interval,
		topicsReady: make(chan struct{}),
	}
	if len(entries) > 0 || len(cfg.Sources) > 0 {
		checker := check.New(cfg.Check, check.ProxyClient, time.Now)
		stateMetrics, err := state.NewMetrics(reg)
		if err != nil {
			return nil, err
		}
		if k.leaderMetrics, err = newLeaderMetrics(reg); err != nil {
			return nil, err
		}
		k.store = state.New(cfg.Kafka, pp.writer, p, instance, stateMetrics, log)
		k.loop = refresh.New(cfg.Refresh, p, checker, k.publisher, log, metrics).WithState(k.store)
		if len(cfg.Sources) > 0 {
			k.loop.WithHarvester(harvest.New(cfg.Sources, cfg.SourceTO))
		}
		// An idle pool (no proxies, no sources) has no proxy to score:
		// it does not consume the feedback topic's partitions for
		// nothing. The leader runs the group (leader.go).
		if cfg.Feedback {
			if k.feedbackMetrics, err = feedback.NewMetrics(reg); err != nil {
				return nil, err
			}
		}
	}
	pp.keeper = k
	pp.api = api.New(cfg.APIAddr, p, log)
	if _, err := pp.api.Listen(ctx); err != nil {
		return nil, err
	}
	return pp, nil
}

// Keep keeps the pool until ctx is done: it creates the topics, calls
// ready, then follows the proxy-state topic and competes for the lead; as
// leader it loads the state, tombstones the proxies left live on the
// proxies topic that it does not track, then checks, harvests, applies
// feedback and publishes (idle without proxies or sources: it only
// tombstones what was left live).
func (pp *Proxypool) Keep(ctx context.Context, ready func()) error { return pp.keeper.run(ctx, ready) }

// ConsumesFeedback reports whether the pool applies the fetchers' feedback
// (--feedback, and a pool that is not idle) while it leads.
func (pp *Proxypool) ConsumesFeedback() bool { return pp.keeper.feedbackMetrics != nil }

// Leading reports whether this instance leads the pool now (checks,
// harvests, applies feedback, publishes).
func (pp *Proxypool) Leading() bool { return pp.keeper.leading.Load() }

// ServeAPI serves GET /proxies until ctx is done.
func (pp *Proxypool) ServeAPI(ctx context.Context) error { return pp.api.Run(ctx) }

// newInstanceID names this process on the proxy-state topic: unique per
// start, so that a restarted instance reloads what its previous run wrote.
func newInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Close closes the Kafka writer, logging a failure; call it once every
// part has stopped.
func (pp *Proxypool) Close() {
	if pp.writer != nil {
		if err := pp.writer.Close(); err != nil {
			pp.log.Warn("close kafka writer", zap.Error(err))
		}
	}
}
