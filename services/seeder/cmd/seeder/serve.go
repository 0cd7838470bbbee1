package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
)

// serveConfig configures `seeder serve`, the long-running crawl-jobs API.
type serveConfig struct {
	Telemetry    telemetry.Config
	Kafka        kafkaio.Config
	ClickHouse   chstore.Config
	APIAddr      string          // flag api-addr
	APIToken     string          // flag api-token (required)
	MaxBodyBytes int64           // flag api-max-body-bytes
	Sitemap      sitemaps.Config // flags sitemap-*, allow-private
}

func (c *serveConfig) registerFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	fs.StringVar(&c.APIAddr, "api-addr", "127.0.0.1:8480", "address of the crawl-jobs HTTP API")
	fs.StringVar(&c.APIToken, "api-token", "", "bearer token the API requires (required; prefer CRAWLER_API_TOKEN)")
	fs.Int64Var(&c.MaxBodyBytes, "api-max-body-bytes", api.DefaultMaxBodyBytes, "largest accepted request body")
	registerSitemapFlags(fs, &c.Sitemap)
}

// minTokenBytes is the shortest accepted API token.
const minTokenBytes = 16

func (c serveConfig) validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate(), c.Sitemap.Validate()}
	if c.APIAddr == "" {
		errs = append(errs, errors.New("validate api-addr: required"))
	}
	if len(c.APIToken) < minTokenBytes {
		errs = append(errs, fmt.Errorf("validate api-token: %d bytes, want at least %d", len(c.APIToken), minTokenBytes))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("validate api-max-body-bytes: %d, want at least 1024", c.MaxBodyBytes))
	}
	return errors.Join(errs...)
}

// serve runs the crawl-jobs API until ctx is done. ready, when not nil,
// receives the API's listening address.
func serve(ctx context.Context, args []string, lookupEnv func(string) (string, bool), ready func(net.Addr)) error {
	var cfg serveConfig
	fs := flag.NewFlagSet(service+" serve", flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse arguments: unexpected %q", fs.Args())
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}
	log, err := telemetry.NewLogger(cfg.Telemetry, service)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	reg := telemetry.NewRegistry()
	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)

	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	store, err := chstore.Open(ctx, cfg.ClickHouse, log)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	admin.AddCheck("clickhouse", store.Ping)

	w := kafkaio.NewWriter(cfg.Kafka, log, telemetry.Registerer(reg, service))
	defer w.Close()
	ctl := control.New(cfg.Kafka, w, log)
	apiMetrics, err := api.NewMetrics(telemetry.Registerer(reg, service))
	if err != nil {
		return err
	}
	discoverer := sitemaps.New(cfg.Sitemap)
	defer discoverer.Close()
	srv := api.New(api.Config{Token: cfg.APIToken, MaxBodyBytes: cfg.MaxBodyBytes, Sitemaps: discoverer}, ctl, stats.New(store), apiMetrics, log)

	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("listen api: %w", err)
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	log.Info("api listening", zap.String("addr", ln.Addr().String()))

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return admin.Run(gctx) })
	g.Go(func() error { return ctl.Run(gctx) })
	g.Go(func() error {
		// Until the control topic is read the API answers 503 and the
		// service is not ready.
		if ctl.WaitCaughtUp(gctx) != nil || gctx.Err() != nil {
			return nil
		}
		admin.SetReady(true)
		if ready != nil {
			ready(ln.Addr())
		}
		return nil
	})
	g.Go(func() error {
		if err := httpSrv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serve api: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		admin.SetReady(false)
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return httpSrv.Shutdown(sctx)
	})
	return g.Wait()
}
