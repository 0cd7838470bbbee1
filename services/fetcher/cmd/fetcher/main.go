// Command fetcher consumes fetch requests, fetches them politely and
// publishes the fetched pages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/app"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
)

func main() {
	service.Main(app.Name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
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
	svc, err := service.New(app.Name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	// The admin server answers (alive, not ready) while the service waits
	// for ClickHouse at its start.
	if err := svc.ServeAdmin(ctx); err != nil {
		return err
	}
	fetcher, err := app.New(ctx, cfg, svc.Log(), svc.Metrics())
	if err != nil {
		return err
	}
	defer fetcher.Close()

	// Shutdown (libs/service): readiness false → the group stops consuming
	// (handlers finish or hand back in-flight work, offsets committed) →
	// the recorder writes the outcomes still queued → the fetch log and
	// robots.txt rows are flushed → the admin server stops.
	svc.AddCheck("clickhouse", fetcher.Ping)
	svc.AddCheck("kafka", fetcher.KafkaCheck)
	svc.Go(service.Consume, "crawl spec follower", fetcher.FollowSpecs)
	svc.Go(service.Consume, "page budget counter", fetcher.CountBudgets)
	if fetcher.DeletesArchives() {
		svc.Go(service.Consume, "deleted crawls' warc files remover", fetcher.DeleteArchives)
	}
	if fetcher.HoldsBack() {
		svc.Go(service.Consume, "backpressure monitor", fetcher.HoldBack)
	}
	if fetcher.UsesProxies() {
		svc.Go(service.Consume, "proxies follower", fetcher.FollowProxies)
	}
	svc.Go(service.Consume, "consumer group", func(ctx context.Context) error {
		// No request is fetched before the crawl states published so far
		// are known (bounded wait: a broken control topic does not stop
		// the crawl).
		if !fetcher.WaitSpecs(ctx) {
			return nil
		}
		svc.SetReady()
		svc.Log().Info("fetcher started", zap.String("instance", cfg.InstanceID), zap.Int("workers", cfg.Workers))
		return fetcher.Fetch(ctx)
	})
	svc.Go(service.Drain, "recorder", fetcher.Record)
	if archive := fetcher.Archive(); archive != nil {
		svc.Go(service.Drain, "warc writer", archive)
	}
	for _, w := range fetcher.Writers() {
		svc.Go(service.Flush, w.Name, w.Run)
	}
	return svc.Run(ctx)
}
