package consume

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestCrawlControl runs one fetcher over three crawls: a running crawl
// whose spec asks for a longer delay than the fetcher's floor, a cancelled
// crawl (its requests are recorded as cancelled and never requested), and
// a paused crawl (nothing requested while paused, everything exactly once
// after it resumes).
func TestCrawlControl(t *testing.T) {
	const (
		floor      = 100 * time.Millisecond
		crawlDelay = 400 * time.Millisecond
		pages      = 4
	)
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "slow", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Politeness: &crawlv1.Politeness{Delay: durationpb.New(crawlDelay)}})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "low", Revision: 1,
		Politeness: &crawlv1.Politeness{Delay: durationpb.New(time.Millisecond)}}) // below the floor
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "gone", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "later", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED})

	sites := map[string]*site{
		"slow":  startSite(t, "127.0.0.61", pageHandler("")),
		"low":   startSite(t, "127.0.0.62", pageHandler("")),
		"gone":  startSite(t, "127.0.0.63", pageHandler("")),
		"later": startSite(t, "127.0.0.64", pageHandler("")),
	}
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for crawl, s := range sites {
		for i := range pages {
			u := fmt.Sprintf("%s/p%d", s.base, i)
			key, err := kafkaio.Key(u)
			if err != nil {
				t.Fatal(err)
			}
			m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: crawl, Url: u, UrlFp: uint64(i + 1)})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	p := startFetcher(ctx, t, kcfg, store, "control", 100, Options{
		Politeness: politeness.Options{Delay: floor}, Crawls: specs, Limits: decide.Limits{PauseRecheck: 300 * time.Millisecond},
	})
	defer p.stop(t)

	waitFor(ctx, t, "running crawls fetched", func() bool {
		return sites["slow"].pageHits() == pages && sites["low"].pageHits() == pages
	})
	// the paused crawl has been due for a while
	holdsFor(ctx, t, time.Second, "no request to the paused crawl", func() bool { return len(mustSpans(sites["later"])) == 0 })
	if n := len(mustSpans(sites["later"])); n != 0 {
		t.Errorf("paused crawl: %d requests while paused", n)
	}
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "later", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING})
	waitFor(ctx, t, "resumed crawl fetched", func() bool { return sites["later"].pageHits() == pages })
	holdsFor(ctx, t, 500*time.Millisecond, "no duplicate request", noRepeat(sites["later"])) // a duplicate would show here
	_, hits := sites["later"].snapshot()
	for i := range pages {
		if n := hits[fmt.Sprintf("/p%d", i)]; n != 1 {
			t.Errorf("resumed crawl: /p%d requested %d times, want 1", i, n)
		}
	}
	if n := len(mustSpans(sites["gone"])); n != 0 {
		t.Errorf("cancelled crawl: %d requests", n)
	}

	// the crawl's delay applies (above the floor); a lower one does not
	// lower the floor
	for crawl, want := range map[string]time.Duration{"slow": crawlDelay, "low": floor} {
		spans := mustSpans(sites[crawl])
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		minGap := time.Hour
		for i := 1; i < len(spans); i++ {
			minGap = min(minGap, spans[i].start.Sub(spans[i-1].end))
		}
		if minGap < want-10*time.Millisecond {
			t.Errorf("crawl %s: smallest gap %s, want at least %s", crawl, minGap, want)
		}
		t.Logf("crawl %s: smallest gap between requests %s (want ≥ %s)", crawl, minGap, want)
	}

	// cancelled rows for every request of the cancelled crawl
	var cancelled uint64
	waitFor(ctx, t, "cancelled rows", func() bool {
		row := store.Conn().QueryRow(ctx, "SELECT count() FROM fetch_log FINAL WHERE crawl_id = 'gone' AND error_kind = 'cancelled'")
		if err := row.Scan(&cancelled); err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		return cancelled == pages
	})
}

func mustSpans(s *site) []span {
	spans, _ := s.snapshot()
	return spans
}

// slowAckProducer returns from Write only after after has passed since its
// records became durable, as a loaded machine may learn of the broker's
// acknowledgement late: the consumer can read a record back before Write
// returns.
type slowAckProducer struct {
	Producer
	after time.Duration
}

