// Package config is the proxypool's configuration: its flags (and their
// CRAWLER_* variables), defaults and validation.
package config

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
)

// Config is the proxypool's configuration.
type Config struct {
	Telemetry   telemetry.Config
	Kafka       kafkaio.Config
	ProxiesFile string // flag proxies-file: empty runs the service idle
	Check       check.Config
	Refresh     refresh.Config
	APIAddr     string          // flag api-addr: listen address of GET /proxies
	Sources     envflag.Strings // flag source, repeatable: proxy-list URLs or files to harvest
	SourceTO    time.Duration   // flag source-timeout
	Pool        pool.Config     // max-size, evict-after, ban-hosts, ban-below
	Feedback    bool            // flag feedback: consume the fetchers' proxy feedback
}

// RegisterFlags binds the fields to flags with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
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

// Validate reports every configuration error.
func (c Config) Validate() error {
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

// Load parses args and the environment into a validated Config
// (errors.Is(err, flag.ErrHelp) after -h).
func Load(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	return service.Load[Config]("proxypool", args, lookupEnv)
}
