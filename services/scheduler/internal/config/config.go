// Package config is the scheduler's configuration: its flags (and their
// CRAWLER_* variables), defaults and validation, and how a crawl's
// specification overrides them (spec.go).
package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Config is the scheduler's whole configuration.
type Config struct {
	Telemetry  telemetry.Config
	Kafka      kafkaio.Config
	ClickHouse chstore.Config

	MaxDepth uint  // deepest link depth admitted
	MaxPages int64 // page budget per crawl, 0 = unlimited
	// BudgetAdmitFactor: a crawl with a page budget of N pages has at
	// most ceil(factor × N) URLs admitted; the fetchers charge the pages.
	BudgetAdmitFactor float64
	BudgetRefresh     time.Duration
	MaxBatch          int // records per batch
	MaxInFlight       int // unacked records per partition before reading pauses
	HostQuota         int
	QuotaWindow       time.Duration
	RevisitTick       time.Duration
	// SeenFlush is the flush interval of the url_seen and url_events
	// writers (the other tables take ClickHouse.FlushInterval).
	SeenFlush time.Duration
}

// RegisterFlags binds the fields to flags with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	fs.UintVar(&c.MaxDepth, "max-depth", crawlsettings.DefaultMaxDepth, "deepest link depth admitted (seeds are depth 0)")
	fs.Int64Var(&c.MaxPages, "max-pages", 0, "page budget of a crawl whose spec sets no limits.max_pages, 0 = unlimited; charged by the fetchers (give them the same --max-pages), which are sent at most --budget-admit-factor times as many URLs")
	fs.Float64Var(&c.BudgetAdmitFactor, "budget-admit-factor", DefaultBudgetAdmitFactor, "URLs admitted per page of a crawl's page budget, at most (≥ 1; approximate with several schedulers, see README)")
	fs.DurationVar(&c.BudgetRefresh, "budget-refresh", 5*time.Second, "how often the per-crawl admitted count is read from ClickHouse when --max-pages is set")
	fs.IntVar(&c.MaxBatch, "max-batch", kafkaio.DefaultMaxBatch, "discovered URLs decided, produced and persisted together")
	fs.IntVar(&c.MaxInFlight, "max-in-flight", DefaultMaxInFlight, "unacknowledged records per partition before reading pauses")
	fs.IntVar(&c.HostQuota, "host-quota", 0, "fetch requests released per host per --host-quota-window, the rest waits in the frontier table (0 = unlimited)")
	fs.DurationVar(&c.QuotaWindow, "host-quota-window", 10*time.Second, "window of --host-quota (also how often held URLs of paused crawls are checked)")
	fs.DurationVar(&c.RevisitTick, "revisit-tick", time.Second, "how often each partition's due revisits are produced")
	fs.DurationVar(&c.SeenFlush, "seen-flush-interval", DefaultSeenFlush, "longest wait before buffered url_seen and url_events rows are inserted (also at once when a partition's window of --max-in-flight records fills); the other tables take --clickhouse-flush-interval")
}

// SeenBatch returns the batching of the url_seen and url_events writers.
func (c Config) SeenBatch() chstore.BatchOptions {
	o := c.ClickHouse.Batch()
	o.FlushInterval = c.SeenFlush
	return o
}

// Fleet returns the flags a crawl's specification may override
// (crawlsettings.Resolve).
func (c Config) Fleet() crawlsettings.Fleet {
	return crawlsettings.Fleet{MaxPages: c.MaxPages, MaxDepth: uint32(c.MaxDepth)}
}

// DefaultBudgetAdmitFactor is --budget-admit-factor's default: twice the
// page budget admitted leaves the fetchers room to keep each host's
// shallowest pages at the cost of one url_seen row (and one fetch_log row
// of kind budget_exhausted) per surplus URL, while a crawl's admissions
// stay bounded by its budget.
const DefaultBudgetAdmitFactor = 2

// DefaultMaxInFlight is --max-in-flight's default. A partition acks its
// records once their url_seen rows are inserted, and its writers insert
// when its window fills (kafkaio.GroupConfig.OnFull) or at their flush
// interval, whichever comes first: the window is the size of the batches
// at full rate. At kafkaio's 1 000 and 2 s flushes (before OnFull), a
// partition decided 500 URLs a second, 4 000 for the 8 of a local crawl,
// which a crawl of 20 000 hosts (parsers publishing about 10 links a page
// at 400 pages a second) outran until the fetchers paused for it. Each
// record in flight costs its rows until the insert, a few hundred bytes.
const DefaultMaxInFlight = 8000

// DefaultSeenFlush is --seen-flush-interval's default. The fetch requests
// of a batch are out before its url_seen and url_events rows are inserted
// (the rows only hold its acks back), and the writers insert at once when
// a partition's window fills, so a long interval costs no rate, only a
// later commit: the scheduler's lag (--max-scheduler-lag, 30 s) stays
// under 10 s and a batch's wait. ClickHouse 18.16 merges the whole of a
// small table into each of its new parts (its merge selector adds a fixed
// 5 MiB to every part's size), so the merge work of url_seen and
// url_events grows with inserts × table size: in a crawl of 228 000
// requests, 2 s made 438 parts of them and 8.7 M rows merged for 278 000
// inserted; 10 s made 100 parts and 1.2 M. The frontier, the revisit
// schedule and the change history keep --clickhouse-flush-interval (2 s):
// what they hold is read back (deferred URLs released by the pump, pages
// revisited within seconds).
const DefaultSeenFlush = 10 * time.Second

// AdmitCeiling returns the URLs a crawl with a page budget of pages may
// have admitted: ceil(factor × pages), 0 (unlimited) for 0.
func AdmitCeiling(pages int64, factor float64) int64 {
	if pages <= 0 {
		return 0
	}
	c := math.Ceil(float64(pages) * factor)
	if c >= math.MaxInt64 {
		return math.MaxInt64
	}
	return max(int64(c), pages)
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate()}
	if c.MaxDepth > 65535 {
		errs = append(errs, fmt.Errorf("max-depth: %d above 65535", c.MaxDepth))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("max-pages: %d must not be negative", c.MaxPages))
	}
	if !(c.BudgetAdmitFactor >= 1 && c.BudgetAdmitFactor <= 1000) {
		errs = append(errs, fmt.Errorf("budget-admit-factor: %v not in [1, 1000]", c.BudgetAdmitFactor))
	}
	if c.BudgetRefresh <= 0 {
		errs = append(errs, fmt.Errorf("budget-refresh: %v must be positive", c.BudgetRefresh))
	}
	if c.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("max-batch: %d must be positive", c.MaxBatch))
	}
	if c.SeenFlush <= 0 {
		errs = append(errs, fmt.Errorf("seen-flush-interval: %v must be positive", c.SeenFlush))
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

// Load parses args and the environment into a validated Config
// (errors.Is(err, flag.ErrHelp) after -h).
func Load(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	return service.Load[Config]("scheduler", args, lookupEnv)
}
