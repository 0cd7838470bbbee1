// Command proxypool checks the operator's proxies and proxies harvested from
// configured sources, keeps the pool at its target size, applies the
// fetchers' feedback, and publishes the live ones to the compacted proxies
// topic, where the fetchers follow them.
package main

import (
	"context"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/config"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
)

const name = "proxypool"

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
	log, preg := svc.Log(), svc.Metrics()

	entries, err := loadProxies(cfg.ProxiesFile)
	if err != nil {
		return err
	}
	cfg.Pool.CheckTimeout = cfg.Check.Timeout
	p := pool.NewWithConfig(cfg.Pool)
	p.Set(entries)
	metrics, err := refresh.NewMetrics(preg)
	if err != nil {
		return err
	}
	writer := kafkaio.NewWriter(cfg.Kafka, log, preg)
	defer func() {
		if err := writer.Close(); err != nil {
			log.Warn("close kafka writer", zap.Error(err))
		}
	}()
	k := &keeper{
		kafka: cfg.Kafka, publisher: publish.New(writer, cfg.Kafka.Topics().Proxies), log: log,
		proxies: len(entries), sources: len(cfg.Sources), interval: cfg.Refresh.Interval,
		topicsReady: make(chan struct{}), ready: svc.SetReady,
	}
	if len(entries) > 0 || len(cfg.Sources) > 0 {
		checker := check.New(cfg.Check, check.ProxyClient, time.Now)
		k.loop = refresh.New(cfg.Refresh, p, checker, k.publisher, log, metrics)
		if len(cfg.Sources) > 0 {
			k.loop.WithHarvester(harvest.New(cfg.Sources, cfg.SourceTO))
		}
	}
	// An idle pool (no proxies, no sources) has no proxy to score: it
	// does not consume the feedback topic's partitions for nothing.
	if cfg.Feedback && k.loop != nil {
		fbMetrics, err := feedback.NewMetrics(preg)
		if err != nil {
			return err
		}
		fbGroup, err := feedback.NewGroup(cfg.Kafka, p, fbMetrics, log, preg)
		if err != nil {
			return err
		}
		svc.Go(service.Consume, "feedback group", func(ctx context.Context) error {
			select {
			case <-k.topicsReady:
				return fbGroup.Run(ctx)
			case <-ctx.Done():
				return nil
			}
		})
	}
	apiSrv := api.New(cfg.APIAddr, p, log)
	if _, err := apiSrv.Listen(ctx); err != nil {
		return err
	}
	svc.Go(service.Consume, "api", apiSrv.Run)
	svc.Go(service.Consume, "pool", k.run)
	return svc.Run(ctx)
}
