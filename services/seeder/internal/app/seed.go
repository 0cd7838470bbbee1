package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/previous"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// ErrNoValidSeeds is returned when every given seed was invalid.
var ErrNoValidSeeds = errors.New("no valid seeds")

// Summary is the outcome of one seeding run.
type Summary struct {
	Published int
	Invalid   int
	Sitemap   int // URLs taken from sitemaps (included in Published)
	// Previous is what was seeded from the crawl's previous crawl
	// (CrawlSpec.previous_crawl_id; not included in Published).
	Previous previous.Summary
}

// Seed reads and validates the configured seeds, reports every invalid one
// (with its line number for a file, its position for --seed), publishes
// the valid ones and logs a summary. It fails with ErrNoValidSeeds when
// nothing valid was given, after reporting why. With a job (--spec, see
// LoadJob) it publishes the job's crawl spec to the control topic before
// any seed, and the job's seeds (validated already) before the flags'.
func Seed(ctx context.Context, cfg config.Seed, job *jobs.Job, stdin io.Reader, log *zap.Logger, reg prometheus.Registerer) (Summary, error) {
	published := prometheus.NewCounter(prometheus.CounterOpts{Name: "seeds_published_total", Help: "Seeds published to the discovered topic."})
	invalid := prometheus.NewCounter(prometheus.CounterOpts{Name: "seeds_invalid_total", Help: "Seeds rejected as invalid."})
	fromPrevious := prometheus.NewCounter(prometheus.CounterOpts{Name: "previous_urls_published_total",
		Help: "URLs of the previous crawl (CrawlSpec.previous_crawl_id) published to the discovered topic, to be asked for conditionally."})
	for _, c := range []prometheus.Collector{published, invalid, fromPrevious} {
		if err := reg.Register(c); err != nil {
			return Summary{}, fmt.Errorf("register seeder metrics: %w", err)
		}
	}

	var (
		urls []string
		sum  Summary
		// serps are the job's search-engine result pages: seeds, but no
		// hosts to read sitemaps of.
		serps []publish.Seed
	)
	if job != nil {
		for _, s := range job.Seeds {
			if s.Engine != "" {
				serps = append(serps, publish.Seed{URL: s.URL, SERPEngine: s.Engine})
				continue
			}
			urls = append(urls, s.URL)
		}
	}
	for i, raw := range cfg.Seeds {
		u, err := seeds.Parse(raw)
		if err != nil {
			sum.Invalid++
			log.Warn("invalid seed skipped", zap.Int("arg", i+1), telemetry.URL(raw), zap.Error(err))
			continue
		}
		urls = append(urls, u)
	}
	if cfg.SeedsFile != "" {
		fromFile, bad, err := readFile(cfg.SeedsFile, stdin)
		if err != nil {
			return sum, err
		}
		for _, b := range bad {
			sum.Invalid++
			log.Warn("invalid seed skipped", zap.String("file", cfg.SeedsFile), zap.Int("line", b.Line),
				telemetry.URL(b.Raw), zap.Error(b.Err))
		}
		for _, s := range fromFile {
			urls = append(urls, s.URL)
		}
	}
	invalid.Add(float64(sum.Invalid))
	batch := make([]publish.Seed, 0, len(urls)+len(serps))
	seen := make(map[string]bool, len(urls))
	for _, u := range urls { // published as given, duplicates too (as always)
		seen[u] = true
		batch = append(batch, publish.Seed{URL: u})
	}
	batch = append(batch, serps...)
	if cfg.Sitemaps || len(cfg.SitemapURLs) > 0 {
		var hosts []string
		if cfg.Sitemaps {
			hosts = urls
		}
		d := sitemaps.New(cfg.Sitemap)
		res := d.Discover(ctx, hosts, cfg.SitemapURLs)
		d.Close()
		if err := ctx.Err(); err != nil {
			return sum, fmt.Errorf("discover sitemaps: %w", err)
		}
		for _, p := range res.Problems {
			log.Warn("sitemap problem", telemetry.URL(p.Source), zap.Int("pos", p.Pos), zap.String("problem", p.Message))
		}
		for _, e := range res.Entries {
			if !seen[e.URL] {
				seen[e.URL] = true
				sum.Sitemap++
				batch = append(batch, publish.Seed{URL: e.URL, Sitemap: true, Lastmod: e.Lastmod,
					Priority: e.Priority, HasPriority: e.HasPriority})
			}
		}
		log.Info("sitemaps read", zap.Int("requests", res.Fetched), zap.Int("urls", sum.Sitemap), zap.Int("problems", len(res.Problems)))
	}
	if len(batch) == 0 {
		return sum, ErrNoValidSeeds
	}

	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return sum, fmt.Errorf("ensure topics: %w", err)
	}
	w := kafkaio.NewWriter(cfg.Kafka, log, reg)
	if job != nil {
		// The sites a crawl of the seeds' sites stays on are those of
		// every seed: the flags', the file's and the sitemaps' too.
		var sites []string
		for _, sd := range batch {
			if sd.SERPEngine == "" {
				sites = append(sites, sd.URL)
			}
		}
		jobs.KeepOnSeeds(job.Spec, sites)
		spec, err := publishSpec(ctx, cfg.Kafka, w, log, job.Spec, time.Now())
		if err != nil {
			_ = w.Close()
			return sum, err
		}
		log.Info("crawl spec published", telemetry.Crawl(cfg.CrawlID), zap.Uint64("revision", spec.GetRevision()),
			zap.Stringer("state", spec.GetState()))
		// The previous crawl's pages go first: a seed that is one of them
		// is then a duplicate, asked for conditionally as the others.
		if prev := spec.GetPreviousCrawlId(); prev != "" {
			skip := make(map[string]bool, len(serps))
			for _, sd := range serps {
				skip[sd.URL] = true
			}
			sum.Previous, err = seedPrevious(ctx, cfg, w, prev, skip, log, reg)
			fromPrevious.Add(float64(sum.Previous.Published))
			if err != nil {
				_ = w.Close()
				return sum, err
			}
		}
	}
	n, err := publish.Marked(ctx, w, cfg.Kafka.Topics().Discovered, cfg.CrawlID, batch, time.Now())
	sum.Published = n
	published.Add(float64(n))
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close writer: %w", cerr)
	}
	log.Info("seeding done", telemetry.Crawl(cfg.CrawlID), zap.Int("published", sum.Published),
		zap.Int("invalid", sum.Invalid), zap.Int("from_sitemaps", sum.Sitemap), zap.Int("unpublished", len(batch)-n))
	return sum, err
}

