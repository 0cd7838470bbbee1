// Package app assembles the fetcher from its configuration: New opens
// ClickHouse (migrated), makes sure the topics exist, and builds the proxy
// pool, the HTTP fetcher and the robots.txt cache, the Kafka writer, the
// fetch-log and robots.txt batch writers, the recorder, the consumer
// (consume) and its group, and the table of crawl specifications they
// read; options.go turns the configuration into the fetcher's and the
// consumer's options. cmd/fetcher adds the parts to the service's run
// group; Close releases the clients once the group is done.
package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/backpressure"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/budget"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/consume"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/warc"
)

// Name is the service's name: its metric prefix, its log field and its
// consumer group's id.
const Name = "fetcher"

// ControlWait bounds the wait for the control topic at start (WaitSpecs).
const ControlWait = 10 * time.Second

// Fetcher is the fetcher's parts, built from its configuration.
type Fetcher struct {
	cfg         config.Config
	log         *zap.Logger
	store       *chstore.Store
	pool        *proxies.Pool // nil without --use-proxies
	fetcher     *httpfetch.Fetcher
	producer    *kafkaio.Writer
	recorder    *recorder.Recorder
	specs       *crawlcontrol.Specs
	group       *kafkaio.Group
	budget      *budget.Tracker
	writers     []Writer
	archive     *warc.Writer     // nil without --warc-dir
	browser     *browser.Browser // nil with --render never
	controlWait time.Duration
	// offsets and monitors: the parser's and the scheduler's lags,
	// watched unless --max-downstream-lag and --max-scheduler-lag are 0
	offsets  *kafkaio.OffsetReader
	monitors []*backpressure.Monitor

	caughtUpOnce sync.Once
	caughtUp     chan struct{} // closed once the control topic was read to its end
}

// Writer is a ClickHouse batch writer as the run group sees it: Run
// flushes batches until its context is done, then flushes what is
// buffered.
type Writer struct {
	Name string
	Run  func(ctx context.Context) error
}

