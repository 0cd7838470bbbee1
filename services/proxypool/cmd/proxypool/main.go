// Command proxypool checks the operator's proxies and publishes the live
// ones to the compacted proxies topic, where the fetchers follow them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
)

const service = "proxypool"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "proxypool:", err)
		os.Exit(1)
	}
}

// config is the service configuration.
type config struct {
	Telemetry   telemetry.Config
	Kafka       kafkaio.Config
	ProxiesFile string // flag proxies-file: empty runs the service idle
	Check       check.Config
	Refresh     refresh.Config
	APIAddr     string // flag api-addr: listen address of GET /proxies
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	fs.StringVar(&c.ProxiesFile, "proxies-file", "", "proxy list: host:port or scheme://[user:pass@]host:port per line (http, https, socks5); empty runs idle")
	fs.StringVar(&c.Check.URL, "check-url", "", "page fetched through every proxy to check it (required with -proxies-file)")
	fs.StringVar(&c.Check.Expect, "check-expect", "", "string the check page must contain (catches proxies answering with their own content)")
	fs.DurationVar(&c.Check.Timeout, "check-timeout", 5*time.Second, "timeout of one check")
	fs.DurationVar(&c.Refresh.Interval, "check-interval", 5*time.Minute, "time between two check rounds")
	fs.IntVar(&c.Refresh.Concurrency, "check-concurrency", 16, "checks in flight at once")
	fs.StringVar(&c.APIAddr, "api-addr", "127.0.0.1:0", "listen address of the API (GET /proxies)")
}

func (c config) validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.Refresh.Validate()}
	if c.ProxiesFile != "" {
		errs = append(errs, c.Check.Validate())
	} else if c.Check.URL != "" {
		errs = append(errs, c.Check.Validate())
	}
	if c.APIAddr == "" {
		errs = append(errs, errors.New("api-addr must not be empty"))
	}
	return errors.Join(errs...)
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	var cfg config
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}

	log, err := telemetry.NewLogger(cfg.Telemetry, service)
	if err != nil {
		return fmt.Errorf("build logger: %w", err)
	}
	defer func() { _ = log.Sync() }()
	reg := telemetry.NewRegistry()
	preg := telemetry.Registerer(reg, service)

	entries, err := loadProxies(cfg.ProxiesFile)
	if err != nil {
		return err
	}

	p := pool.New(cfg.Check.Timeout)
	p.Set(entries)
	metrics, err := refresh.NewMetrics(preg)
	if err != nil {
		return err
	}
	writer := kafkaio.NewWriter(cfg.Kafka, log, preg)
	defer func() {
		if err := writer.Close(); err != nil {
			log.Warn("close kafka writer", zap.Error(err))
		}
	}()
	var loop *refresh.Loop
	if len(entries) > 0 {
		checker := check.New(cfg.Check, check.ProxyClient, time.Now)
		loop = refresh.New(cfg.Refresh, p, checker, publish.New(writer, cfg.Kafka.Topics().Proxies), log, metrics)
	}

	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)
	apiSrv := api.New(cfg.APIAddr, p, log)
	if _, err := admin.Listen(); err != nil {
		return fmt.Errorf("listen admin: %w", err)
	}
	if _, err := apiSrv.Listen(); err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return admin.Run(gctx) })
	g.Go(func() error { return apiSrv.Run(gctx) })
	g.Go(func() error {
		if err := kafkaio.EnsureTopics(gctx, cfg.Kafka); err != nil {
			if gctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ensure topics: %w", err)
		}
		admin.SetReady(true)
		defer admin.SetReady(false)
		if loop == nil {
			log.Info("no proxies configured, running idle")
			<-gctx.Done()
			return nil
		}
		log.Info("checking proxies",
			zap.Int("proxies", len(entries)), zap.Duration("interval", cfg.Refresh.Interval),
			telemetry.Topic(cfg.Kafka.Topics().Proxies))
		return loop.Run(gctx)
	})
	err = g.Wait()
	log.Info("stopped", zap.Error(err))
	return err
}

// loadProxies reads the proxy list; an invalid line is a configuration error
// (the error names its line number, never its content).
func loadProxies(path string) ([]proxylist.Entry, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open proxies file: %w", err)
	}
	defer f.Close()
	entries, err := proxylist.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("parse proxies file %s: %w", path, err)
	}
	return entries, nil
}