func (p slowAckProducer) Write(ctx context.Context, msgs ...kafka.Message) error {
	if err := p.Producer.Write(ctx, msgs...); err != nil {
		return err
	}
	t := time.NewTimer(p.after)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TestPausedRequestsSurviveSlowAcks pauses a crawl whose requests the
// fetcher holds, deferring each again every Limits.PauseRecheck, while the
// broker's acknowledgements reach the fetcher late, so that each deferred
// copy is read back before the write that produced it returns. The copy is
// the request now (the held record is acked once the copy is durable):
// after the resume every page is requested exactly once, none is lost as a
// repeat of itself.
func TestPausedRequestsSurviveSlowAcks(t *testing.T) {
	const (
		pages   = 4
		recheck = time.Second
		lateAck = recheck / 2 // past the reader's 200ms poll, short of the recheck
	)
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "held", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED})
	s := startSite(t, "127.0.0.65", pageHandler(""))
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i := range pages {
		u := fmt.Sprintf("%s/p%d", s.base, i)
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{
			CrawlId: "held", Url: u, UrlFp: uint64(i + 1), ScheduledAt: timestamppb.New(time.Now()),
		})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	p := startFetcherProd(ctx, t, kcfg, store, "slow-acks", 100, Options{
		Politeness: politeness.Options{Delay: 50 * time.Millisecond}, Crawls: specs, Limits: decide.Limits{PauseRecheck: recheck},
	}, httpfetch.Options{}, func(p Producer) Producer { return slowAckProducer{Producer: p, after: lateAck} })
	defer p.stop(t)

	// every request is held through a few rechecks
	holdsFor(ctx, t, 3*recheck+lateAck, "no request while paused", func() bool { return s.pageHits() == 0 })
	if n := s.pageHits(); n != 0 {
		t.Fatalf("%d requests while paused", n)
	}
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "held", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING})
	wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
	defer wcancel()
	waitFor(wctx, t, fmt.Sprintf("the %d held pages to be requested after the resume", pages), func() bool {
		return s.pageHits() >= pages
	})
	holdsFor(ctx, t, 2*lateAck, "no duplicate request", noRepeat(s)) // a duplicate would show here
	_, hits := s.snapshot()
	for i := range pages {
		if n := hits[fmt.Sprintf("/p%d", i)]; n != 1 {
			t.Errorf("/p%d requested %d times, want 1", i, n)
		}
	}
	if got := testutil.ToFloat64(p.svc.m.repeatsSkipped.WithLabelValues(skipHeld)); got != 0 {
		t.Errorf("%v held copies acked as repeats", got)
	}
}

// TestCrawlTimeLimit: a crawl whose time limit (limits.max_duration since
// its creation) passes while the fetcher holds its requests stops
// requesting pages at the limit, with no new specification: every request
// started before it, the rest are recorded as cancelled without a request.
func TestCrawlTimeLimit(t *testing.T) {
	const (
		pages = 20
		delay = 200 * time.Millisecond
		limit = 1500 * time.Millisecond
	)
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	s := startSite(t, "127.0.0.67", pageHandler(""))
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i := range pages {
		u := fmt.Sprintf("%s/p%d", s.base, i)
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: "timed", Url: u, UrlFp: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	deadline := created.Add(limit)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "timed", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		CreatedAt: timestamppb.New(created), Limits: &crawlv1.Limits{MaxDuration: durationpb.New(limit)}})
	p := startFetcher(ctx, t, kcfg, store, "timed", 100, Options{Politeness: politeness.Options{Delay: delay}, Crawls: specs})
	defer p.stop(t)

	var fetched, cancelled uint64
	waitFor(ctx, t, "a final row per request", func() bool {
		row := store.Conn().QueryRow(ctx, `SELECT countIf(status = 200), countIf(error_kind = 'cancelled')
			FROM fetch_log FINAL WHERE crawl_id = 'timed'`)
		if err := row.Scan(&fetched, &cancelled); err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		return fetched+cancelled == pages
	})
	holdsFor(ctx, t, 2*delay, "no request after the time limit", func() bool { return s.pageHits() == int(fetched) })
	for _, sp := range mustSpans(s) {
		if sp.start.After(deadline) {
			t.Errorf("%s requested %v after the time limit", sp.path, sp.start.Sub(deadline))
		}
	}
	if fetched == 0 || cancelled == 0 || s.pageHits() != int(fetched) {
		t.Errorf("%d pages fetched, %d cancelled, %d requests: want some of each and a request per page fetched", fetched, cancelled, s.pageHits())
	}
	t.Logf("time limit %v at a %v delay: %d pages fetched, %d cancelled without a request", limit, delay, fetched, cancelled)
}
