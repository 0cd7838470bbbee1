// Command proxypool checks the operator's proxies and proxies harvested from
// configured sources, keeps the pool at its target size, applies the
// fetchers' feedback, and publishes the live ones to the compacted proxies
// topic, where the fetchers follow them.
package main

import (
	"context"
	"os"

	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/app"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/config"
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
	pool, err := app.New(ctx, cfg, svc.Log(), svc.Metrics())
	if err != nil {
		return err
	}
	defer pool.Close()

	// Shutdown (libs/service): readiness false → the API server and the
	// pool (the state follower and, while leading, the check loop and the
	// feedback group) stop → the admin server stops. The pool is ready
	// once the topics exist; every instance serves its view, one leads.
	svc.Go(service.Consume, "api", pool.ServeAPI)
	svc.Go(service.Consume, "pool", func(ctx context.Context) error { return pool.Keep(ctx, svc.SetReady) })
	return svc.Run(ctx)
}
