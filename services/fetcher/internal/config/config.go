// Package config is the fetcher's configuration: the shared telemetry,
// Kafka and ClickHouse settings plus the fetch, politeness and proxy
// settings, from flags and CRAWLER_* environment variables.
package config

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/warc"
)

// Config is the whole fetcher configuration.
type Config struct {
	Telemetry  telemetry.Config
	Kafka      kafkaio.Config
	ClickHouse chstore.Config

	InstanceID              string         // --instance-id (default hostname-pid)
	Workers                 int            // --workers: concurrent requests (default 32)
	MaxInflightPerPartition int            // --max-inflight-per-partition: unacked records per partition, those waiting for their insert apart (default 1000)
	Delay                   time.Duration  // --delay: minimum end-to-start gap per host (default 1s)
	MaxCrawlDelay           time.Duration  // --max-crawl-delay: cap of robots.txt Crawl-delay (default 30s)
	DelayResponseFactor     float64        // --delay-response-factor: host gap ≥ factor × last response time (0 = off)
	ServerDelay             time.Duration  // --server-delay: gap per server shared by hosts of one IP (0 = hosts independent)
	ConnectTimeout          time.Duration  // --connect-timeout (default 10s)
	ResponseHeaderTimeout   time.Duration  // --response-header-timeout (default 15s)
	FetchTimeout            time.Duration  // --fetch-timeout: whole request (default 30s)
	MaxBodyBytes            int64          // --max-body-bytes (default 2 MiB)
	MaxDocumentBytes        int64          // --max-document-bytes (default 8 MiB)
	UserAgent               string         // --user-agent
	AllowPrivate            bool           // --allow-private: allow loopback/private targets (local crawls, tests)
	UseProxies              bool           // --use-proxies: fetch through the proxy pool
	DrainTimeout            time.Duration  // --drain-timeout: how long a closing partition waits for in-flight fetches (default 5s)
	MinTransferRate         int64          // --min-transfer-rate: bytes/s over each --transfer-rate-window (default 1024; 0 disables)
	TransferRateWindow      time.Duration  // --transfer-rate-window (default 10s)
	MaxAttempts             int            // --max-attempts: attempts per URL for transient failures (default 3)
	RetryBackoff            time.Duration  // --retry-backoff: back-off before the second attempt, doubled per attempt (default 5s)
	MaxRetryBackoff         time.Duration  // --max-retry-backoff (default 10m)
	MaxRedirects            int            // --max-redirects: length of the redirect chains followed through the scheduler (default 5; 0: no target followed)
	MaxHostQueue            int            // --max-host-queue: requests buffered per host before the surplus is deferred (default 100)
	HoldHorizon             time.Duration  // --hold-horizon: requests due later than this are deferred, not held (default 2m)
	PersistHostState        bool           // --persist-host-state: publish and load per-host politeness state (default true)
	PersistRobots           bool           // --persist-robots: store fetched robots.txt in ClickHouse and load it on assignment (default true)
	ReadbackWindow          time.Duration  // --readback-window: FetchedPages read back at assignment, this long before a partition's last one (default 10s; 0 disables)
	CredentialsFile         string         // --credentials-file: JSON of per-site basic-auth credentials (empty: none)
	Cookies                 bool           // --cookies: keep and send back each site's cookies
	MaxCookieHosts          int            // --max-cookie-hosts: hosts whose cookies are kept, least recently used dropped (default 4096)
	MaxCookiesPerHost       int            // --max-cookies-per-host: cookies kept per host (default 50)
	DNSCacheTTL             time.Duration  // --dns-cache-ttl: how long a host name's addresses are reused (default 5m)
	DNSCacheSize            int            // --dns-cache-size: host names cached (default 10000)
	MaxIdleConns            int            // --max-idle-conns: idle connections kept, one per host (default 4096)
	IdleConnTimeout         time.Duration  // --idle-conn-timeout: an idle connection unused this long is closed (default 15s)
	PauseRecheck            time.Duration  // --pause-recheck: requests of a paused crawl are deferred by this (default 5s)
	MaxPages                int64          // --max-pages: page budget of a crawl whose spec sets none (0 = unlimited)
	BudgetRefresh           time.Duration  // --budget-refresh: how often page budgets are counted in fetch_log (default 5s)
	Warc                    warc.Config    // --warc-*: the WARC archive (off by default)
	Render                  browser.Config // --render, --render-*: pages rendered in headless Chromium (never by default)
	MaxDownstreamLag        time.Duration  // --max-downstream-lag: age of the oldest fetched page the parser has yet to store at which new requests pause (default 15s; 0: never)
	MaxSchedulerLag         time.Duration  // --max-scheduler-lag: age of the oldest discovered link the scheduler has yet to decide at which new requests pause (default 30s; 0: never)
}

