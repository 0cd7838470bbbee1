package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/seeder/internal/app"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
)

// setState runs `seeder state --crawl-id ID --state running|paused|cancelled`:
// the crawl's next specification revision with that state, on the control
// topic, and the state in force printed on stdout.
func setState(ctx context.Context, args []string, stdout io.Writer, lookupEnv func(string) (string, bool)) error {
	var cfg config.State
	fs := flag.NewFlagSet(app.Name+" state", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	svc, err := service.New(app.Name, cfg.Telemetry)
	if err != nil {
		return err
	}
	defer svc.Close()
	spec, err := app.SetState(ctx, cfg, svc.Log(), time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "crawl %s: %s (revision %d)\n", spec.GetCrawlId(), cfg.State, spec.GetRevision())
	return nil
}
