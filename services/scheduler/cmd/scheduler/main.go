// Command scheduler turns discovered URLs into fetch requests: it
// canonicalizes, deduplicates against the partition's seen set (persisted in
// ClickHouse), applies the depth limit and the per-crawl page budget, and
// produces the admitted URLs to the fetch topic. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/consume"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit"
)

const service = "scheduler"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.LookupEnv)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

// config is the scheduler's whole configuration.
type config struct {
	Telemetry  telemetry.Config
	Kafka      kafkaio.Config
	ClickHouse chstore.Config

	MaxDepth      uint  // deepest link depth admitted
	MaxPages      int64 // page budget per crawl, 0 = unlimited
	BudgetRefresh time.Duration
	MaxBatch      int // records per batch
	MaxInFlight   int // unacked records per partition before reading pauses
	HostQuota     int
	QuotaWindow   time.Duration
	RevisitTick   time.Duration
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	fs.UintVar(&c.MaxDepth, "max-depth", 16, "deepest link depth admitted (seeds are depth 0)")
	fs.Int64Var(&c.MaxPages, "max-pages", 0, "pages admitted per crawl, 0 = unlimited (approximate with several schedulers, see README)")
	fs.DurationVar(&c.BudgetRefresh, "budget-refresh", 5*time.Second, "how often the per-crawl admitted count is read from ClickHouse when --max-pages is set")
	fs.IntVar(&c.MaxBatch, "max-batch", kafkaio.DefaultMaxBatch, "discovered URLs decided, produced and persisted together")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", kafkaio.DefaultMaxInFlight, "unacknowledged records per partition before reading pauses")
	fs.IntVar(&c.HostQuota, "host-quota", 0, "fetch requests released per host per --host-quota-window, the rest waits in the frontier table (0 = unlimited)")
	fs.DurationVar(&c.QuotaWindow, "host-quota-window", 10*time.Second, "window of --host-quota (also how often held URLs of paused crawls are checked)")
	fs.DurationVar(&c.RevisitTick, "revisit-tick", time.Second, "how often each partition's due revisits are produced")
}

