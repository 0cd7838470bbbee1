package consume

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// runFetcher starts a Service consuming kcfg's fetch topic in the fetcher
// group, with its fetch-log writer (flushing every flush), as the fetcher's
// main wires them. stop ends consumption, then the writer, and returns the
// first error of either.
func runFetcher(t *testing.T, ctx context.Context, kcfg kafkaio.Config, store *chstore.Store, o Options,
	f Fetcher, rc *robots.Cache, prod Producer, flush time.Duration, maxInFlight int, log *zap.Logger,
) (svc *Service, stop func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: flush}, log, reg)
	svc, err := New(o, f, rc, prod, flog, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	group, err := kafkaio.NewGroup(kcfg, kafkaio.GroupConfig{
		GroupID: kcfg.GroupFor("fetcher"), Topic: o.Topics.Fetch, MaxInFlight: maxInFlight,
	}, svc.Assign, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	g.Go(func() error { defer stopWriter(); return group.Run(runCtx) })
	return svc, func() error {
		stopRun()
		return g.Wait()
	}
}
