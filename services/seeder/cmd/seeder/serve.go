package main

import (
	"context"
	"net"

	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/seeder/internal/app"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
)

// serve runs the crawl-jobs API until ctx is done. ready, when not nil,
// receives the API's listening address.
func serve(ctx context.Context, args []string, lookupEnv func(string) (string, bool), ready func(net.Addr)) error {
	cfg, err := config.LoadServe(args, lookupEnv)
	if err != nil {
		return err
	}
	svc, err := service.New(app.Name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	// The admin server answers (alive, not ready) while the API waits for
	// ClickHouse at its start.
	if err := svc.ServeAdmin(ctx); err != nil {
		return err
	}
	api, err := app.NewServer(ctx, cfg, svc.Log(), svc.Metrics())
	if err != nil {
		return err
	}
	defer api.Close()

	// Shutdown (libs/service): readiness false → the API server and the
	// control-topic follower stop → the admin server stops.
	svc.AddCheck("clickhouse", api.Ping)
	svc.Go(service.Consume, "control follower", api.FollowControl)
	svc.Go(service.Consume, "api", api.Serve)
	// Until the control topic is read the API answers 503 and the service
	// is not ready; then deleted crawls' rows are swept.
	svc.Go(service.Consume, "control catch-up", func(ctx context.Context) error {
		if api.WaitCaughtUp(ctx) != nil || ctx.Err() != nil {
			return nil
		}
		svc.SetReady()
		if ready != nil {
			ready(api.Addr())
		}
		return api.SweepDeleted(ctx)
	})
	return svc.Run(ctx)
}
