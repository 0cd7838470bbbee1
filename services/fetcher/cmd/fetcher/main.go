// Command fetcher consumes fetch requests, fetches them politely and
// publishes the fetched pages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/consume"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/warc"
)

const name = "fetcher"

// controlWait bounds the wait for the control topic at start.
const controlWait = 10 * time.Second

func main() {
	service.Main(name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	host, _ := os.Hostname()
	cfg, err := config.Load(args, lookupEnv, fmt.Sprintf("%s-%d", host, os.Getpid()))
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	svc, err := service.New(name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	log, freg := svc.Log(), svc.Metrics()

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

	var pool *proxies.Pool
	if cfg.UseProxies {
		pool = proxies.NewPool()
		known := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "proxies_known",
			Help: "Proxies this fetcher knows from the proxies topic.",
		}, func() float64 { return float64(pool.Len()) })
		if err := freg.Register(known); err != nil {
			return fmt.Errorf("register proxies_known: %w", err)
		}
	}
	fo, err := fetchOptions(cfg, pool)
	if err != nil {
		return err
	}
	fetcher := httpfetch.New(fo)
	defer fetcher.Close()
	robotsCache := robots.NewCache(fetcher, time.Now, robots.Options{UserAgent: cfg.UserAgent})

	producer := kafkaio.NewWriter(cfg.Kafka, log, freg)
	defer func() {
		if err := producer.Close(); err != nil {
			log.Warn("close kafka writer failed, ignored", zap.Error(err))
		}
	}()
	fetchLog := chstore.NewBatchWriter(store, chstore.FetchLog, cfg.ClickHouse.Batch(), log, freg)
	robotsLog := chstore.NewBatchWriter(store, chstore.RobotsTxt, cfg.ClickHouse.Batch(), log, freg)
	rec, err := recorder.New(recorder.Options{}, producer, fetchLog, robotsLog, freg)
	if err != nil {
		return fmt.Errorf("create recorder: %w", err)
	}

	specs := crawlcontrol.NewSpecs()
	co := consumeOptions(cfg, specs, store, fetcher)
	archive, err := warc.Setup(cfg.Warc, svc, store, cfg.ClickHouse.Batch(), cfg.InstanceID, cfg.UserAgent, cfg.MaxBodyBytes, specs.All)
	if err != nil {
		return err
	}
	if archive != nil { // a nil *warc.Writer must not become a non-nil Archiver
		co.Archive = archive
	}
	consumer, err := consume.New(co, fetcher, robotsCache, producer, rec, log, freg)
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:      cfg.Kafka.GroupFor(name),
		Topic:        topics.Fetch,
		MaxInFlight:  cfg.MaxInflightPerPartition,
		CloseTimeout: cfg.DrainTimeout,
	}, consumer.Assign, log, freg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	// Shutdown (libs/service): readiness false → the group stops consuming
	// (handlers finish or hand back in-flight work, offsets committed) →
	// the recorder writes the outcomes still queued → the fetch log and
	// robots.txt rows are flushed → the admin server stops.
	svc.AddCheck("clickhouse", store.Ping)
	// No request is fetched before the crawl states published so far are
	// known (bounded wait: a broken control topic does not stop the crawl).
	caughtUp := make(chan struct{})
	svc.Go(service.Consume, "crawl spec follower", func(ctx context.Context) error {
		return crawlcontrol.FollowCaughtUp(ctx, cfg.Kafka, specs, func() { close(caughtUp) }, func(err error) {
			log.Warn("skipped undecodable crawl spec", zap.Error(err))
		})
	})
	if pool != nil {
		svc.Go(service.Consume, "proxies follower", func(ctx context.Context) error {
			return proxies.Follow(ctx, cfg.Kafka, topics.Proxies, pool, log)
		})
	}
	svc.Go(service.Consume, "consumer group", func(ctx context.Context) error {
		select {
		case <-caughtUp:
		case <-time.After(controlWait):
			log.Warn("started before the crawl states were read", zap.Duration("waited", controlWait))
		case <-ctx.Done():
			return nil
		}
		svc.SetReady()
		log.Info("fetcher started", zap.String("instance", cfg.InstanceID), zap.Int("workers", cfg.Workers))
		return group.Run(ctx)
	})
	svc.Go(service.Drain, "recorder", func(ctx context.Context) error { return rec.Run(ctx, cfg.DrainTimeout) })
	svc.Go(service.Flush, "fetch log writer", fetchLog.Run)
	svc.Go(service.Flush, "robots.txt writer", robotsLog.Run)
	return svc.Run(ctx)
}
