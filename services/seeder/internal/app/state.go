package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// ErrNoCrawl is returned for a crawl id the control topic does not know.
var ErrNoCrawl = errors.New("no such crawl")

// SetState publishes the next revision of a crawl's specification with a
// new state (`seeder state`), as the API's pause, resume and cancel do:
// every service follows the control topic and obeys within seconds. A
// crawl already in the state is left alone; a cancelled crawl stays
// cancelled (jobs.ErrFinal). It returns the specification in force.
func SetState(ctx context.Context, cfg config.State, log *zap.Logger, now time.Time) (*crawlv1.CrawlSpec, error) {
	state, err := config.ParseState(cfg.State)
	if err != nil {
		return nil, err
	}
	w := kafkaio.NewWriter(cfg.Kafka, log, nil)
	defer func() { _ = w.Close() }()
	ctl := control.New(cfg.Kafka, w, log)
	followCtx, stopFollowing := context.WithCancel(ctx)
	g, gctx := errgroup.WithContext(followCtx)
	g.Go(func() error { return ctl.Run(gctx) })
	spec, err := func() (*crawlv1.CrawlSpec, error) {
		if err := ctl.WaitCaughtUp(gctx); err != nil {
			return nil, fmt.Errorf("read control topic: %w", err)
		}
		old := ctl.Get(cfg.CrawlID)
		if old == nil {
			return nil, fmt.Errorf("crawl %s: %w", cfg.CrawlID, ErrNoCrawl)
		}
		if old.GetState() == state {
			return old, nil
		}
		next, err := jobs.Transition(old, state, now)
		if err != nil {
			return nil, fmt.Errorf("crawl %s: %w", cfg.CrawlID, err)
		}
		if err := ctl.Publish(ctx, next); err != nil {
			return nil, fmt.Errorf("publish crawl spec: %w", err)
		}
		log.Info("crawl state changed", telemetry.Crawl(cfg.CrawlID), zap.Stringer("state", state), zap.Uint64("revision", next.GetRevision()))
		return next, nil
	}()
	stopFollowing()
	if ferr := g.Wait(); ferr != nil {
		return nil, ferr
	}
	return spec, err
}
