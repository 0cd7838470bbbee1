package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/stale"
)

// staleReadTimeout bounds reading the proxies topic at start.
const staleReadTimeout = 30 * time.Second

// keeper is the pool's main component: once the topics exist it is ready,
// tombstones what a previous run left live on the proxies topic, then runs
// the check loop (nil: idle) until its context is done.
type keeper struct {
	kafka     kafkaio.Config
	loop      *refresh.Loop
	publisher *publish.Publisher
	proxies   int // from the proxies file
	sources   int
	interval  time.Duration
	log       *zap.Logger
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
	topic := k.kafka.Topics().Proxies
	// A previous run may have left proxies live on the topic that are no
	// longer in the file or the pool: read them to tombstone after the
	// first round (idle: at once). Best effort: a failure to read only
	// logs.
	sctx, scancel := context.WithTimeout(ctx, staleReadTimeout)
	ids, err := stale.LiveIDs(sctx, k.kafka, topic)
	scancel()
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		k.log.Warn("previous proxies unknown", zap.Error(err))
	case k.loop != nil:
		k.loop.WithStale(ids)
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
	if k.loop == nil {
		k.log.Info("no proxies configured, running idle")
		<-ctx.Done()
		return nil
	}
	k.log.Info("checking proxies",
		zap.Int("proxies", k.proxies), zap.Int("sources", k.sources), zap.Duration("interval", k.interval),
		telemetry.Topic(topic))
	return k.loop.Run(ctx)
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
