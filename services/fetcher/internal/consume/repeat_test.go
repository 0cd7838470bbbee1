package consume

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestRepeatsNotRefetched feeds a fetcher the repeats a crash or a
// rebalance produces — the same record twice (a deferral copy whose
// original came back), a URL admitted twice by a scheduler, a revisit —
// then lets a second fetcher that never committed anything (a new owner
// after a crash of the first, in its own group) read the whole partition
// again. The site must see each attempt once: the revisit is the only
// second request of a URL, and the new owner makes none.
func TestRepeatsNotRefetched(t *testing.T) {
	const pages = 12
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := startSite(t, "127.0.0.51", pageHandler(""))
	key, err := kafkaio.Key(s.base + "/")
	if err != nil {
		t.Fatal(err)
	}

	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	var msgs []kafka.Message
	add := func(path string, at time.Time, revisit bool) {
		u := s.base + path
		m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{
			CrawlId: "rp", Url: u, UrlFp: fingerprint.URL("rp", u), ScheduledAt: timestamppb.New(at), Revisit: revisit})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	for i := range pages {
		add(fmt.Sprintf("/p%d", i), t0, false)
	}
	for i := range 3 { // the same records again
		add(fmt.Sprintf("/p%d", i), t0, false)
	}
	for i := 3; i < 5; i++ { // admitted again by a scheduler that crashed
		add(fmt.Sprintf("/p%d", i), t0.Add(10*time.Second), false)
	}
	add("/p5", t0.Add(20*time.Second), true) // a revisit: a request of its own
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	run := func(group string) *Service {
		t.Helper()
		reg := prometheus.NewRegistry()
		f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 2 * time.Second})
		defer f.Close()
		flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
		rec, stopRec := startRecorder(t, ctx, w, flog, nil, reg)
		svc, err := New(Options{Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: group}, Recorded: store,
			Politeness: politeness.Options{Delay: 10 * time.Millisecond}},
			f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), w, rec, log, reg)
		if err != nil {
			t.Fatal(err)
		}
		g, err := kafkaio.NewGroup(kcfg, kafkaio.GroupConfig{GroupID: kcfg.GroupFor(group), Topic: topics.Fetch}, svc.Assign, log, reg)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(ctx)
		var eg errgroup.Group
		eg.Go(func() error { defer stopRec(); return g.Run(runCtx) })
		waitFor(ctx, t, group+" drained", func() bool {
			lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor(group), topics.Fetch)
			return err == nil && lag == 0
		})
		stop()
		if err := eg.Wait(); err != nil {
			t.Fatalf("%s: %v", group, err)
		}
		return svc
	}

	first := run("fetcher")
	_, hits := s.snapshot()
	for i := range pages {
		want := 1
		if i == 5 {
			want = 2 // first visit and revisit
		}
		if n := hits[fmt.Sprintf("/p%d", i)]; n != want {
			t.Errorf("/p%d requested %d times, want %d", i, n, want)
		}
	}
	if got := testutil.ToFloat64(first.m.repeatsSkipped.WithLabelValues(skipHeld)); got != 5 {
		t.Errorf("repeats skipped by the first fetcher = %v, want 5", got)
	}

	before := s.pageHits()
	second := run("fetcher-after-crash")
	if n := s.pageHits() - before; n != 0 {
		t.Errorf("the new owner made %d requests for work already done", n)
	}
	if got := testutil.ToFloat64(second.m.repeatsSkipped.WithLabelValues(skipRecorded)); got != float64(len(msgs)) {
		t.Errorf("repeats recognized from the fetch log = %v, want %d", got, len(msgs))
	}
}
