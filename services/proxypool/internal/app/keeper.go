package app

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/stale"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/state"
)

// staleReadTimeout bounds reading the proxies topic at start.
const staleReadTimeout = 30 * time.Second

// keeper is the pool's main component: once the topics exist it is ready;
// idle, it tombstones what a previous run left live on the proxies topic;
// otherwise it follows the proxy-state topic and competes for the lead
// (leader.go) until its context is done.
type keeper struct {
	kafka     kafkaio.Config
	pool      *pool.Pool
	entries   []proxylist.Entry // the operator's list (proxies file)
	loop      *refresh.Loop     // nil: idle
	store     *state.Store      // nil: idle
	publisher *publish.Publisher
	proxies   int // from the proxies file
	sources   int
	interval  time.Duration
	log       *zap.Logger
	reg       prometheus.Registerer
	// feedbackMetrics is nil when the leader consumes no feedback.
	feedbackMetrics *feedback.Metrics
	leaderMetrics   *leaderMetrics
	leading         atomic.Bool
	// topicsReady is closed once the topics exist.
	topicsReady chan struct{}
}

// run keeps the pool until ctx is done; ready is called once the topics
// exist.
func (k *keeper) run(ctx context.Context, ready func()) error {
	if err := kafkaio.EnsureTopics(ctx, k.kafka); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("ensure topics: %w", err)
	}
	ready()
	close(k.topicsReady)
	if k.loop != nil {
		return k.follow(ctx)
	}
	topic := k.kafka.Topics().Proxies
	// A previous run may have left proxies live on the topic: idle, every
	// one is stale. Best effort: a failure to read only logs.
	ids, err := k.staleIDs(ctx)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		k.log.Warn("previous proxies unknown", zap.Error(err))
	case len(ids) > 0:
		// Idle: every proxy left live is stale.
		tombs := make([]pool.Change, len(ids))
		for i, id := range ids {
			tombs[i] = pool.Change{ID: id, Delete: true}
		}
		if err := k.publisher.Publish(ctx, tombs); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		k.log.Info("stale proxies tombstoned", zap.Int("tombstoned", len(tombs)))
	}
	k.log.Info("no proxies configured, running idle", telemetry.Topic(topic))
	<-ctx.Done()
	return nil
}

// staleIDs reads the ids left live on the proxies topic (bounded by
// staleReadTimeout).
func (k *keeper) staleIDs(ctx context.Context) ([]string, error) {
	sctx, cancel := context.WithTimeout(ctx, staleReadTimeout)
	defer cancel()
	return stale.LiveIDs(sctx, k.kafka, k.kafka.Topics().Proxies)
}

// loadProxies reads the proxy list; an invalid line is a configuration error
// (the error names its line number, never its content).
func loadProxies(path string) ([]proxylist.Entry, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open proxies file: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	entries, err := proxylist.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parse proxies file %s: %w", path, err)
	}
	return entries, nil
}