// New builds the fetcher: ClickHouse opened and migrated, the topics
// created, every part constructed but nothing running yet. On error, what
// was opened is closed again.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, reg prometheus.Registerer) (_ *Fetcher, err error) {
	f := &Fetcher{cfg: cfg, log: log, specs: crawlcontrol.NewSpecs(), controlWait: ControlWait, caughtUp: make(chan struct{})}
	defer func() {
		if err != nil {
			if f.archive != nil {
				f.archive.Release()
			}
			f.Close()
		}
	}()
	// ClickHouse waited for while it is down, migrated; the topics created.
	if f.store, err = service.Bootstrap(ctx, cfg.ClickHouse, cfg.Kafka, log, reg); err != nil {
		return nil, err
	}
	topics := cfg.Kafka.Topics()

	if cfg.UseProxies {
		pool := proxies.NewPool()
		known := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "proxies_known",
			Help: "Proxies this fetcher knows from the proxies topic.",
		}, func() float64 { return float64(pool.Len()) })
		if err := reg.Register(known); err != nil {
			return nil, fmt.Errorf("register proxies_known: %w", err)
		}
		f.pool = pool
	}
	fo, err := fetchOptions(cfg, f.pool)
	if err != nil {
		return nil, err
	}
	fo.Metrics = reg
	f.fetcher = httpfetch.New(fo)
	robotsCache := robots.NewCache(f.fetcher, time.Now, robots.Options{UserAgent: cfg.UserAgent, Metrics: reg})

	f.producer = kafkaio.NewWriter(cfg.Kafka, log, reg)
	fetchLog := chstore.NewBatchWriter(f.store, chstore.FetchLog, cfg.ClickHouse.Batch(), log, reg)
	robotsLog := chstore.NewBatchWriter(f.store, chstore.RobotsTxt, cfg.ClickHouse.Batch(), log, reg)
	f.writers = []Writer{{"fetch log writer", fetchLog.Run}, {"robots.txt writer", robotsLog.Run}}
	if f.recorder, err = recorder.New(recorder.Options{Recycle: kafkaio.Recycle}, f.producer, fetchLog, robotsLog, reg); err != nil {
		return nil, fmt.Errorf("create recorder: %w", err)
	}

	f.budget = budget.NewTracker(config.PageBudget(cfg.MaxPages, f.specs), f.store.CountFetchedPages, time.Now)
	co := consumeOptions(cfg, f.specs, f.store, f.fetcher)
	co.Budget = f.budget
	co.Flush = func(partition, rows int) {
		fetchLog.FlushWhenKey(partition, rows)
		// A host's first request only: its row, when one is buffered or
		// comes. Not Flush, which wakes the writer for nothing at every
		// outcome while the mark is met.
		robotsLog.FlushWhen(1)
	}
	if cfg.Warc.Dir != "" {
		files := chstore.NewBatchWriter(f.store, chstore.WarcFiles, cfg.ClickHouse.Batch(), log, reg)
		opts := cfg.Warc.Options(cfg.InstanceID, cfg.UserAgent, cfg.MaxBodyBytes, f.specs.All)
		if f.archive, err = warc.Open(opts, files, log, reg); err != nil {
			return nil, fmt.Errorf("open warc archive: %w", err)
		}
		f.writers = append(f.writers, Writer{"warc_files writer", files.Run})
		co.Archive = f.archive
	}
	if err := f.startBrowser(ctx, cfg, &co); err != nil {
		return nil, err
	}
	consumer, err := consume.New(co, f.fetcher, robotsCache, f.producer, f.recorder, log, reg)
	if err != nil {
		return nil, fmt.Errorf("create consumer: %w", err)
	}
	if err := f.watch(cfg, consumer, log, reg); err != nil {
		return nil, err
	}
	f.group, err = kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:      cfg.Kafka.GroupFor(Name),
		Topic:        topics.Fetch,
		MaxInFlight:  cfg.MaxInflightPerPartition,
		MaxSettling:  settlingFor(cfg.MaxInflightPerPartition),
		CloseTimeout: cfg.DrainTimeout,
		// After an outage of the brokers or of this host's link, a
		// partition waits for the group to settle (its members rejoin
		// one by one) and for the late writes of its previous owner, so
		// that the work done during the outage is not requested again.
		SettleAfterLapse: cfg.Kafka.SessionTimeout,
		// The rows the partition's acks wait on go in as it closes,
		// not at the next interval (--clickhouse-flush-interval).
		OnClose: chstore.FlushEach(fetchLog, robotsLog),
	}, consumer.Assign, log, reg)
	if err != nil {
		return nil, fmt.Errorf("create consumer group: %w", err)
	}
	return f, nil
}

// The services whose consumer groups' lags hold the fetcher back: the
// parser's on the fetched-pages topic (--max-downstream-lag), the
// scheduler's on the discovered topic (--max-scheduler-lag).
const (
	ParserGroup    = "parser"
	SchedulerGroup = "scheduler"
)

// watch builds the monitors of the stages after the fetcher, each pausing
// new requests (gate) through one backpressure.Hold while its lag is over
// its limit.
func (f *Fetcher) watch(cfg config.Config, gate backpressure.Gate, log *zap.Logger, reg prometheus.Registerer) error {
	topics := cfg.Kafka.Topics()
	stages := []struct {
		next, group, topic string
		high               time.Duration
	}{
		{"parser", ParserGroup, topics.Fetched, cfg.MaxDownstreamLag},
		{"scheduler", SchedulerGroup, topics.Discovered, cfg.MaxSchedulerLag},
	}
	hold := backpressure.NewHold(gate, time.Now, reg)
	for _, st := range stages {
		if st.high <= 0 {
			continue
		}
		if f.offsets == nil {
			r, err := kafkaio.NewOffsetReader(cfg.Kafka)
			if err != nil {
				return fmt.Errorf("create offset reader: %w", err)
			}
			f.offsets = r
		}
		offsets := backpressure.GroupOffsets(f.offsets, cfg.Kafka.GroupFor(st.group), st.topic)
		m, err := backpressure.New(backpressure.Options{Next: st.next, High: st.high}, offsets, hold, log, reg)
		if err != nil {
			return err
		}
		f.monitors = append(f.monitors, m)
	}
	return nil
}

