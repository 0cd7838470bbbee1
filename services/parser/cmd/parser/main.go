// Command parser consumes fetched pages, publishes their outlinks to the
// discovered topic and stores their documents in ClickHouse.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

const service = "parser"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "parser: %v\n", err)
		os.Exit(1)
	}
}

// config is everything the parser is configured with.
type config struct {
	Telemetry  telemetry.Config
	Kafka      kafkaio.Config
	ClickHouse chstore.Config
	Parser     pages.Config
}

func (c config) validate() error {
	return errors.Join(c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate(), c.Parser.Validate())
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	var cfg config
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	cfg.Telemetry.RegisterFlags(fs)
	cfg.Kafka.RegisterFlags(fs)
	cfg.ClickHouse.RegisterFlags(fs)
	cfg.Parser.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}

	engines, err := serp.Load(cfg.Parser.SERPConfig)
	if err != nil {
		return err
	}
	log, err := telemetry.NewLogger(cfg.Telemetry, service)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	telemetry.ApplyMemoryLimit(cfg.Telemetry)
	stopProfiles, err := telemetry.StartProfiles(cfg.Telemetry, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	reg := telemetry.NewRegistry()
	sreg := telemetry.Registerer(reg, service)

	store, err := chstore.Open(ctx, cfg.ClickHouse, log)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	topics := cfg.Kafka.Topics()

	writer := kafkaio.NewWriter(cfg.Kafka, log, sreg)
	defer writer.Close()
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
	metrics, err := pages.NewMetrics(sreg)
	if err != nil {
		return err
	}
	specs := crawlcontrol.NewSpecs()
	proc := pages.NewProcessor(cfg.Parser, topics, pages.Sinks{
		Publisher: writer, Documents: docs, Meta: meta, ContentSeen: contentSeen, Dropped: dropped, Seen: store,
	}, specs, engines, log, metrics, time.Now)
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:  cfg.Kafka.GroupFor(service),
		Topic:    topics.Fetched,
		MaxBatch: cfg.Parser.BatchSize,
		// A batch's documents wait in memory for their insert: two
		// batches per partition at most.
		MaxInFlight: 2 * cfg.Parser.BatchSize,
	}, proc.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)
	admin.AddCheck("clickhouse", store.Ping)
	addr, err := admin.Listen()
	if err != nil {
		return fmt.Errorf("listen admin: %w", err)
	}
	log.Info("parser starting", zap.Stringer("admin_addr", addr), telemetry.Topic(topics.Fetched),
		zap.String("group", cfg.Kafka.GroupFor(service)))

	// Shutdown order: readiness false, stop consuming (handlers finish
	// their batch or abandon it unacked), then flush and stop the document
	// writers and the control-topic follower, then the admin server.
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWriter()
	defer stopAdmin()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return admin.Run(adminCtx) })
	g.Go(func() error { return docs.Run(writerCtx) })
	g.Go(func() error { return meta.Run(writerCtx) })
	g.Go(func() error { return contentSeen.Run(writerCtx) })
	g.Go(func() error { return dropped.Run(writerCtx) })
	g.Go(func() error {
		// Crawl specifications: scope rules per crawl, until shutdown.
		return crawlcontrol.Follow(writerCtx, cfg.Kafka, specs, func(err error) {
			log.Warn("crawl spec skipped", zap.Error(err))
		})
	})
	// Readiness goes false as soon as shutdown begins, not once the
	// partitions are drained.
	unready := context.AfterFunc(gctx, func() { admin.SetReady(false) })
	defer unready()
	g.Go(func() error {
		defer stopAdmin()
		defer stopWriter()
		admin.SetReady(true)
		err := group.Run(gctx)
		admin.SetReady(false)
		if err != nil {
			return fmt.Errorf("consume fetched pages: %w", err)
		}
		return nil
	})
	err = g.Wait()
	log.Info("parser stopped", zap.Error(err))
	return err
}
