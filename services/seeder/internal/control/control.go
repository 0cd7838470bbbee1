// Package control is the seeder's Kafka adapter for crawl jobs: it
// publishes crawl specifications to the compacted control topic, follows
// that topic into a crawlcontrol.Specs table, and publishes a job's seeds
// to the discovered topic.
package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/previous"
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
	// caughtUp is closed once Run has applied every record that was on
	// the topic when it started.
	caughtUp     chan struct{}
	caughtUpOnce sync.Once

	claimMu sync.Mutex
	claims  claims

	// prev reads the pages of a crawl's previous crawl (SetPrevious);
	// nil: a crawl with a previous crawl is seeded from its seeds only.
	prev previous.Source
}

// New returns a Control writing with w (not closed by Control).
func New(cfg kafkaio.Config, w publish.Writer, log *zap.Logger) *Control {
	return NewClock(cfg, w, log, time.Now)
}

// NewClock is New with the clock that time limits are read on (Get) and
// seeds are stamped with (tests advance it rather than wait).
func NewClock(cfg kafkaio.Config, w publish.Writer, log *zap.Logger, now func() time.Time) *Control {
	return &Control{cfg: cfg, w: w, specs: crawlcontrol.NewSpecsClock(now), log: log, now: now, caughtUp: make(chan struct{}),
		claims: claims{first: make(map[string]string), waiting: make(map[string]chan bool)}}
}

// Run follows the control topic until ctx is done; once every record
// present at the start is applied, CaughtUp reports true (at once for an
// empty topic). Records are applied as crawlcontrol.Follow does: the newest
// revision wins, a tombstone deletes, an undecodable record is logged and
// skipped. Claims of crawl ids are decided as they are read (see Claim).
func (c *Control) Run(ctx context.Context) error {
	return crawlcontrol.FollowClaims(ctx, c.cfg, c.specs, c.markCaughtUp, c.observeClaim, func(err error) {
		c.log.Warn("undecodable crawl spec skipped", zap.Error(err))
	})
}

func (c *Control) markCaughtUp() {
	c.caughtUpOnce.Do(func() {
		c.log.Info("control topic read to its end", zap.Int("crawls", len(c.specs.All())))
		close(c.caughtUp)
	})
}

// CaughtUp reports whether Run has read the control topic to the end it
// had when Run started: only then are crawl ids known to be unused.
func (c *Control) CaughtUp() bool {
	select {
	case <-c.caughtUp:
		return true
	default:
		return false
	}
}

// WaitCaughtUp blocks until CaughtUp or ctx is done (then its error).
func (c *Control) WaitCaughtUp(ctx context.Context) error {
	select {
	case <-c.caughtUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// Get returns the latest known specification of a crawl as it stands now
// (crawlcontrol.Effective: CANCELLED, updated at its deadline, once its
// time limit has passed), or nil. The seeder shows and acts on crawls as
// every other service obeys them: a crawl past its time limit is listed
// cancelled and can be neither resumed nor revised.
func (c *Control) Get(crawlID string) *crawlv1.CrawlSpec {
	return crawlcontrol.Effective(c.specs.Get(crawlID), c.now())
}

// All returns every known specification, as Get does.
func (c *Control) All() []*crawlv1.CrawlSpec {
	all, now := c.specs.All(), c.now()
	for i, spec := range all {
		all[i] = crawlcontrol.Effective(spec, now)
	}
	return all
}

// SetPrevious sets where the pages of a crawl's previous crawl are read
// (PublishSeeds). Call it before the API serves.
func (c *Control) SetPrevious(src previous.Source) { c.prev = src }

// PublishSeeds publishes a job's seeds to the discovered topic and returns
// how many were acknowledged. A crawl whose spec names a previous crawl
// (previous_crawl_id) first gets that crawl's pages (package previous),
// when SetPrevious gave a source: a seed among them is then a duplicate.
func (c *Control) PublishSeeds(ctx context.Context, crawlID string, seeds []jobs.Seed) (int, error) {
	if prev := c.specs.Get(crawlID).GetPreviousCrawlId(); prev != "" && c.prev != nil {
		sum, err := previous.Publish(ctx, c.prev, c.w, c.cfg.Topics().Discovered, crawlID, prev, resultPages(seeds), c.now())
		c.log.Info("previous crawl seeded", telemetry.Crawl(crawlID), zap.String("previous_crawl", prev),
			zap.Int("published", sum.Published), zap.Int("with_validators", sum.Validators), zap.Error(err))
		if err != nil {
			return 0, err
		}
	}
	ps := make([]publish.Seed, len(seeds))
	for i, s := range seeds {
		ps[i] = publish.Seed{URL: s.URL, SERPEngine: s.Engine, Sitemap: s.Sitemap, Lastmod: s.Lastmod,
			Priority: s.Priority, HasPriority: s.HasPriority}
	}
	return publish.Marked(ctx, c.w, c.cfg.Topics().Discovered, crawlID, ps, c.now())
}

// resultPages is the set of the search-engine result pages among seeds.
func resultPages(seeds []jobs.Seed) map[string]bool {
	out := make(map[string]bool)
	for _, s := range seeds {
		if s.Engine != "" {
			out[s.URL] = true
		}
	}
	return out
}

// InFlight returns the records the pipeline has not finished: the lag of
// the scheduler group on the discovered topic (every partition: an outlink
// to a host the crawl has not reached yet may be on any), plus the lag of
// the fetcher group on the fetch topic and of the parser group on the
// fetched topic on the given partitions only (the partitions of the
// crawl's hosts: those topics are keyed by host); nil partitions means all.
// Records of other crawls on the same partitions still count.
func (c *Control) InFlight(ctx context.Context, partitions []int) (int64, error) {
	t := c.cfg.Topics()
	var only map[int]bool
	if partitions != nil {
		only = make(map[int]bool, len(partitions))
		for _, p := range partitions {
			only[p] = true
		}
	}
	var total int64
	for _, gt := range []struct {
		service, topic string
		all            bool
	}{
		{"scheduler", t.Discovered, true}, {"fetcher", t.Fetch, false}, {"parser", t.Fetched, false},
	} {
		parts, err := kafkaio.GroupOffsets(ctx, c.cfg, c.cfg.GroupFor(gt.service), gt.topic)
		if err != nil {
			return 0, fmt.Errorf("measure %s lag: %w", gt.service, err)
		}
		for _, p := range parts {
			if gt.all || only == nil || only[p.Partition] {
				total += p.Lag()
			}
		}
	}
	return total, nil
}