// DefaultMaxDownstreamLag is the default of --max-downstream-lag: a parser
// that keeps up stores a page within its flush interval (5 s) and the
// time its batches wait; the fetched pages then wait at most about 16 s
// (15 s, a second between two measures), whatever the rates.
const DefaultMaxDownstreamLag = 15 * time.Second

// DefaultMaxSchedulerLag is the default of --max-scheduler-lag: a
// scheduler that keeps up decides a link within its flush interval (10 s)
// and its batches' wait; past 30 s it is the crawl's slowest stage, and
// what waits for it grows with every page fetched.
const DefaultMaxSchedulerLag = 30 * time.Second

// DefaultClickHouseFlush is the fetcher's --clickhouse-flush-interval
// default. A request is acked once its fetch_log row is inserted. Its
// partition's window (--max-inflight-per-partition) holds the requests
// waiting for their turn; those waiting for the insert wait beside it,
// up to two windows more (app.settlingFor), so the fetcher does not
// flush whenever the window fills (kafkaio.GroupConfig.OnFull), as the
// parser and the scheduler do, but when a window's worth of a
// partition's requests waits for the insert (consume.Options.FlushAt),
// and otherwise the interval is what its rows wait. Each insert of
// fetch_log is a part of it and of its two rollups, which ClickHouse
// 18.16 merges whole into the next while they are small (its merge
// selector adds a fixed 5 MiB to every part's size).
// Five seconds: at 1 000 requests a second over eight partitions, about
// 600 of a partition's requests wait for the insert, and a partition of
// a few busy hosts reaches the mark and has its insert go sooner.
const DefaultClickHouseFlush = 5 * time.Second

// DefaultReadbackWindow is the default of --readback-window: five times
// the default ClickHouse flush interval (DefaultClickHouseFlush), so
// rows of a healthy ClickHouse are never missed.
const DefaultReadbackWindow = 5 * DefaultClickHouseFlush

