// Command scheduler turns discovered URLs into fetch requests: it
// canonicalizes, deduplicates against the partition's seen set (persisted in
// ClickHouse), applies the depth limit and the per-crawl page budget, and
// produces the admitted URLs to the fetch topic. See README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/consume"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit/schedule"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
)

const name = "scheduler"

func main() {
	service.Main(name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	cfg, err := config.Load(args, lookupEnv)
	if err != nil {
		return err
	}
	svc, err := service.New(name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	log, sreg := svc.Log(), svc.Metrics()

	store, err := chstore.Open(ctx, cfg.ClickHouse, log)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer func() { _ = store.Close() }()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	producer := kafkaio.NewWriter(cfg.Kafka, log, sreg)
	defer func() { _ = producer.Close() }()
	writers := sinks.New(store, cfg.ClickHouse.Batch(), log, sreg)
	specs := crawlcontrol.NewSpecs()
	tracker := budget.NewTracker(cfg.MaxPages).WithLimits(config.SpecPages(specs))
	topics := cfg.Kafka.Topics()
	sched, err := consume.New(consume.Config{
		Topics: topics, Partitions: cfg.Kafka.Partitions,
		MaxDepth: uint32(cfg.MaxDepth), DepthLimit: config.SpecDepth(specs), Scope: config.SpecScope(specs, log),
		State: specs.State, Paused: config.PausedCrawls(specs), Changed: specs.Changed,
		SyncSpec:  func(ctx context.Context, crawlID string) error { _, err := specs.GetSynced(ctx, crawlID); return err },
		HostLimit: config.SpecHostPages(specs), HostCounts: sinks.CountHosts(store),
		HostQuota: cfg.HostQuota, QuotaWindow: cfg.QuotaWindow,
	}, producer, writers.Seen, writers.Events, sinks.Frontier{W: writers.Frontier, Store: store}, store, tracker, time.Now, log, sreg)
	if err != nil {
		return err
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID: cfg.Kafka.GroupFor(name), Topic: topics.Discovered, MaxBatch: cfg.MaxBatch, MaxInFlight: cfg.MaxInFlight,
	}, sched.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}
	revisiter, err := schedule.New(schedule.Config{
		Topics: topics, Partitions: cfg.Kafka.Partitions, Policy: config.SpecRevisit(specs), State: specs.State, Tick: cfg.RevisitTick,
	}, producer, sinks.Revisits{Revisits: writers.Revisits, Changes: writers.Changes, Store: store}, time.Now, log, sreg)
	if err != nil {
		return err
	}
	revisitGroup, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID: cfg.Kafka.GroupFor(name + "-revisit"), Topic: topics.Fetched, MaxBatch: cfg.MaxBatch, MaxInFlight: cfg.MaxInFlight,
	}, revisiter.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create revisit consumer group: %w", err)
	}

	svc.AddCheck("clickhouse", store.Ping)
	svc.Go(service.Consume, "consumer group", group.Run)
	svc.Go(service.Consume, "revisit group", func(ctx context.Context) error {
		if err := schedule.WaitRevisiting(ctx, specs); err != nil {
			return nil // stopping before any crawl revisited
		}
		log.Info("a followed crawl revisits its pages, revisit consumer starting")
		return revisitGroup.Run(ctx)
	})
	svc.Go(service.Consume, "crawl spec follower", func(ctx context.Context) error {
		return crawlcontrol.Follow(ctx, cfg.Kafka, specs, func(err error) { log.Warn("crawl spec skipped", zap.Error(err)) })
	})
	svc.Go(service.Consume, "budget tracker", func(ctx context.Context) error {
		return tracker.Run(ctx, cfg.BudgetRefresh, sinks.CountSeen(store), func(err error) {
			log.Warn("budget refresh failed, keeping previous counts", zap.Error(err))
		})
	})
	writers.Go(svc)
	svc.SetReady()
	log.Info("scheduler starting", telemetry.Topic(topics.Discovered),
		zap.Uint("max_depth", cfg.MaxDepth), zap.Int64("max_pages", cfg.MaxPages))
	return svc.Run(ctx)
}
