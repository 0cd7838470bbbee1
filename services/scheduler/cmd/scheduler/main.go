// Command scheduler turns discovered URLs into fetch requests: it
// canonicalizes, deduplicates against the partition's seen set (persisted in
// ClickHouse), applies the depth limit and the per-crawl admission ceiling
// of the page budget (the fetchers charge the budget itself), and
// produces the admitted URLs to the fetch topic. See README.md.
package main

import (
	"context"
	"os"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/app"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
)

func main() {
	service.Main(app.Name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	cfg, err := config.Load(args, lookupEnv)
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
	sched, err := app.New(ctx, cfg, svc.Log(), svc.Metrics())
	if err != nil {
		return err
	}
	defer sched.Close()

	// Shutdown (libs/service): readiness false → both consumer groups, the
	// control-topic follower and the budget tracker stop → the ClickHouse
	// writers flush → the admin server stops.
	svc.AddCheck("clickhouse", sched.Ping)
	svc.AddCheck("kafka", sched.KafkaCheck)
	svc.Go(service.Consume, "consumer group", sched.Admit)
	svc.Go(service.Consume, "revisit group", sched.Revisit)
	svc.Go(service.Consume, "crawl spec follower", sched.FollowSpecs)
	svc.Go(service.Consume, "budget tracker", sched.RefreshBudgets)
	sched.Writers.Go(svc)
	svc.SetReady()
	svc.Log().Info("scheduler starting", telemetry.Topic(cfg.Kafka.Topics().Discovered),
		zap.Uint("max_depth", cfg.MaxDepth), zap.Int64("max_pages", cfg.MaxPages))
	return svc.Run(ctx)
}