// HoldsBack reports whether the fetcher pauses while a stage after it is
// behind (--max-downstream-lag, --max-scheduler-lag); HoldBack then runs
// the monitors.
func (f *Fetcher) HoldsBack() bool { return len(f.monitors) > 0 }

// HoldBack measures the lags every second until ctx is done, and pauses
// new requests while one is over its limit (libs/backpressure).
func (f *Fetcher) HoldBack(ctx context.Context) error {
	var g errgroup.Group
	for _, m := range f.monitors {
		g.Go(func() error { return m.Run(ctx) })
	}
	return g.Wait()
}

// Ping checks ClickHouse (the readiness check).
func (f *Fetcher) Ping(ctx context.Context) error { return f.store.Ping(ctx) }

// KafkaCheck fails while the producer waits for the broker (readiness).
func (f *Fetcher) KafkaCheck(ctx context.Context) error { return f.producer.Check(ctx) }

// FollowSpecs reads the control topic into the crawl specifications until
// ctx is done; WaitSpecs returns once it has read the topic to its end.
func (f *Fetcher) FollowSpecs(ctx context.Context) error {
	caughtUp := func() { f.caughtUpOnce.Do(func() { close(f.caughtUp) }) }
	return crawlcontrol.FollowCaughtUp(ctx, f.cfg.Kafka, f.specs, caughtUp, func(err error) {
		f.log.Warn("skipped undecodable crawl spec", zap.Error(err))
	})
}

// WaitSpecs returns true once the crawl states published so far are known
// (FollowSpecs read the control topic to its end), or once ControlWait has
// passed, with a warning: a broken control topic does not stop the crawl.
// It returns false when ctx is done first.
func (f *Fetcher) WaitSpecs(ctx context.Context) bool {
	t := time.NewTimer(f.controlWait)
	defer t.Stop()
	select {
	case <-f.caughtUp:
	case <-t.C:
		f.log.Warn("started before the crawl states were read", zap.Duration("waited", f.controlWait))
	case <-ctx.Done():
		return false
	}
	return true
}

// CountBudgets counts, every --budget-refresh until ctx is done, the pages
// every fetcher charged to the page budgets of the crawls this one
// charged for (a crawl without a budget costs no query).
func (f *Fetcher) CountBudgets(ctx context.Context) error {
	return f.budget.Run(ctx, f.cfg.BudgetRefresh, func(err error) {
		f.log.Warn("page budget count failed, keeping previous counts", zap.Error(err))
	})
}

// UsesProxies reports whether requests go through the proxy pool
// (--use-proxies), which FollowProxies fills.
func (f *Fetcher) UsesProxies() bool { return f.pool != nil }

// FollowProxies reads the proxies topic into the pool until ctx is done.
func (f *Fetcher) FollowProxies(ctx context.Context) error {
	return proxies.Follow(ctx, f.cfg.Kafka, f.cfg.Kafka.Topics().Proxies, f.pool, f.log)
}

// Fetch runs the consumer group of fetch requests until ctx is done: the
// partitions' handlers finish or hand back their in-flight work and the
// offsets are committed before it returns.
func (f *Fetcher) Fetch(ctx context.Context) error { return f.group.Run(ctx) }

// Record writes the fetch outcomes the handlers queued (published pages,
// fetch-log and robots.txt rows) until ctx is done, then those still
// queued, for at most --drain-timeout.
func (f *Fetcher) Record(ctx context.Context) error { return f.recorder.Run(ctx, f.cfg.DrainTimeout) }

