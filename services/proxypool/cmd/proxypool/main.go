// Command proxypool checks the operator's proxies and proxies harvested from
// configured sources, keeps the pool at its target size, applies the
// fetchers' feedback, and publishes the live ones to the compacted proxies
// topic, where the fetchers follow them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/stale"
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
	APIAddr     string        // flag api-addr: listen address of GET /proxies
	Sources     stringList    // flag source, repeatable: proxy-list URLs or files to harvest
	SourceTO    time.Duration // flag source-timeout
	Pool        pool.Config   // max-size, evict-after, ban-hosts, ban-below
	Feedback    bool          // flag feedback: consume the fetchers' proxy feedback
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
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
	fs.BoolVar(&c.Check.LeakCheck, "check-leaks", false, "the check page echoes request headers: reject proxies that reveal the client (X-Forwarded-For…)")
	fs.Var(&c.Sources, "source", "proxy source to harvest: URL or file of host:port lines, a JSON list, or an HTML page with proxy tables (repeatable)")
	fs.DurationVar(&c.SourceTO, "source-timeout", 30*time.Second, "timeout of one source fetch")
	fs.IntVar(&c.Pool.MaxSize, "max-size", 200, "most proxies tracked (harvested ones stop being added beyond)")
	fs.IntVar(&c.Refresh.TargetSize, "target-size", 20, "harvest again when fewer proxies are live or unchecked")
	fs.IntVar(&c.Pool.EvictAfter, "evict-after", 2, "consecutive failed checks that evict a harvested proxy (0: never)")
	fs.IntVar(&c.Pool.BanHosts, "ban-hosts", 3, "distinct hosts blocking a proxy (fetcher feedback) that ban it (0: never)")
	fs.Float64Var(&c.Pool.BanBelow, "ban-below", 0.2, "success rate (EWMA of checks and feedback) below which feedback bans a proxy (0: never)")
	fs.BoolVar(&c.Feedback, "feedback", true, "consume the fetchers' proxy feedback topic")
}

func (c config) validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.Refresh.Validate()}
	if c.ProxiesFile != "" || len(c.Sources) > 0 {
		errs = append(errs, c.Check.Validate())
	} else if c.Check.URL != "" {
		errs = append(errs, c.Check.Validate())
	}
	if c.APIAddr == "" {
		errs = append(errs, errors.New("api-addr must not be empty"))
	}
	if c.Pool.MaxSize < 0 || c.Pool.EvictAfter < 0 || c.Pool.BanHosts < 0 {
		errs = append(errs, errors.New("max-size, evict-after and ban-hosts must not be negative"))
	}
	if c.Pool.MaxSize > 0 && c.Refresh.TargetSize > c.Pool.MaxSize {
		errs = append(errs, fmt.Errorf("target-size %d exceeds max-size %d", c.Refresh.TargetSize, c.Pool.MaxSize))
	}
	if c.Pool.BanBelow < 0 || c.Pool.BanBelow >= 1 {
		errs = append(errs, fmt.Errorf("ban-below %v: want 0 <= x < 1", c.Pool.BanBelow))
	}
	if len(c.Sources) > 0 && c.SourceTO <= 0 {
		errs = append(errs, errors.New("source-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// staleReadTimeout bounds reading the proxies topic at start.
const staleReadTimeout = 30 * time.Second

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
	telemetry.ApplyMemoryLimit(cfg.Telemetry)
	stopProfiles, err := telemetry.StartProfiles(cfg.Telemetry, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	reg := telemetry.NewRegistry()
	preg := telemetry.Registerer(reg, service)

	entries, err := loadProxies(cfg.ProxiesFile)
	if err != nil {
		return err
	}

	cfg.Pool.CheckTimeout = cfg.Check.Timeout
	p := pool.NewWithConfig(cfg.Pool)
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
	if len(entries) > 0 || len(cfg.Sources) > 0 {
		checker := check.New(cfg.Check, check.ProxyClient, time.Now)
		loop = refresh.New(cfg.Refresh, p, checker, publish.New(writer, cfg.Kafka.Topics().Proxies), log, metrics)
		if len(cfg.Sources) > 0 {
			loop.WithHarvester(harvest.New(cfg.Sources, cfg.SourceTO))
		}
	}
	var fbGroup *kafkaio.Group
	// An idle pool (no proxies, no sources) has no proxy to score: it
	// does not consume the feedback topic's partitions for nothing.
	if cfg.Feedback && loop != nil {
		fbMetrics, err := feedback.NewMetrics(preg)
		if err != nil {
			return err
		}
		if fbGroup, err = feedback.NewGroup(cfg.Kafka, p, fbMetrics, log, preg); err != nil {
			return err
		}
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
		// Readiness goes false as soon as shutdown begins.
		unready := context.AfterFunc(gctx, func() { admin.SetReady(false) })
		defer unready()
		defer admin.SetReady(false)
		if fbGroup != nil {
			g.Go(func() error { return fbGroup.Run(gctx) })
		}
		// A previous run may have left proxies live on the topic that
		// are no longer in the file or the pool: read them to tombstone
		// after the first round (idle: at once). Best effort: a failure
		// to read only logs.
		sctx, scancel := context.WithTimeout(gctx, staleReadTimeout)
		ids, err := stale.LiveIDs(sctx, cfg.Kafka, cfg.Kafka.Topics().Proxies)
		scancel()
		switch {
		case gctx.Err() != nil:
			return nil
		case err != nil:
			log.Warn("previous proxies unknown", zap.Error(err))
		case loop != nil:
			loop.WithStale(ids)
		case len(ids) > 0:
			// Idle: every proxy left live is stale.
			tombs := make([]pool.Change, len(ids))
			for i, id := range ids {
				tombs[i] = pool.Change{ID: id, Delete: true}
			}
			if err := publish.New(writer, cfg.Kafka.Topics().Proxies).Publish(gctx, tombs); err != nil {
				if gctx.Err() != nil {
					return nil
				}
				return err
			}
			log.Info("stale proxies tombstoned", zap.Int("tombstoned", len(tombs)))
		}
		if loop == nil {
			log.Info("no proxies configured, running idle")
			<-gctx.Done()
			return nil
		}
		log.Info("checking proxies",
			zap.Int("proxies", len(entries)), zap.Int("sources", len(cfg.Sources)), zap.Duration("interval", cfg.Refresh.Interval),
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
