// Command seeder publishes the seed URLs of a crawl to the discovered topic
// and exits: seeder --crawl-id ID [--seed URL]... [--seeds-file FILE|-].
// With --sitemaps (or --sitemap URL) it also seeds from sitemaps; with
// --spec FILE (a POST /v1/crawls body) it first publishes the crawl's
// specification (scope, limits, politeness, revisit) to the control topic,
// as the API does, and seeds the file's seeds too.
// `seeder serve` runs the crawl-jobs HTTP API instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

const service = "seeder"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.LookupEnv)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "seeder: %v\n", err)
		os.Exit(1)
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// config is everything the seeder is configured with.
type config struct {
	Telemetry telemetry.Config
	Kafka     kafkaio.Config
	CrawlID   string     // flag crawl-id (required)
	Seeds     stringList // flag seed, repeatable
	SeedsFile string     // flag seeds-file: path, or "-" for standard input
	// Sitemaps (flag sitemaps) also seeds from the sitemaps of every seed
	// host (robots.txt Sitemap lines and /sitemap.xml).
	Sitemaps    bool
	SitemapURLs stringList      // flag sitemap: an explicit sitemap (repeatable)
	Sitemap     sitemaps.Config // flags sitemap-*, allow-private
	// SpecFile (flag spec) is a crawl request as POST /v1/crawls takes it;
	// "-" reads standard input.
	SpecFile string
}

func (c *config) registerFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	fs.StringVar(&c.CrawlID, "crawl-id", "", "id of the crawl the seeds start (required; letters, digits, '.', '_', '-'; at most 64)")
	fs.Var(&c.Seeds, "seed", "seed URL (repeatable)")
	fs.StringVar(&c.SeedsFile, "seeds-file", "", `file of seed URLs, one per line, # comments; "-" reads standard input`)
	fs.BoolVar(&c.Sitemaps, "sitemaps", false, "also seed from the sitemaps of every seed host (robots.txt Sitemap lines and /sitemap.xml)")
	fs.Var(&c.SitemapURLs, "sitemap", "sitemap URL to seed from (repeatable)")
	registerSitemapFlags(fs, &c.Sitemap)
	fs.StringVar(&c.SpecFile, "spec", "", `crawl request as JSON, the body of POST /v1/crawls ("-" reads standard input): its scope, limits, politeness and revisit policy are published to the control topic before the seeds, its seeds are seeded with the flags' ones; --crawl-id overrides its crawl_id`)
}

// registerSitemapFlags registers the bounds of sitemap discovery, with
// their defaults.
func registerSitemapFlags(fs *flag.FlagSet, c *sitemaps.Config) {
	*c = sitemaps.DefaultConfig()
	fs.DurationVar(&c.Timeout, "sitemap-timeout", c.Timeout, "timeout of one robots.txt or sitemap request")
	fs.DurationVar(&c.Delay, "sitemap-delay", c.Delay, "delay between two sitemap requests to the same host")
	fs.Int64Var(&c.MaxBodyBytes, "sitemap-max-bytes", c.MaxBodyBytes, "largest sitemap, compressed and uncompressed")
	fs.IntVar(&c.MaxSitemaps, "sitemap-max-files", c.MaxSitemaps, "most sitemaps fetched per run or request")
	fs.IntVar(&c.MaxDepth, "sitemap-max-depth", c.MaxDepth, "deepest nesting of sitemap indexes followed")
	fs.IntVar(&c.MaxURLs, "sitemap-max-urls", c.MaxURLs, "most URLs taken from sitemaps per run or request")
	fs.BoolVar(&c.AllowPrivate, "allow-private", false, "let sitemap discovery fetch from loopback, private and link-local addresses")
}

// maxCrawlID is the longest crawl id accepted.
const maxCrawlID = 64

// validate checks the flags; specSeeds tells whether a --spec file brings
// seeds of its own.
func (c config) validate(specSeeds bool) error {
	errs := []error{c.Telemetry.Validate(), c.Kafka.Validate()}
	switch {
	case c.CrawlID == "":
		errs = append(errs, errors.New("validate crawl-id: required"))
	case len(c.CrawlID) > maxCrawlID:
		errs = append(errs, fmt.Errorf("validate crawl-id: %d bytes, want at most %d", len(c.CrawlID), maxCrawlID))
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
	return errors.Join(errs...)
}

func run(ctx context.Context, args []string, stdin io.Reader, lookupEnv func(string) (string, bool)) error {
	if len(args) > 0 && args[0] == "serve" {
		return serve(ctx, args[1:], lookupEnv, nil)
	}
	var cfg config
	fs := flag.NewFlagSet(service, flag.ContinueOnError)
	cfg.registerFlags(fs)
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("parse arguments: unexpected %q (seeds go in --seed or --seeds-file)", fs.Args())
	}
	// The spec is read and checked before anything else happens, so that a
	// bad file publishes nothing.
	var job *jobs.Job
	if cfg.SpecFile == "-" && cfg.SeedsFile == "-" {
		return errors.New("validate config: --spec and --seeds-file cannot both read standard input")
	}
	if cfg.SpecFile != "" {
		j, err := loadSpec(cfg.SpecFile, cfg.CrawlID, stdin, time.Now())
		if err != nil {
			return err
		}
		job = &j
		cfg.CrawlID = j.Spec.GetCrawlId()
		cfg.Sitemaps = cfg.Sitemaps || j.Sitemaps
		cfg.SitemapURLs = append(cfg.SitemapURLs, j.SitemapURLs...)
	}
	if err := cfg.validate(job != nil && len(job.Seeds) > 0); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}
	log, err := telemetry.NewLogger(cfg.Telemetry, service)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	telemetry.ApplyMemoryLimit(cfg.Telemetry)
	stopProfiles, err := telemetry.StartProfiles(cfg.Telemetry, log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	reg := telemetry.NewRegistry()

	// The admin server lives as long as the command, so that a run on a
	// large seed list can be watched.
	admin := telemetry.NewAdmin(cfg.Telemetry.AdminAddr, reg, log)
	adminCtx, stopAdmin := context.WithCancel(ctx)
	defer stopAdmin()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return admin.Run(adminCtx) })
	g.Go(func() error {
		defer stopAdmin()
		admin.SetReady(true)
		_, err := seed(gctx, cfg, job, stdin, log, telemetry.Registerer(reg, service))
		return err
	})
	return g.Wait()
}
