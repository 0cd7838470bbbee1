// Command crawl runs a whole crawl on one machine: embedded broker, a
// ClickHouse server, the five services as separate processes (restarted
// with back-off when one dies), and optionally a generated demo site to
// crawl. The crawl's scope and limits come from flags and/or a --spec file
// holding the body of the crawl-jobs API's POST /v1/crawls.
//
//	go run ./deployments/local/cmd/crawl --demo
//	go run ./deployments/local/cmd/crawl --seeds-file seeds.txt --allow-private=false
//	go run ./deployments/local/cmd/crawl --demo --same-host-only --deny-pattern '/sec1/' --max-pages-per-host 20
//	go run ./deployments/local/cmd/crawl --spec job.json --max-depth 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/envflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "crawl:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var cfg launcher.Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, os.Args[1:], os.LookupEnv); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("validate flags: %w", err)
	}
	return launcher.Run(ctx, cfg, os.Stdin, os.Stdout)
}
