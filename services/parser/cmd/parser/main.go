// Command parser consumes fetched pages, publishes their outlinks to the
// discovered topic and stores their documents in ClickHouse.
package main

import (
	"context"
	"os"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/parser/internal/app"
	"github.com/trawl-crawler/trawl/services/parser/internal/config"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

func main() {
	service.Main(app.Name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.LookupEnv) })
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
	parser, err := app.New(ctx, cfg, engines, svc.Log(), svc.Metrics())
	if err != nil {
		return err
	}
	defer parser.Close()

	// Shutdown (libs/service): readiness false → the group stops consuming
	// (handlers finish their batch, offsets committed) → the control-topic
	// follower and the ClickHouse writers stop → the admin server stops.
	svc.AddCheck("clickhouse", parser.Ping)
	svc.AddCheck("kafka", parser.KafkaCheck)
	svc.Go(service.Consume, "fetched pages consumer", func(ctx context.Context) error {
		svc.SetReady()
		return parser.Parse(ctx)
	})
	// Handlers finishing their batch still read the crawl specifications:
	// the control-topic follower stops with the writers.
	svc.Go(service.Flush, "crawl spec follower", parser.FollowSpecs)
	for _, w := range parser.Writers() {
		svc.Go(service.Flush, w.Name, w.Run)
	}
	svc.Log().Info("parser starting", telemetry.Topic(cfg.Kafka.Topics().Fetched), zap.String("group", cfg.Kafka.GroupFor(app.Name)))
	return svc.Run(ctx)
}