// seedPrevious publishes the pages of crawl prev as URLs of cfg.CrawlID
// (package previous), reading them from ClickHouse, but those in skip (the
// result-page seeds, published with their engine).
func seedPrevious(ctx context.Context, cfg config.Seed, w publish.Writer, prev string, skip map[string]bool, log *zap.Logger, reg prometheus.Registerer) (previous.Summary, error) {
	store, err := service.Bootstrap(ctx, cfg.ClickHouse, cfg.Kafka, log, reg)
	if err != nil {
		return previous.Summary{}, err
	}
	defer func() { _ = store.Close() }() // read only
	start := time.Now()
	sum, err := previous.Publish(ctx, store, w, cfg.Kafka.Topics().Discovered, cfg.CrawlID, prev, skip, start)
	log.Info("previous crawl seeded", telemetry.Crawl(cfg.CrawlID), zap.String("previous_crawl", prev),
		zap.Int("published", sum.Published), zap.Int("with_validators", sum.Validators), zap.Int("carried_over_before", sum.CarriedOver),
		zap.Duration("took", time.Since(start)), zap.Error(err))
	return sum, err
}

// readFile reads the seeds file at path, or stdin for "-".
func readFile(path string, stdin io.Reader) ([]seeds.Seed, []seeds.LineError, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("open seeds file: %w", err)
		}
		defer func() { _ = f.Close() }() // read only
		r = f
	}
	s, bad, err := seeds.Read(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read seeds file %s: %w", path, err)
	}
	return s, bad, nil
}

