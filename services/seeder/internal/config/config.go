// Package config is the seeder's configuration: the flags (and their
// CRAWLER_* variables), defaults and validation of the one-shot seeder
// (Seed) and of `seeder serve` (Serve).
package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// Seed configures the one-shot `seeder`: seeds, sitemaps, a crawl spec.
type Seed struct {
	Telemetry telemetry.Config
	Kafka     kafkaio.Config
	CrawlID   string          // flag crawl-id (required)
	Seeds     envflag.Strings // flag seed, repeatable
	SeedsFile string          // flag seeds-file: path, or "-" for standard input
	// Sitemaps (flag sitemaps) also seeds from the sitemaps of every seed
	// host (robots.txt Sitemap lines and /sitemap.xml).
	Sitemaps    bool
	SitemapURLs envflag.Strings // flag sitemap: an explicit sitemap (repeatable)
	Sitemap     sitemaps.Config // flags sitemap-*, allow-private
	// SpecFile (flag spec) is a crawl request as POST /v1/crawls takes it;
	// "-" reads standard input.
	SpecFile string
	// ClickHouse (flags clickhouse-*) is read only by a crawl with a
	// previous crawl (the spec's previous_crawl_id): that crawl's pages
	// are seeded from its fetch log.
	ClickHouse chstore.Config
}

// RegisterFlags binds the fields to flags with their defaults.
func (c *Seed) RegisterFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	fs.StringVar(&c.CrawlID, "crawl-id", "", "id of the crawl the seeds start (required; letters, digits, '.', '_', '-'; at most 64)")
	fs.Var(&c.Seeds, "seed", "seed URL (repeatable)")
	fs.StringVar(&c.SeedsFile, "seeds-file", "", `file of seed URLs, one per line, # comments; "-" reads standard input`)
	fs.BoolVar(&c.Sitemaps, "sitemaps", false, "also seed from the sitemaps of every seed host (robots.txt Sitemap lines and /sitemap.xml)")
	fs.Var(&c.SitemapURLs, "sitemap", "sitemap URL to seed from (repeatable)")
	RegisterSitemapFlags(fs, &c.Sitemap)
	c.ClickHouse.RegisterFlags(fs)
	fs.StringVar(&c.SpecFile, "spec", "", `crawl request as JSON, the body of POST /v1/crawls ("-" reads standard input): its scope, limits, politeness and revisit policy are published to the control topic before the seeds, its seeds are seeded with the flags' ones; --crawl-id overrides its crawl_id`)
}

// RegisterSitemapFlags registers the bounds of sitemap discovery, with
// their defaults.
func RegisterSitemapFlags(fs *flag.FlagSet, c *sitemaps.Config) {
	*c = sitemaps.DefaultConfig()
	fs.DurationVar(&c.Timeout, "sitemap-timeout", c.Timeout, "timeout of one robots.txt or sitemap request")
	fs.DurationVar(&c.Delay, "sitemap-delay", c.Delay, "delay between two sitemap requests to the same host")
	fs.Int64Var(&c.MaxBodyBytes, "sitemap-max-bytes", c.MaxBodyBytes, "largest sitemap, compressed and uncompressed")
	fs.IntVar(&c.MaxSitemaps, "sitemap-max-files", c.MaxSitemaps, "most sitemaps fetched per run or request")
	fs.IntVar(&c.MaxDepth, "sitemap-max-depth", c.MaxDepth, "deepest nesting of sitemap indexes followed")
	fs.IntVar(&c.MaxURLs, "sitemap-max-urls", c.MaxURLs, "most URLs taken from sitemaps per run or request")
	fs.BoolVar(&c.AllowPrivate, "allow-private", false, "let sitemap discovery fetch from loopback, private and link-local addresses")
}

// MaxCrawlID is the longest crawl id accepted.
const MaxCrawlID = 64

