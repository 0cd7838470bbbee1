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
)

// errNoValidSeeds is returned when every given seed was invalid.
var errNoValidSeeds = errors.New("no valid seeds")

// summary is the outcome of one seeding run.
type summary struct {
	Published int
	Invalid   int
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
	if len(urls) == 0 {
		return sum, errNoValidSeeds
	}

	if err := kafkaio.EnsureTopics(ctx, cfg.Kafka); err != nil {
		return sum, fmt.Errorf("ensure topics: %w", err)
	}
	w := kafkaio.NewWriter(cfg.Kafka, log, reg)
	n, err := publish.Seeds(ctx, w, cfg.Kafka.Topics().Discovered, cfg.CrawlID, urls, time.Now())
	sum.Published = n
	published.Add(float64(n))
	if cerr := w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close writer: %w", cerr)
	}
	log.Info("seeding done", telemetry.Crawl(cfg.CrawlID), zap.Int("published", sum.Published),
		zap.Int("invalid", sum.Invalid), zap.Int("unpublished", len(urls)-n))
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