// Validate reports a configuration error.
func (c config) Validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate()}
	if c.MaxDepth > 65535 {
		errs = append(errs, fmt.Errorf("max-depth: %d above 65535", c.MaxDepth))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("max-pages: %d must not be negative", c.MaxPages))
	}
	if c.BudgetRefresh <= 0 {
		errs = append(errs, fmt.Errorf("budget-refresh: %v must be positive", c.BudgetRefresh))
	}
	if c.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("max-batch: %d must be positive", c.MaxBatch))
	}
	if c.MaxInFlight < c.MaxBatch {
		errs = append(errs, fmt.Errorf("max-in-flight: %d below max-batch %d", c.MaxInFlight, c.MaxBatch))
	}
	if c.HostQuota < 0 {
		errs = append(errs, fmt.Errorf("host-quota: %d must not be negative", c.HostQuota))
	}
	if c.QuotaWindow <= 0 {
		errs = append(errs, fmt.Errorf("host-quota-window: %v must be positive", c.QuotaWindow))
	}
	if c.RevisitTick <= 0 {
		errs = append(errs, fmt.Errorf("revisit-tick: %v must be positive", c.RevisitTick))
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
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}

	log, err := telemetry.NewLogger(cfg.Telemetry, service)
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
	sreg := telemetry.Registerer(reg, service)

	store, err := chstore.Open(ctx, cfg.ClickHouse, log)
	if err != nil {
		return fmt.Errorf("open clickhouse: %w", err)
	}
	defer func() { _ = store.Close() }()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}

	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)
	admin.AddCheck("clickhouse", store.Ping)
	addr, err := admin.Listen()
	if err != nil {
		return fmt.Errorf("listen admin: %w", err)
	}

	producer := kafkaio.NewWriter(cfg.Kafka, log, sreg)
	defer func() { _ = producer.Close() }()
	seenW := chstore.NewBatchWriter(store, chstore.URLSeen, cfg.ClickHouse.Batch(), log, sreg)
	eventsW := chstore.NewBatchWriter(store, chstore.URLEvents, cfg.ClickHouse.Batch(), log, sreg)
	frontW := chstore.NewBatchWriter(store, chstore.Frontier, cfg.ClickHouse.Batch(), log, sreg)
	revW := chstore.NewBatchWriter(store, chstore.Revisits, cfg.ClickHouse.Batch(), log, sreg)
	changeW := chstore.NewBatchWriter(store, chstore.ChangeHistory, cfg.ClickHouse.Batch(), log, sreg)
	specs := crawlcontrol.NewSpecs()
	tracker := budget.NewTracker(cfg.MaxPages).WithLimits(specPages(specs))
	topics := cfg.Kafka.Topics()
	sched, err := consume.New(consume.Config{
		Topics:      topics,
		Partitions:  cfg.Kafka.Partitions,
		MaxDepth:    uint32(cfg.MaxDepth),
		DepthLimit:  specDepth(specs),
		Scope:       specScope(specs, log),
		State:       specs.State,
		Paused:      pausedCrawls(specs),
		Changed:     specs.Changed,
		HostLimit:   specHostPages(specs),
		HostCounts:  consume.CountHosts(store),
		HostQuota:   cfg.HostQuota,
		QuotaWindow: cfg.QuotaWindow,
	}, producer, seenW, eventsW, consume.StoreFrontier{W: frontW, Store: store}, store, tracker, time.Now, log, sreg)
	if err != nil {
		return err
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:     cfg.Kafka.GroupFor(service),
		Topic:       topics.Discovered,
		MaxBatch:    cfg.MaxBatch,
		MaxInFlight: cfg.MaxInFlight,
	}, sched.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	revisiter, err := consume.NewRevisiter(consume.RevisitConfig{
		Topics:     topics,
		Partitions: cfg.Kafka.Partitions,
		Policy:     specRevisit(specs),
		State:      specs.State,
		Tick:       cfg.RevisitTick,
	}, producer, consume.StoreRevisits{Revisits: revW, Changes: changeW, Store: store}, time.Now, log, sreg)
	if err != nil {
		return err
	}
	revisitGroup, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:     cfg.Kafka.GroupFor(service + "-revisit"),
		Topic:       topics.Fetched,
		MaxBatch:    cfg.MaxBatch,
		MaxInFlight: cfg.MaxInFlight,
	}, revisiter.Assign, log, sreg)
	if err != nil {
		return fmt.Errorf("create revisit consumer group: %w", err)
	}

	log.Info("scheduler starting", zap.Stringer("admin", addr), telemetry.Topic(topics.Discovered),
		zap.Uint("max_depth", cfg.MaxDepth), zap.Int64("max_pages", cfg.MaxPages))

	// Shutdown order: readiness false → the group stops consuming, closes
	// its handlers and commits what was acked → only then the url_seen
	// writer flushes and stops (in-flight batches still need it) → the
	// producer and the store close (deferred).
	g, gctx := errgroup.WithContext(ctx)
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWriter()
	g.Go(func() error { return admin.Run(gctx) })
	g.Go(func() error {
		if err := seenW.Run(writerCtx); err != nil {
			return fmt.Errorf("run url_seen writer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := frontW.Run(writerCtx); err != nil {
			return fmt.Errorf("run frontier writer: %w", err)
		}
		return nil
	})
	for name, w := range map[string]interface{ Run(context.Context) error }{"revisits": revW, "change_history": changeW} {
		g.Go(func() error {
			if err := w.Run(writerCtx); err != nil {
				return fmt.Errorf("run %s writer: %w", name, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if err := eventsW.Run(writerCtx); err != nil {
			return fmt.Errorf("run url_events writer: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		return crawlcontrol.Follow(gctx, cfg.Kafka, specs, func(err error) {
			log.Warn("crawl spec skipped", zap.Error(err))
		})
	})
	g.Go(func() error {
		return tracker.Run(gctx, cfg.BudgetRefresh, consume.CountSeen(store), func(err error) {
			log.Warn("budget refresh failed, keeping previous counts", zap.Error(err))
		})
	})
	// The writers stop when both groups have closed their handlers.
	groups, groupsCtx := errgroup.WithContext(gctx)
	groups.Go(func() error { return group.Run(groupsCtx) })
	groups.Go(func() error {
		if err := consume.WaitRevisiting(groupsCtx, specs); err != nil {
			return nil // stopping before any crawl revisited
		}
		log.Info("a followed crawl revisits its pages, revisit consumer starting")
		if err := revisitGroup.Run(groupsCtx); err != nil {
			return fmt.Errorf("run revisit group: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer stopWriter()
		return groups.Wait()
	})
	g.Go(func() error {
		<-gctx.Done()
		admin.SetReady(false)
		return nil
	})
	admin.SetReady(true)

	err = g.Wait()
	log.Info("scheduler stopped")
	return err
}

// specDepth returns a crawl's max depth from its specification, when it has
// one that sets it; other crawls use --max-depth.
func specDepth(specs *crawlcontrol.Specs) func(crawlID string) (uint32, bool) {
	return func(crawlID string) (uint32, bool) {
		if d := specs.Get(crawlID).GetLimits().GetMaxDepth(); d > 0 {
			return d, true
		}
		return 0, false
	}
}

// specScope returns a crawl's scope rules from its specification, when it
// sets a scope; patterns that do not compile are logged once per revision
// and left out (the parser reports them too).
func specScope(specs *crawlcontrol.Specs, log *zap.Logger) func(crawlID string) (*scope.Rules, bool) {
	cache := scope.NewCache(scope.Defaults{}, func(crawlID string, err error) {
		log.Warn("crawl scope partly invalid", telemetry.Crawl(crawlID), zap.Error(err))
	})
	return func(crawlID string) (*scope.Rules, bool) {
		spec := specs.Get(crawlID)
		if spec.GetScope() == nil {
			return nil, false
		}
		return cache.Rules(crawlID, spec), true
	}
}

// specPages returns a crawl's page budget from its specification, when it
// sets one (limits.max_pages); other crawls use --max-pages.
func specPages(specs *crawlcontrol.Specs) func(crawlID string) (int64, bool) {
	return func(crawlID string) (int64, bool) {
		if n := specs.Get(crawlID).GetLimits().GetMaxPages(); n > 0 {
			return int64(min(n, math.MaxInt64)), true
		}
		return 0, false
	}
}

// pausedCrawls lists the crawls whose specification says PAUSED: the
// frontier pump leaves their URLs pending.
func pausedCrawls(specs *crawlcontrol.Specs) func() []string {
	return func() []string {
		var ids []string
		for _, sp := range specs.All() {
			if sp.GetState() == crawlv1.CrawlState_CRAWL_STATE_PAUSED {
				ids = append(ids, sp.GetCrawlId())
			}
		}
		return ids
	}
}

// specRevisit returns a crawl's revisit policy from its specification;
// crawls without one (or with revisit disabled) are not revisited.
func specRevisit(specs *crawlcontrol.Specs) func(crawlID string) (revisit.Policy, bool) {
	return func(crawlID string) (revisit.Policy, bool) {
		return revisit.FromSpec(specs.Get(crawlID).GetRevisit())
	}
}

// specHostPages returns a crawl's per-host page budget from its
// specification (limits.max_pages_per_host), 0 = unlimited.
func specHostPages(specs *crawlcontrol.Specs) func(crawlID string) int64 {
	return func(crawlID string) int64 {
		return int64(min(specs.Get(crawlID).GetLimits().GetMaxPagesPerHost(), math.MaxInt64))
	}
}
