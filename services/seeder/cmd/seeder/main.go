// Command seeder publishes the seed URLs of a crawl to the discovered topic
// and exits: seeder --crawl-id ID [--seed URL]... [--seeds-file FILE|-].
// With --sitemaps (or --sitemap URL) it also seeds from sitemaps; with
// --spec FILE (a POST /v1/crawls body) it first publishes the crawl's
// specification (scope, limits, politeness, revisit) to the control topic,
// as the API does, and seeds the file's seeds too.
// `seeder serve` runs the crawl-jobs HTTP API instead (serve.go);
// `seeder state --crawl-id ID --state running|paused|cancelled` changes a
// crawl's state (state.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/seeder/internal/app"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
)

func main() {
	service.Main(app.Name, func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdin, os.LookupEnv) })
}

func run(ctx context.Context, args []string, stdin io.Reader, lookupEnv func(string) (string, bool)) error {
	if len(args) > 0 && args[0] == "serve" {
		return serve(ctx, args[1:], lookupEnv, nil)
	}
	if len(args) > 0 && args[0] == "state" {
		return setState(ctx, args[1:], os.Stdout, lookupEnv)
	}
	var cfg config.Seed
	fs := flag.NewFlagSet(app.Name, flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse arguments: unexpected %q (seeds go in --seed or --seeds-file)", fs.Args())
	}
	job, err := app.LoadJob(&cfg, stdin, time.Now())
	if err != nil {
		return err
	}
	svc, err := service.New(app.Name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	// The admin server lives as long as the command, so that a run on a
	// large seed list can be watched; the run ends when seeding does.
	svc.Go(service.Consume, "seeding", func(ctx context.Context) error {
		_, err := app.Seed(ctx, cfg, job, stdin, svc.Log(), svc.Metrics())
		return err
	})
	svc.SetReady()
	return svc.Run(ctx)
}