// Archive returns the WARC writer's loop (nil without --warc-dir): a
// drain-stage component that closes, indexes and lists the files once
// the consumer group stopped.
func (f *Fetcher) Archive() func(ctx context.Context) error {
	if f.archive == nil {
		return nil
	}
	return f.archive.Run
}

// deleteRetry is how soon a failed removal of a deleted crawl's WARC
// files is tried again when no specification changes meanwhile.
const deleteRetry = time.Minute

// DeletesArchives reports whether this fetcher archives (--warc-dir), so
// that DeleteArchives has files to remove.
func (f *Fetcher) DeletesArchives() bool { return f.archive != nil }

// DeleteArchives removes the WARC files of deleted crawls
// (crawlcontrol.Deleted) from the archive's directory, which only this
// fetcher writes: once the control topic is read to its end (crawls
// deleted while it was down; warc.Writer.DeleteCrawl finds nothing to do
// for those done already), then at every change of the specifications,
// until ctx is done. A removal that fails is logged and tried again at the
// next change or after deleteRetry.
func (f *Fetcher) DeleteArchives(ctx context.Context) error {
	if f.archive == nil || !f.WaitSpecs(ctx) {
		return nil
	}
	done := make(map[string]bool) // one entry per deleted crawl
	retry := time.NewTicker(deleteRetry)
	defer retry.Stop()
	for {
		changed := f.specs.Changed()
		var todo []string
		for _, spec := range f.specs.All() {
			if id := spec.GetCrawlId(); crawlcontrol.Deleted(spec) && !done[id] {
				todo = append(todo, id)
			}
		}
		// All at once: files of several crawls (the layout before a file
		// held one) are read once whatever the number of crawls.
		if _, err := f.archive.DeleteCrawls(ctx, todo...); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			f.log.Warn("warc files of deleted crawls not all removed, retried", telemetry.Crawl(strings.Join(todo, ",")), zap.Error(err))
		} else {
			for _, id := range todo {
				done[id] = true
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-retry.C:
		}
	}
}

// Writers returns the ClickHouse batch writers: the fetch log and
// robots.txt.
func (f *Fetcher) Writers() []Writer { return f.writers }

// Close closes the Kafka writer, the HTTP fetcher's idle connections and
// ClickHouse, logging what fails; call it once every part has stopped.
func (f *Fetcher) Close() {
	if f.offsets != nil {
		f.offsets.Close()
	}
	if f.producer != nil {
		if err := f.producer.Close(); err != nil {
			f.log.Warn("close kafka writer failed, ignored", zap.Error(err))
		}
	}
	if f.fetcher != nil {
		f.fetcher.Close()
	}
	if f.browser != nil {
		if err := f.browser.Close(); err != nil {
			f.log.Warn("close the browser", zap.Error(err))
		}
	}
	if f.store != nil {
		if err := f.store.Close(); err != nil {
			f.log.Warn("close clickhouse", zap.Error(err))
		}
	}
}

// startBrowser gives co a browser for the crawls' pages that need one:
// started now with --render auto or always (a fleet that renders fails to
// start without Chromium), and at the first page that needs it with
// --render never, so that a crawl whose spec asks for rendering gets it
// from a fleet that does not render by default. Without Chromium on such
// a fleet, those pages are kept as fetched and counted
// (render_verdicts_total{reason="no_browser"}).
func (f *Fetcher) startBrowser(ctx context.Context, cfg config.Config, co *consume.Options) error {
	mode := cfg.Render.Render()
	co.Render = mode
	opts := cfg.Render.Options(cfg.UserAgent)
	opts.Lazy = mode == rendersniff.Never
	// Chromium lives as long as the fetcher, not the start-up context.
	b, err := browser.New(context.WithoutCancel(ctx), opts)
	switch {
	case err != nil && mode != rendersniff.Never:
		return fmt.Errorf("start the browser for --render %s: %w", mode, err)
	case err != nil:
		f.log.Info("no browser: the pages of crawls whose spec asks for rendering are kept as fetched", zap.Error(err))
		return nil
	}
	f.browser, co.Renderer = b, b
	return nil
}
