// Command fetcher consumes fetch requests, fetches them politely and
// publishes the fetched pages.
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

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/consume"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fetcher:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, lookupEnv func(string) (string, bool)) error {
	host, _ := os.Hostname()
	cfg, err := config.Load(args, lookupEnv, fmt.Sprintf("%s-%d", host, os.Getpid()))
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log, err := telemetry.NewLogger(cfg.Telemetry, "fetcher")
	if err != nil {
		return fmt.Errorf("create logger: %w", err)
	}
	defer func() { _ = log.Sync() }()
	telemetry.ApplyMemoryLimit(cfg.Telemetry)
	stopProfiles, err := telemetry.StartProfiles(cfg.Telemetry, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	reg := telemetry.NewRegistry()
	freg := telemetry.Registerer(reg, "fetcher")

	store, err := chstore.Open(ctx, cfg.ClickHouse, log)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	topics := cfg.Kafka.Topics()

	fo := httpfetch.Options{
		UserAgent:             cfg.UserAgent,
		ConnectTimeout:        cfg.ConnectTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		FetchTimeout:          cfg.FetchTimeout,
		MaxBodyBytes:          cfg.MaxBodyBytes,
		AllowPrivate:          cfg.AllowPrivate,
		MinTransferRate:       cfg.MinTransferRate,
		TransferRateWindow:    cfg.TransferRateWindow,
		Cookies:               cfg.Cookies,
		MaxCookieHosts:        cfg.MaxCookieHosts,
		MaxCookiesPerHost:     cfg.MaxCookiesPerHost,
		DNSCacheTTL:           cfg.DNSCacheTTL,
		DNSCacheSize:          cfg.DNSCacheSize,
	}
	if cfg.CredentialsFile != "" {
		creds, err := readCredentials(cfg.CredentialsFile)
		if err != nil {
			return err
		}
		fo.Credentials = creds
	}
	if cfg.MinTransferRate == 0 {
		fo.MinTransferRate = -1 // disabled
	}
	var pool *proxies.Pool
	if cfg.UseProxies {
		pool = proxies.NewPool()
		fo.Proxies = pool
	}
	fetcher := httpfetch.New(fo)
	defer fetcher.Close()
	robotsCache := robots.NewCache(fetcher, time.Now, robots.Options{UserAgent: cfg.UserAgent})

	producer := kafkaio.NewWriter(cfg.Kafka, log, freg)
	defer func() {
		if err := producer.Close(); err != nil {
			log.Warn("close kafka writer failed, ignored", zap.Error(err))
		}
	}()
	fetchLog := chstore.NewBatchWriter(store, chstore.FetchLog, cfg.ClickHouse.Batch(), log, freg)
	robotsLog := chstore.NewBatchWriter(store, chstore.RobotsTxt, cfg.ClickHouse.Batch(), log, freg)
	rec, err := recorder.New(recorder.Options{}, producer, fetchLog, robotsLog, freg)
	if err != nil {
		return fmt.Errorf("create recorder: %w", err)
	}

	maxRedirects := cfg.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = -1 // no target followed
	}
	var hostStates consume.HostStateLoader
	if cfg.PersistHostState {
		hostStates = hoststate.NewLoader(cfg.Kafka, topics.HostState)
	}
	var robotsTxt consume.RobotsStore
	if cfg.PersistRobots {
		robotsTxt = store
	}
	var readback consume.Published
	if cfg.ReadbackWindow > 0 {
		readback = published.NewReader(cfg.Kafka, topics.Fetched, cfg.ReadbackWindow, 0)
	}
	var servers *politeness.Gate
	if cfg.ServerDelay > 0 {
		servers = politeness.NewGate(time.Now, cfg.ServerDelay)
	}
	specs := crawlcontrol.NewSpecs()
	svc, err := consume.New(consume.Options{
		Topics:     topics,
		Workers:    cfg.Workers,
		Politeness: politeness.Options{Delay: cfg.Delay, MaxCrawlDelay: cfg.MaxCrawlDelay, ResponseFactor: cfg.DelayResponseFactor},
		InstanceID: cfg.InstanceID,

		MaxAttempts:     cfg.MaxAttempts,
		RetryBackoff:    cfg.RetryBackoff,
		MaxRetryBackoff: cfg.MaxRetryBackoff,
		MaxRedirects:    maxRedirects,
		MaxHostQueue:    cfg.MaxHostQueue,
		HoldHorizon:     cfg.HoldHorizon,
		HostStates:      hostStates,
		Crawls:          specs,
		Recorded:        store,
		Published:       readback,
		PauseRecheck:    cfg.PauseRecheck,
		Servers:         servers,
		Resolve:         fetcher.Resolve,
		RobotsTxt:       robotsTxt,
	}, fetcher, robotsCache, producer, rec, log, freg)
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:      cfg.Kafka.GroupFor("fetcher"),
		Topic:        topics.Fetch,
		MaxInFlight:  cfg.MaxInflightPerPartition,
		CloseTimeout: cfg.DrainTimeout,
	}, svc.Assign, log, freg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)
	admin.AddCheck("clickhouse", store.Ping)
	if _, err := admin.Listen(); err != nil {
		return fmt.Errorf("listen admin: %w", err)
	}

	// Shutdown order: readiness false → stop consuming (handlers finish or
	// hand back in-flight work, offsets committed) → write the outcomes
	// still queued → flush the fetch log and robots.txt rows → stop the
	// admin server → close clients (deferred).
	g, gctx := errgroup.WithContext(ctx)
	recorderCtx, stopRecorder := context.WithCancel(context.WithoutCancel(ctx))
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	adminCtx, stopAdmin := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRecorder()
	defer stopWriter()
	defer stopAdmin()
	unready := context.AfterFunc(gctx, func() { admin.SetReady(false) })
	defer unready()

	g.Go(func() error { return admin.Run(adminCtx) })
	g.Go(func() error {
		if err := fetchLog.Run(writerCtx); err != nil {
			return fmt.Errorf("run fetch log writer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := robotsLog.Run(writerCtx); err != nil {
			return fmt.Errorf("run robots.txt writer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer stopWriter()
		if err := rec.Run(recorderCtx, cfg.DrainTimeout); err != nil {
			return fmt.Errorf("run recorder: %w", err)
		}
		return nil
	})
	// No request is fetched before the crawl states published so far are
	// known (bounded wait: a broken control topic does not stop the crawl).
	caughtUp := make(chan struct{})
	g.Go(func() error {
		return crawlcontrol.FollowCaughtUp(gctx, cfg.Kafka, specs, func() { close(caughtUp) }, func(err error) {
			log.Warn("skipped undecodable crawl spec", zap.Error(err))
		})
	})
	if pool != nil {
		g.Go(func() error { return proxies.Follow(gctx, cfg.Kafka, topics.Proxies, pool, log) })
	}
	g.Go(func() error {
		defer stopAdmin()
		defer stopRecorder()
		select {
		case <-caughtUp:
		case <-time.After(controlWait):
			log.Warn("started before the crawl states were read", zap.Duration("waited", controlWait))
		case <-gctx.Done():
			return nil
		}
		admin.SetReady(true)
		log.Info("fetcher started", zap.String("instance", cfg.InstanceID), zap.Int("workers", cfg.Workers))
		if err := group.Run(gctx); err != nil {
			return fmt.Errorf("run consumer group: %w", err)
		}
		return nil
	})
	err = g.Wait()
	log.Info("fetcher stopped")
	return err
}

// controlWait bounds the wait for the control topic at start.
const controlWait = 10 * time.Second

// readCredentials reads the --credentials-file.
func readCredentials(path string) (map[string]httpfetch.Credential, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open credentials file: %w", err)
	}
	defer f.Close()
	creds, err := httpfetch.ReadCredentials(f)
	if err != nil {
		return nil, fmt.Errorf("read credentials file %s: %w", path, err)
	}
	return creds, nil
}
