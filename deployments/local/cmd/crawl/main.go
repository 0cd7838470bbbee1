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
//
// Its results, afterwards (the data directory's ClickHouse is started for
// the command and stopped again when it is not running):
//
//	go run ./deployments/local/cmd/crawl export --data-dir .crawl [--crawl-id ID] [--table documents|fetch_log|links|url_events] [--format jsonl|csv|parquet] [--out FILE]
//	go run ./deployments/local/cmd/crawl query --data-dir .crawl "SELECT status, count() FROM fetch_log FINAL GROUP BY status"
//
// Deleting a crawl of a data directory no crawl runs on (its rows, its
// WARC files and indexes; its id stays taken):
//
//	go run ./deployments/local/cmd/crawl delete --data-dir .crawl CRAWL_ID
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
	"github.com/trawl-crawler/trawl/deployments/local/internal/results"
	"github.com/trawl-crawler/trawl/libs/envflag"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "crawl:", err)
		os.Exit(1)
	}
}

// run dispatches on the first argument: export, query, delete, or
// (anything else) the crawl's flags.
func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdin, stdout, stderr *os.File) error {
	if len(args) > 0 {
		switch args[0] {
		case "export":
			var cfg results.ExportConfig
			fs := flag.NewFlagSet("crawl export", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := envflag.Parse(fs, args[1:], lookupEnv); err != nil {
				return err
			}
			if fs.NArg() > 0 {
				return fmt.Errorf("export: unexpected argument %q (flags only)", fs.Arg(0))
			}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("validate flags: %w", err)
			}
			return results.Export(ctx, cfg, stdout, stderr)
		case "query":
			var cfg results.QueryConfig
			fs := flag.NewFlagSet("crawl query", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := envflag.Parse(fs, args[1:], lookupEnv); err != nil {
				return err
			}
			if fs.NArg() != 1 {
				return fmt.Errorf(`query: want one SQL query after the flags, got %d arguments: crawl query --data-dir DIR "SELECT …"`, fs.NArg())
			}
			cfg.SQL = fs.Arg(0)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("validate flags: %w", err)
			}
			return results.Query(ctx, cfg, stdout, stderr, isTerminal(stdout))
		case "delete":
			var cfg launcher.DeleteConfig
			fs := flag.NewFlagSet("crawl delete", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			if err := envflag.Parse(fs, args[1:], lookupEnv); err != nil {
				return err
			}
			if fs.NArg() != 1 {
				return fmt.Errorf("delete: want one crawl id after the flags, got %d arguments: crawl delete --data-dir DIR CRAWL_ID", fs.NArg())
			}
			cfg.CrawlID = fs.Arg(0)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("validate flags: %w", err)
			}
			return launcher.Delete(ctx, cfg, stdout, stderr)
		}
	}
	var cfg launcher.Config
	fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("validate flags: %w", err)
	}
	return launcher.Run(ctx, cfg, stdin, stdout)
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
