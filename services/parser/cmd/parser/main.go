// Command parser consumes fetched pages, publishes their outlinks to the
// discovered topic and stores their documents in ClickHouse.
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
	"github.com/trawl-crawler/trawl/services/parser/internal/config"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

const name = "parser"

func main() {
	service.Main(name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	cfg, err := config.Load(args, lookupEnv)
	if err != nil {
		return err
	}
	engines, err := serp.Load(cfg.Parser.SERPConfig)
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
	defer func() {
		if err := store.Close(); err != nil {
			log.Warn("close clickhouse", zap.Error(err))
		}
	}()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	topics := cfg.Kafka.Topics()
	writer := kafkaio.NewWriter(cfg.Kafka, log, sreg)
	defer func() {
		if err := writer.Close(); err != nil {
			log.Warn("close kafka writer", zap.Error(err))
		}
	}()
	// A document row carries the page's text (16 KB on average on the
	// bench web): an insert takes at most DocumentBatchRows of them and
	// twice that may wait, so that the parser's memory stays bounded when
	// ClickHouse is slower than the parse (its stores then block, its
	// batches stay unacked and the group stops reading).
	docOpts := cfg.ClickHouse.Batch()
	docOpts.MaxRows = min(max(docOpts.MaxRows, 1), pages.DocumentBatchRows)
	docOpts.MaxBuffered = 2 * docOpts.MaxRows
	docs := chstore.NewBatchWriter(store, chstore.Documents, docOpts, log, sreg)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, cfg.ClickHouse.Batch(), log, sreg)
	contentSeen := chstore.NewBatchWriter(store, chstore.ContentSeen, cfg.ClickHouse.Batch(), log, sreg)
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, cfg.ClickHouse.Batch(), log, sreg)
	bands := chstore.NewBatchWriter(store, chstore.SimhashBands, cfg.ClickHouse.Batch(), log, sreg)
	nearDups := chstore.NewBatchWriter(store, chstore.NearDuplicates, cfg.ClickHouse.Batch(), log, sreg)
	links := chstore.NewBatchWriter(store, chstore.Links, cfg.ClickHouse.Batch(), log, sreg)
	metrics, err := pages.NewMetrics(sreg)
	if err != nil {
		return err
	}
	specs := crawlcontrol.NewSpecs()
	proc := pages.NewProcessor(cfg.Parser, topics, pages.Sinks{
		Publisher: writer, Documents: docs, Meta: meta, ContentSeen: contentSeen, Dropped: dropped, Seen: store,
		Bands: bands, NearDups: nearDups, Near: store, Links: links,
	}, specs, engines, log, metrics, time.Now)
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:  cfg.Kafka.GroupFor(name),
		Topic:    topics.Fetched,
		MaxBatch: cfg.Parser.BatchSize,
		// A batch's documents wait in memory for their insert: two
		// batches per partition at most.
		MaxInFlight: 2 * cfg.Parser.BatchSize,
	}, proc.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	svc.AddCheck("clickhouse", store.Ping)
	svc.Go(service.Consume, "fetched pages consumer", func(ctx context.Context) error {
		svc.SetReady()
		return group.Run(ctx)
	})
	// Handlers finishing their batch still read the crawl specifications:
	// the control-topic follower stops with the writers.
	svc.Go(service.Flush, "crawl spec follower", func(ctx context.Context) error {
		return crawlcontrol.Follow(ctx, cfg.Kafka, specs, func(err error) { log.Warn("crawl spec skipped", zap.Error(err)) })
	})
	svc.Go(service.Flush, "documents writer", docs.Run)
	svc.Go(service.Flush, "document_meta writer", meta.Run)
	svc.Go(service.Flush, "content_seen writer", contentSeen.Run)
	svc.Go(service.Flush, "links_dropped writer", dropped.Run)
	svc.Go(service.Flush, "simhash_bands writer", bands.Run)
	svc.Go(service.Flush, "near_duplicates writer", nearDups.Run)
	svc.Go(service.Flush, "links writer", links.Run)
	log.Info("parser starting", telemetry.Topic(topics.Fetched), zap.String("group", cfg.Kafka.GroupFor(name)))
	return svc.Run(ctx)
}