// Validate checks the flags; specSeeds tells whether a --spec file brings
// seeds of its own.
func (c Seed) Validate(specSeeds bool) error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate()}
	switch {
	case c.CrawlID == "":
		errs = append(errs, errors.New("validate crawl-id: required"))
	case len(c.CrawlID) > MaxCrawlID:
		errs = append(errs, fmt.Errorf("validate crawl-id: %d bytes, want at most %d", len(c.CrawlID), MaxCrawlID))
	case strings.IndexFunc(c.CrawlID, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0:
		errs = append(errs, fmt.Errorf("validate crawl-id %q: want only letters, digits, '.', '_' and '-'", c.CrawlID))
	}
	if len(c.Seeds) == 0 && c.SeedsFile == "" && len(c.SitemapURLs) == 0 && !specSeeds {
		errs = append(errs, errors.New("validate seeds: give --seed or --seeds-file (or --sitemap, or seeds in --spec)"))
	}
	if c.Sitemaps || len(c.SitemapURLs) > 0 {
		errs = append(errs, c.Sitemap.Validate())
	}
	errs = append(errs, c.ClickHouse.Validate())
	return errors.Join(errs...)
}

// Serve configures `seeder serve`, the long-running crawl-jobs API.
type Serve struct {
	Telemetry    telemetry.Config
	Kafka        kafkaio.Config
	ClickHouse   chstore.Config
	APIAddr      string          // flag api-addr
	APIToken     string          // flag api-token (required)
	MaxBodyBytes int64           // flag api-max-body-bytes
	Sitemap      sitemaps.Config // flags sitemap-*, allow-private
	// ConsoleRefresh is how often the operator console's pages of a
	// running crawl refresh (flag console-refresh).
	ConsoleRefresh time.Duration
	// Fleet is the services' flags a crawl's specification may override:
	// the fetchers' --delay and --max-crawl-delay, the fetchers' and the
	// schedulers' --max-pages, the schedulers' --max-depth (flags delay,
	// max-crawl-delay, max-pages, max-depth; CRAWLER_DELAY,
	// CRAWLER_MAX_CRAWL_DELAY, CRAWLER_MAX_PAGES and CRAWLER_MAX_DEPTH as
	// the services read them), and the fetchers' --render (CRAWLER_RENDER),
	// for the settings the console says apply.
	Fleet crawlsettings.Fleet
}

// RegisterFlags binds the fields to flags with their defaults.
func (c *Serve) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.Fleet.Politeness.Delay, "delay", hostdelay.DefaultDelay, "the fetchers' --delay (the console shows the delay that applies to a host)")
	fs.DurationVar(&c.Fleet.Politeness.MaxCrawlDelay, "max-crawl-delay", hostdelay.DefaultMaxCrawlDelay, "the fetchers' --max-crawl-delay (the console shows the delay that applies to a host)")
	fs.Int64Var(&c.Fleet.MaxPages, "max-pages", 0, "the fetchers' and schedulers' --max-pages (the console shows the page budget that applies to a crawl whose spec sets none)")
	c.Fleet.MaxDepth = crawlsettings.DefaultMaxDepth
	fs.Func("max-depth", fmt.Sprintf("the schedulers' --max-depth (the console shows the depth that applies to a crawl whose spec sets none; default %d)", crawlsettings.DefaultMaxDepth), func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		c.Fleet.MaxDepth = uint32(n)
		return err
	})
	fs.Func("render", "the fetchers' --render: never (default), auto or always (the console shows the render mode that applies to a crawl whose spec sets none)", func(v string) error {
		for _, m := range []crawlv1.RenderMode{crawlv1.RenderMode_RENDER_MODE_NEVER, crawlv1.RenderMode_RENDER_MODE_AUTO, crawlv1.RenderMode_RENDER_MODE_ALWAYS} {
			if jobs.RenderModeName(m) == v {
				c.Fleet.Render = m
				return nil
			}
		}
		return fmt.Errorf("%q: want never, auto or always", v)
	})
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
	fs.StringVar(&c.APIAddr, "api-addr", "127.0.0.1:8480", "address of the crawl-jobs HTTP API")
	fs.StringVar(&c.APIToken, "api-token", "", "bearer token the API requires (required; prefer CRAWLER_API_TOKEN)")
	fs.Int64Var(&c.MaxBodyBytes, "api-max-body-bytes", api.DefaultMaxBodyBytes, "largest accepted request body")
	fs.DurationVar(&c.ConsoleRefresh, "console-refresh", 5*time.Second, "how often the operator console's pages of a running crawl refresh (whole seconds, at least 1s)")
	RegisterSitemapFlags(fs, &c.Sitemap)
}

