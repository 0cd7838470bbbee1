package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// errNoValidSeeds is returned when every given seed was invalid.
var errNoValidSeeds = errors.New("no valid seeds")

// summary is the outcome of one seeding run.
type summary struct {
	Published int
	Invalid   int
	Sitemap   int // URLs taken from sitemaps (included in Published)
}

// seed reads and validates the configured seeds, reports every invalid one
// (with its line number for a file, its position for --seed), publishes
// the valid ones and logs a summary. It fails with errNoValidSeeds when
// nothing valid was given, after reporting why.
func seed(ctx context.Context, cfg config, stdin io.Reader, log *zap.Logger, reg prometheus.Registerer) (summary, error) {
	published := prometheus.NewCounter(prometheus.CounterOpts{Name: "seeds_published_total", Help: "Seeds published to the discovered topic."})
	invalid := prometheus.NewCounter(prometheus.CounterOpts{Name: "seeds_invalid_total", Help: "Seeds rejected as invalid."})
	for _, c := range []prometheus.Collector{published, invalid} {
		if err := reg.Register(c); err != nil {
			return summary{}, fmt.Errorf("register seeder metrics: %w", err)
		}
	}

	var (
		urls []string
		sum  summary
	)
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
	batch := make([]publish.Seed, 0, len(urls))
	seen := make(map[string]bool, len(urls))
	for _, u := range urls { // published as given, duplicates too (as always)
		seen[u] = true
		batch = append(batch, publish.Seed{URL: u})
	}
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
				batch = append(batch, publish.Seed{URL: e.URL, Sitemap: true, Lastmod: e.Lastmod})
			}
		}
		log.Info("sitemaps read", zap.Int("requests", res.Fetched), zap.Int("urls", sum.Sitemap), zap.Int("problems", len(res.Problems)))
	}
	if len(batch) == 0 {
		return sum, errNoValidSeeds
	}

	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return sum, fmt.Errorf("ensure topics: %w", err)
	}
	w := kafkaio.NewWriter(cfg.Kafka, log, reg)
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

// readFile reads the seeds file at path, or stdin for "-".
func readFile(path string, stdin io.Reader) ([]seeds.Seed, []seeds.LineError, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("open seeds file: %w", err)
		}
		defer f.Close()
		r = f
	}
	s, bad, err := seeds.Read(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read seeds file %s: %w", path, err)
	}
	return s, bad, nil
}