// RegisterFlags binds every field to a flag with its default.
// defaultInstance is the default of --instance-id.
func (c *Config) RegisterFlags(fs *flag.FlagSet, defaultInstance string) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlagsFlushing(fs, DefaultClickHouseFlush)
	c.Warc.RegisterFlags(fs)
	c.Render.RegisterFlags(fs)
	fs.StringVar(&c.InstanceID, "instance-id", defaultInstance, "instance id written to fetch_log.fetcher")
	fs.IntVar(&c.Workers, "workers", 32, "concurrent requests across all partitions")
	fs.IntVar(&c.MaxInflightPerPartition, "max-inflight-per-partition", 1000, "unacked fetch requests per partition before reading pauses; those waiting only for their fetch-log insert wait beside it, up to twice as many more")
	fs.DurationVar(&c.Delay, "delay", politeness.DefaultDelay, "minimum delay from the end of a request to a host to the start of the next")
	fs.DurationVar(&c.MaxCrawlDelay, "max-crawl-delay", politeness.DefaultMaxCrawlDelay, "cap of a robots.txt Crawl-delay")
	fs.Float64Var(&c.DelayResponseFactor, "delay-response-factor", 0, "when > 0, wait at least this multiple of a host's last response time between its requests (capped by max-crawl-delay)")
	fs.DurationVar(&c.ServerDelay, "server-delay", 0, "when > 0, hosts that resolve to one IP address (IPv6: one /64) are one server: one request at a time across them, at least this gap between two (0: hosts are independent)")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", httpfetch.DefaultConnectTimeout, "TCP connect and TLS handshake timeout")
	fs.DurationVar(&c.ResponseHeaderTimeout, "response-header-timeout", httpfetch.DefaultResponseHeaderTimeout, "timeout waiting for response headers")
	fs.DurationVar(&c.FetchTimeout, "fetch-timeout", httpfetch.DefaultFetchTimeout, "total timeout of one request including the body")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", httpfetch.DefaultMaxBodyBytes, "body size cap; longer bodies are truncated")
	fs.Int64Var(&c.MaxDocumentBytes, "max-document-bytes", httpfetch.DefaultMaxDocumentBytes, "body size cap of a document a crawl keeps beyond HTML (PDF, office files: its spec's documents.content_types); at most the broker's --kafka-max-message-bytes less 64 KiB, never below --max-body-bytes")
	fs.StringVar(&c.UserAgent, "user-agent", httpfetch.DefaultUserAgent, "User-Agent header; its product token is matched in robots.txt")
	fs.BoolVar(&c.AllowPrivate, "allow-private", false, "allow loopback, private and link-local targets (local crawls and tests)")
	fs.BoolVar(&c.UseProxies, "use-proxies", false, "fetch through the proxies of the proxy pool topic")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 5*time.Second, "how long a revoked or stopping partition waits for in-flight fetches")
	fs.Int64Var(&c.MinTransferRate, "min-transfer-rate", httpfetch.DefaultMinTransferRate, "minimum body transfer rate in bytes/s over each --transfer-rate-window; 0 disables")
	fs.DurationVar(&c.TransferRateWindow, "transfer-rate-window", httpfetch.DefaultTransferRateWindow, "window of the minimum transfer rate")
	fs.IntVar(&c.MaxAttempts, "max-attempts", outcome.DefaultMaxAttempts, "attempts per URL for transient failures (1 disables retries)")
	fs.DurationVar(&c.RetryBackoff, "retry-backoff", outcome.DefaultRetryBackoff, "back-off before the second attempt, doubled per attempt, with jitter")
	fs.DurationVar(&c.MaxRetryBackoff, "max-retry-backoff", outcome.DefaultMaxRetryBackoff, "cap of the retry back-off")
	fs.IntVar(&c.MaxRedirects, "max-redirects", outcome.DefaultMaxRedirects, "redirects followed per chain; a redirect target goes back through the scheduler like a link (0: targets are recorded, never followed)")
	fs.IntVar(&c.MaxHostQueue, "max-host-queue", decide.DefaultMaxHostQueue, "requests buffered per host; the surplus is deferred to the fetch topic")
	fs.StringVar(&c.CredentialsFile, "credentials-file", "", `JSON file of per-site basic-auth credentials: {"host[:port]": {"username": "...", "password": "...", "allow_http": false}}`)
	fs.BoolVar(&c.Cookies, "cookies", false, "keep the cookies each site sets and send them back to it")
	fs.BoolVar(&c.PersistHostState, "persist-host-state", true, "publish per-host politeness state to the host-state topic and load it when a partition is assigned")
	fs.BoolVar(&c.PersistRobots, "persist-robots", true, "store every fetched robots.txt in the robots_txt table and load a partition's unexpired ones when it is assigned")
	fs.IntVar(&c.MaxCookieHosts, "max-cookie-hosts", httpfetch.DefaultMaxCookieHosts, "hosts whose cookies are kept (least recently used dropped first)")
	fs.IntVar(&c.MaxCookiesPerHost, "max-cookies-per-host", httpfetch.DefaultMaxCookiesPerHost, "cookies kept per host; new ones beyond are ignored")
	fs.DurationVar(&c.DNSCacheTTL, "dns-cache-ttl", httpfetch.DefaultDNSCacheTTL, "how long the addresses of a host name are reused")
	fs.IntVar(&c.DNSCacheSize, "dns-cache-size", httpfetch.DefaultDNSCacheSize, "host names kept in the DNS cache")
	fs.IntVar(&c.MaxIdleConns, "max-idle-conns", httpfetch.DefaultMaxIdleConns, "idle connections kept for reuse, at most one per host: the hosts the fetcher has in flight (each costs about 13 KB)")
	fs.DurationVar(&c.IdleConnTimeout, "idle-conn-timeout", httpfetch.DefaultIdleConnTimeout, "an idle connection unused this long is closed: the hosts the crawl still visits keep theirs")
	fs.DurationVar(&c.PauseRecheck, "pause-recheck", decide.DefaultPauseRecheck, "requests of a paused crawl are deferred to the fetch topic by this")
	fs.Int64Var(&c.MaxPages, "max-pages", 0, "pages fetched per crawl whose spec sets no limits.max_pages, 0 = unlimited; the scheduler's --max-pages should match (see README)")
	fs.DurationVar(&c.BudgetRefresh, "budget-refresh", 5*time.Second, "how often the pages every fetcher charged to page budgets are counted in ClickHouse")
	fs.DurationVar(&c.ReadbackWindow, "readback-window", DefaultReadbackWindow, "when a partition is assigned, the FetchedPages produced this long before its last one are read back, so that attempts its previous owner published but had not recorded in fetch_log when it died (rows are inserted up to --clickhouse-flush-interval later) are not fetched again (0 disables)")
	fs.DurationVar(&c.MaxDownstreamLag, "max-downstream-lag", DefaultMaxDownstreamLag, "age of the oldest fetched page the parser has not stored yet (its lag on the fetched-pages topic) at which new requests pause, until the parser, at its rate of the last seconds, would store what waits within a quarter of it: the fetch rate follows what the parser and ClickHouse take (0: never pause)")
	fs.DurationVar(&c.MaxSchedulerLag, "max-scheduler-lag", DefaultMaxSchedulerLag, "age of the oldest discovered link the scheduler has not decided yet (its lag on the discovered topic) at which new requests pause, until the scheduler, at its rate of the last seconds, would decide what waits within a quarter of it: what waits for the scheduler stays bounded (0: never pause)")
	fs.DurationVar(&c.HoldHorizon, "hold-horizon", decide.DefaultHoldHorizon, "requests due later than this are deferred to the fetch topic instead of held in memory")
}