// MinTokenBytes is the shortest accepted API token.
const MinTokenBytes = 16

// Validate reports every configuration error.
func (c Serve) Validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate(), c.Sitemap.Validate()}
	if c.APIAddr == "" {
		errs = append(errs, errors.New("validate api-addr: required"))
	}
	if len(c.APIToken) < MinTokenBytes {
		errs = append(errs, fmt.Errorf("validate api-token: %d bytes, want at least %d", len(c.APIToken), MinTokenBytes))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("validate api-max-body-bytes: %d, want at least 1024", c.MaxBodyBytes))
	}
	if c.Fleet.Politeness.Delay <= 0 || c.Fleet.Politeness.MaxCrawlDelay < c.Fleet.Politeness.Delay {
		errs = append(errs, fmt.Errorf("validate delay %v and max-crawl-delay %v: want a positive delay and a cap not below it, as the fetchers", c.Fleet.Politeness.Delay, c.Fleet.Politeness.MaxCrawlDelay))
	}
	if c.ConsoleRefresh < time.Second || c.ConsoleRefresh%time.Second != 0 {
		errs = append(errs, fmt.Errorf("validate console-refresh: %v, want whole seconds, at least 1s", c.ConsoleRefresh))
	}
	return errors.Join(errs...)
}

// LoadServe parses the arguments of `seeder serve` (after "serve") and the
// environment into a validated Serve (errors.Is(err, flag.ErrHelp) after
// -h).
func LoadServe(args []string, lookupEnv func(string) (string, bool)) (Serve, error) {
	var c Serve
	fs := flag.NewFlagSet("seeder serve", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return Serve{}, err
	}
	if fs.NArg() > 0 {
		return Serve{}, fmt.Errorf("parse arguments: unexpected %q", fs.Args())
	}
	if err := c.Validate(); err != nil {
		return Serve{}, fmt.Errorf("validate config: %w", err)
	}
	return c, nil
}

// State configures `seeder state`: one crawl's state changed on the control
// topic, as the API's pause, resume and cancel do.
type State struct {
	Telemetry telemetry.Config
	Kafka     kafkaio.Config
	CrawlID   string // flag crawl-id (required)
	State     string // flag state: running, paused or cancelled
}

// RegisterFlags binds the fields to flags with their defaults.
func (c *State) RegisterFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	fs.StringVar(&c.CrawlID, "crawl-id", "", "id of the crawl whose state changes (required)")
	fs.StringVar(&c.State, "state", "", "the crawl's new state: running, paused or cancelled (required; cancelled is final)")
}

// Validate checks the flags.
func (c State) Validate() error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate()}
	if c.CrawlID == "" {
		errs = append(errs, errors.New("validate crawl-id: required"))
	}
	if _, err := ParseState(c.State); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseState reads a crawl state's name.
func ParseState(s string) (crawlv1.CrawlState, error) {
	switch s {
	case "running":
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING, nil
	case "paused":
		return crawlv1.CrawlState_CRAWL_STATE_PAUSED, nil
	case "cancelled":
		return crawlv1.CrawlState_CRAWL_STATE_CANCELLED, nil
	default:
		return 0, fmt.Errorf("validate state %q: want running, paused or cancelled", s)
	}
}
