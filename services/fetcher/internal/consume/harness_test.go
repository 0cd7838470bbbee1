package consume

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// follow decodes every record of topic into a new M and hands it to fn
// (with the record), in g, until ctx is done; an undecodable record fails
// the test.
func follow[T any, M interface {
	*T
	proto.Message
}](t *testing.T, ctx context.Context, g *errgroup.Group, kcfg kafkaio.Config, topic string, fn func(kafka.Message, M)) {
	g.Go(func() error {
		return kafkaio.Follow(ctx, kcfg, topic, func(m kafka.Message) {
			v := M(new(T))
			if err := kafkaio.Decode(m, v); err != nil {
				t.Errorf("decode %s: %v", topic, err)
				return
			}
			fn(m, v)
		})
	})
}

// runFetcher starts a Service consuming kcfg's fetch topic in the fetcher
// group, with its fetch-log writer (flushing every flush), as the fetcher's
// main wires them. stop ends consumption, then the writer, and returns the
// first error of either.
func runFetcher(t *testing.T, ctx context.Context, kcfg kafkaio.Config, store *chstore.Store, o Options,
	f Fetcher, rc *robots.Cache, prod Producer, flush time.Duration, maxInFlight int, log *zap.Logger,
) (svc *Service, stop func() error) {
	t.Helper()
	return runFetcherGroup(t, ctx, kcfg, store, o, f, rc, prod, flush, kafkaio.GroupConfig{MaxInFlight: maxInFlight}, log)
}

// runFetcherGroup is runFetcher with the group's window settings of gc
// (MaxInFlight, MaxSettling).
func runFetcherGroup(t *testing.T, ctx context.Context, kcfg kafkaio.Config, store *chstore.Store, o Options,
	f Fetcher, rc *robots.Cache, prod Producer, flush time.Duration, gc kafkaio.GroupConfig, log *zap.Logger,
) (svc *Service, stop func() error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: flush}, log, reg)
	rec, stopRec := startRecorder(t, ctx, prod, flog, nil, reg)
	if o.FlushAt > 0 && o.Flush == nil {
		o.Flush = flog.FlushWhenKey
	}
	svc, err := New(o, f, rc, prod, rec, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	gc.GroupID, gc.Topic = kcfg.GroupFor("fetcher"), o.Topics.Fetch
	group, err := kafkaio.NewGroup(kcfg, gc, svc.Assign, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { defer stopRec(); return group.Run(runCtx) })
	return svc, func() error {
		stopRun()
		return g.Wait()
	}
}

// startRecorder runs a recorder producing with prod and inserting through
// flog and rlog (nil: no robots.txt rows; both also run here), as the
// fetcher's main does. stop ends the recorder (writing what is queued),
// then the writers; it is also called at cleanup, and a second call does
// nothing.
func startRecorder(t testing.TB, ctx context.Context, prod recorder.Producer, flog *chstore.BatchWriter[chstore.FetchLogRow],
	rlog *chstore.BatchWriter[chstore.RobotsRow], reg prometheus.Registerer,
) (rec *recorder.Recorder, stop func()) {
	t.Helper()
	var robotsTxt recorder.RobotsTxt
	if rlog != nil {
		robotsTxt = rlog
	}
	rec, err := recorder.New(recorder.Options{Recycle: kafkaio.Recycle}, prod, flog, robotsTxt, reg)
	if err != nil {
		t.Fatal(err)
	}
	recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
	writerCtx, stopWriter := context.WithCancel(context.WithoutCancel(ctx))
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	if rlog != nil {
		g.Go(func() error { return rlog.Run(writerCtx) })
	}
	g.Go(func() error { defer stopWriter(); return rec.Run(recCtx, 5*time.Second) })
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopRec()
			if err := g.Wait(); err != nil {
				t.Errorf("recorder or fetch log: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return rec, stop
}

// writeRequests publishes reqs of crawl on s's host to the fetch topic,
// each with its own url_fp (fps[path]), in order.
func writeRequests(ctx context.Context, t *testing.T, kcfg kafkaio.Config, s *site, crawl string, fps map[string]uint64, reqs ...*crawlv1.FetchRequest) {
	t.Helper()
	w := kafkaio.NewWriter(kcfg, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for _, r := range reqs {
		path := r.GetUrl()
		if _, ok := fps[path]; !ok {
			fps[path] = uint64(len(fps) + 1)
		}
		r.CrawlId, r.Url, r.UrlFp = crawl, s.base+path, fps[path]
		if !r.GetReprioritize() {
			r.ScheduledAt = timestamppb.Now()
		}
		key, err := kafkaio.Key(r.GetUrl())
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, r)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}
