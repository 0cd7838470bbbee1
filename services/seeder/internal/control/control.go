// Package control is the seeder's Kafka adapter for crawl jobs: it
// publishes crawl specifications to the compacted control topic, follows
// that topic into a crawlcontrol.Specs table, and publishes a job's seeds
// to the discovered topic.
package control

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
)

// Control publishes and follows crawl specifications. Safe for concurrent
// use; Run must be running for specifications published by others to be
// seen.
type Control struct {
	cfg   kafkaio.Config
	w     publish.Writer
	specs *crawlcontrol.Specs
	log   *zap.Logger
	now   func() time.Time
}

// New returns a Control writing with w (not closed by Control).
func New(cfg kafkaio.Config, w publish.Writer, log *zap.Logger) *Control {
	return &Control{cfg: cfg, w: w, specs: crawlcontrol.NewSpecs(), log: log, now: time.Now}
}

// Run follows the control topic until ctx is done.
func (c *Control) Run(ctx context.Context) error {
	return crawlcontrol.Follow(ctx, c.cfg, c.specs, func(err error) {
		c.log.Warn("undecodable crawl spec skipped", zap.Error(err))
	})
}

// Publish writes spec to the control topic (acknowledged by all in-sync
// replicas) and applies it to the local table, so a Get right after sees
// it.
func (c *Control) Publish(ctx context.Context, spec *crawlv1.CrawlSpec) error {
	msg, err := crawlcontrol.Message(c.cfg.Topics().Control, spec)
	if err != nil {
		return fmt.Errorf("encode crawl spec: %w", err)
	}
	if err := c.w.Write(ctx, msg); err != nil {
		return fmt.Errorf("publish crawl spec: %w", err)
	}
	c.specs.Apply(spec)
	return nil
}

// Get returns the latest known specification of a crawl, or nil.
func (c *Control) Get(crawlID string) *crawlv1.CrawlSpec { return c.specs.Get(crawlID) }

// All returns every known specification.
func (c *Control) All() []*crawlv1.CrawlSpec { return c.specs.All() }

// PublishSeeds publishes a job's seeds to the discovered topic and returns
// how many were acknowledged.
func (c *Control) PublishSeeds(ctx context.Context, crawlID string, seeds []jobs.Seed) (int, error) {
	ps := make([]publish.Seed, len(seeds))
	for i, s := range seeds {
		ps[i] = publish.Seed{URL: s.URL, SERPEngine: s.Engine}
	}
	return publish.Marked(ctx, c.w, c.cfg.Topics().Discovered, crawlID, ps, c.now())
}

// InFlight returns the records the pipeline has not finished: the lag of
// the scheduler group on the discovered topic, the fetcher group on the
// fetch topic and the parser group on the fetched topic, summed (all
// crawls together).
func (c *Control) InFlight(ctx context.Context) (int64, error) {
	t := c.cfg.Topics()
	var total int64
	for _, gt := range []struct{ service, topic string }{
		{"scheduler", t.Discovered}, {"fetcher", t.Fetch}, {"parser", t.Fetched},
	} {
		lag, err := kafkaio.Lag(ctx, c.cfg, c.cfg.GroupFor(gt.service), gt.topic)
		if err != nil {
			return 0, fmt.Errorf("measure %s lag: %w", gt.service, err)
		}
		total += lag
	}
	return total, nil
}
