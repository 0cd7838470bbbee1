package service

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Bootstrap is what every service that stores does before it runs: it
// opens ClickHouse, waiting for it as long as it is down
// (chstore.OpenWaiting), exports the store's dependency gauge on reg,
// migrates the schema and creates the topics. On error nothing is left
// open.
func Bootstrap(ctx context.Context, ch chstore.Config, kc kafkaio.Config, log *zap.Logger, reg prometheus.Registerer) (_ *chstore.Store, err error) {
	store, err := chstore.OpenWaiting(ctx, ch, log)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	defer func() {
		if err != nil {
			_ = store.Close() // the bootstrap error is the one to report
		}
	}()
	if err := store.Register(reg); err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		return nil, fmt.Errorf("ensure topics: %w", err)
	}
	return store, nil
}