// LoadJob reads the crawl request of --spec, when cfg names one, and
// merges it into cfg (its crawl id, its sitemap settings), then validates
// cfg, the job's seeds counting as seeds. The spec is read and checked
// before anything else happens, so that a bad file publishes nothing.
func LoadJob(cfg *config.Seed, stdin io.Reader, now time.Time) (*jobs.Job, error) {
	var job *jobs.Job
	if cfg.SpecFile == "-" && cfg.SeedsFile == "-" {
		return nil, errors.New("validate config: --spec and --seeds-file cannot both read standard input")
	}
	if cfg.SpecFile != "" {
		j, err := loadSpec(cfg.SpecFile, cfg.CrawlID, stdin, now)
		if err != nil {
			return nil, err
		}
		job = &j
		cfg.CrawlID = j.Spec.GetCrawlId()
		cfg.Sitemaps = cfg.Sitemaps || j.Sitemaps
		cfg.SitemapURLs = append(cfg.SitemapURLs, j.SitemapURLs...)
	}
	if err := cfg.Validate(job != nil && len(job.Seeds) > 0); err != nil {
		return nil, fmt.Errorf("validate config: %w", err)
	}
	return job, nil
}

// loadSpec reads the crawl request at path ("-": stdin) as POST /v1/crawls
// takes it and validates it the same way (jobs.Decode, jobs.BuildSpec: the
// same field-by-field errors), except that it needs no seeds: the flags may
// bring them. crawlID, when not empty, overrides the request's crawl_id;
// one of the two is required.
func loadSpec(path, crawlID string, stdin io.Reader, now time.Time) (jobs.Job, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return jobs.Job{}, fmt.Errorf("open spec: %w", err)
		}
		defer func() { _ = f.Close() }() // read only
		r = f
	}
	req, err := jobs.Decode(r)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("read spec %s: %w", path, err)
	}
	if crawlID != "" {
		req.CrawlID = crawlID
	}
	if req.CrawlID == "" {
		return jobs.Job{}, fmt.Errorf("read spec %s: no crawl id: give --crawl-id or crawl_id", path)
	}
	job, err := jobs.BuildSpec(req, nil, now)
	if err != nil {
		return jobs.Job{}, fmt.Errorf("validate spec %s: %w", path, err)
	}
	return job, nil
}

// publishSpec publishes a crawl's specification the way the crawl-jobs API
// does (control.Control: the compacted control topic, acknowledged by all
// in-sync replicas), after reading the topic to its end as the API does
// before it accepts a crawl id: a new crawl id is claimed (control.Claim,
// as the API does) and gets spec as its revision 1, a
// crawl that has a specification gets spec as its next revision with its
// state kept (jobs.Revise; a cancelled crawl is refused). It returns what
// it published.
func publishSpec(ctx context.Context, kc kafkaio.Config, w publish.Writer, log *zap.Logger, spec *crawlv1.CrawlSpec, now time.Time) (*crawlv1.CrawlSpec, error) {
	ctl := control.New(kc, w, log)
	followCtx, stopFollowing := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(followCtx)
	g.Go(func() error { return ctl.Run(gctx) })
	published, err := func() (*crawlv1.CrawlSpec, error) {
		if err := ctl.WaitCaughtUp(gctx); err != nil {
			return nil, fmt.Errorf("read control topic: %w", err)
		}
		next := spec
		if old := ctl.Get(spec.GetCrawlId()); old != nil {
			var err error
			if next, err = jobs.Revise(old, spec, now); err != nil {
				if crawlcontrol.EndedByTimeLimit(old) {
					err = fmt.Errorf("%w: its time limit (limits.max_duration %v since %s) has passed", err,
						old.GetLimits().GetMaxDuration().AsDuration(), old.GetCreatedAt().AsTime().UTC().Format(time.DateTime))
				}
				return nil, fmt.Errorf("revise the spec of crawl %s: %w", spec.GetCrawlId(), err)
			}
		} else {
			// A new crawl id: claim it as the API servers do, so that
			// a crawl submitted to one of them meanwhile keeps one owner.
			owned, err := ctl.Claim(gctx, spec.GetCrawlId())
			if err != nil {
				return nil, err
			}
			if !owned {
				return nil, fmt.Errorf("crawl %s was created meanwhile by another submission: run again to revise it", spec.GetCrawlId())
			}
		}
		return next, ctl.Publish(ctx, next)
	}()
	stopFollowing()
	if ferr := g.Wait(); ferr != nil {
		return nil, ferr // the cause of a failed wait
	}
	return published, err
}