// Validate reports every configuration error.
func (c Config) Validate() error {
	var errs []error
	for _, v := range []interface{ Validate() error }{c.Telemetry, c.Kafka, c.ClickHouse, c.Warc, c.Render} {
		if err := v.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.InstanceID == "" {
		errs = append(errs, errors.New("instance-id: must not be empty"))
	}
	if c.Workers < 1 || c.Workers > 10000 {
		errs = append(errs, fmt.Errorf("workers: %d not in [1, 10000]", c.Workers))
	}
	if c.MaxInflightPerPartition < 1 {
		errs = append(errs, fmt.Errorf("max-inflight-per-partition: %d must be positive", c.MaxInflightPerPartition))
	}
	if c.MaxDownstreamLag < 0 {
		errs = append(errs, fmt.Errorf("max-downstream-lag: %s must not be negative (0: never pause)", c.MaxDownstreamLag))
	}
	if c.MaxSchedulerLag < 0 {
		errs = append(errs, fmt.Errorf("max-scheduler-lag: %s must not be negative (0: never pause)", c.MaxSchedulerLag))
	}
	positive := map[string]time.Duration{
		"delay": c.Delay, "connect-timeout": c.ConnectTimeout, "response-header-timeout": c.ResponseHeaderTimeout,
		"fetch-timeout": c.FetchTimeout, "drain-timeout": c.DrainTimeout,
	}
	for _, name := range []string{"delay", "connect-timeout", "response-header-timeout", "fetch-timeout", "drain-timeout"} {
		if positive[name] <= 0 {
			errs = append(errs, fmt.Errorf("%s: %v must be positive", name, positive[name]))
		}
	}
	if c.DelayResponseFactor < 0 || c.DelayResponseFactor > 100 {
		errs = append(errs, fmt.Errorf("delay-response-factor: %v not in [0, 100]", c.DelayResponseFactor))
	}
	if c.ServerDelay < 0 {
		errs = append(errs, fmt.Errorf("server-delay: %v must not be negative", c.ServerDelay))
	}
	if c.MaxCrawlDelay < c.Delay {
		errs = append(errs, fmt.Errorf("max-crawl-delay: %v is below delay %v", c.MaxCrawlDelay, c.Delay))
	}
	if c.MinTransferRate < 0 {
		errs = append(errs, fmt.Errorf("min-transfer-rate: %d must not be negative", c.MinTransferRate))
	}
	if c.TransferRateWindow <= 0 || c.RetryBackoff <= 0 || c.HoldHorizon <= 0 {
		errs = append(errs, fmt.Errorf("transfer-rate-window, retry-backoff, hold-horizon: %v, %v, %v must be positive",
			c.TransferRateWindow, c.RetryBackoff, c.HoldHorizon))
	}
	if c.MaxIdleConns < 1 || c.IdleConnTimeout <= 0 {
		errs = append(errs, fmt.Errorf("max-idle-conns, idle-conn-timeout: %d, %s must be positive", c.MaxIdleConns, c.IdleConnTimeout))
	}
	if c.MaxCookieHosts < 1 || c.MaxCookiesPerHost < 1 || c.DNSCacheSize < 1 {
		errs = append(errs, fmt.Errorf("max-cookie-hosts, max-cookies-per-host, dns-cache-size: %d, %d, %d must be positive",
			c.MaxCookieHosts, c.MaxCookiesPerHost, c.DNSCacheSize))
	}
	if c.ReadbackWindow < 0 {
		errs = append(errs, fmt.Errorf("readback-window: %v must not be negative", c.ReadbackWindow))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("max-pages: %d must not be negative", c.MaxPages))
	}
	if c.BudgetRefresh <= 0 {
		errs = append(errs, fmt.Errorf("budget-refresh: %v must be positive", c.BudgetRefresh))
	}
	if c.DNSCacheTTL <= 0 || c.PauseRecheck <= 0 {
		errs = append(errs, fmt.Errorf("dns-cache-ttl, pause-recheck: %v, %v must be positive", c.DNSCacheTTL, c.PauseRecheck))
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("max-retry-backoff: %v is below retry-backoff %v", c.MaxRetryBackoff, c.RetryBackoff))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 100 {
		errs = append(errs, fmt.Errorf("max-attempts: %d not in [1, 100]", c.MaxAttempts))
	}
	if c.MaxRedirects < 0 || c.MaxRedirects > 20 {
		errs = append(errs, fmt.Errorf("max-redirects: %d not in [0, 20]", c.MaxRedirects))
	}
	if c.MaxHostQueue < 1 {
		errs = append(errs, fmt.Errorf("max-host-queue: %d must be positive", c.MaxHostQueue))
	}
	if c.MaxBodyBytes < 1 {
		errs = append(errs, fmt.Errorf("max-body-bytes: %d must be positive", c.MaxBodyBytes))
	}
	if c.MaxDocumentBytes < 1 || c.MaxDocumentBytes > int64(c.Kafka.MaxMessageBytes)-64<<10 {
		errs = append(errs, fmt.Errorf("max-document-bytes: %d must be positive and at most kafka-max-message-bytes less 64 KiB (%d): a fetched page is one record", c.MaxDocumentBytes, c.Kafka.MaxMessageBytes-64<<10))
	}
	if identity.ProductToken(c.UserAgent) == "" {
		errs = append(errs, fmt.Errorf("user-agent: %q does not start with a product token", c.UserAgent))
	}
	return errors.Join(errs...)
}

// Load parses args and the environment into a validated Config.
// flag.ErrHelp is returned (wrapped) for -h.
func Load(args []string, lookupEnv func(string) (string, bool), defaultInstance string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("fetcher", flag.ContinueOnError)
	c.RegisterFlags(fs, defaultInstance)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("validate config: %w", err)
	}
	return c, nil
}

// PageBudget returns a crawl's page budget: its specification's
// limits.max_pages when set, else maxPages (--max-pages); 0 = unlimited.
func PageBudget(maxPages int64, specs *crawlcontrol.Specs) func(crawlID string) int64 {
	fleet := crawlsettings.Fleet{MaxPages: maxPages}
	return func(crawlID string) int64 { return crawlsettings.Resolve(specs.Get(crawlID), fleet).Pages }
}
