package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/httpserve"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
)

// apiShutdownTimeout bounds how long in-flight API requests may finish.
const apiShutdownTimeout = 10 * time.Second

// serve runs the crawl-jobs API until ctx is done. ready, when not nil,
// receives the API's listening address.
func serve(ctx context.Context, args []string, lookupEnv func(string) (string, bool), ready func(net.Addr)) error {
	cfg, err := config.LoadServe(args, lookupEnv)
	if err != nil {
		return err
	}
	svc, err := service.New(name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	log := svc.Log()

	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
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
	w := kafkaio.NewWriter(cfg.Kafka, log, svc.Metrics())
	defer func() {
		if err := w.Close(); err != nil {
			log.Warn("close kafka writer", zap.Error(err))
		}
	}()
	ctl := control.New(cfg.Kafka, w, log)
	apiMetrics, err := api.NewMetrics(svc.Metrics())
	if err != nil {
		return err
	}
	discoverer := sitemaps.New(cfg.Sitemap)
	defer discoverer.Close()
	srv := api.New(api.Config{Token: cfg.APIToken, MaxBodyBytes: cfg.MaxBodyBytes, Sitemaps: discoverer}, ctl, stats.New(store), apiMetrics, log)
	httpSrv := httpserve.New("api", cfg.APIAddr, &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}, apiShutdownTimeout, log)
	addr, err := httpSrv.Listen(ctx)
	if err != nil {
		return err
	}

	svc.AddCheck("clickhouse", store.Ping)
	svc.Go(service.Consume, "control follower", ctl.Run)
	svc.Go(service.Consume, "api", httpSrv.Run)
	// Until the control topic is read the API answers 503 and the service
	// is not ready.
	svc.Go(service.Consume, "control catch-up", func(ctx context.Context) error {
		if ctl.WaitCaughtUp(ctx) == nil && ctx.Err() == nil {
			svc.SetReady()
			if ready != nil {
				ready(addr)
			}
		}
		<-ctx.Done()
		return nil
	})
	return svc.Run(ctx)
}
