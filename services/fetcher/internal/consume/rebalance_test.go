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

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// fetcherProc is one fetcher instance of a group: its own service,
// HTTP client, robots cache and group member.
type fetcherProc struct {
	svc    *Service
	reg    *prometheus.Registry // the fetcher's metrics
	group  *kafkaio.Group
	cancel context.CancelFunc
	done   chan error
}

func startFetcher(ctx context.Context, t testing.TB, kcfg kafkaio.Config, store *chstore.Store, name string, maxInFlight int, o Options) *fetcherProc {
	t.Helper()
	return startFetcherWith(ctx, t, kcfg, store, name, maxInFlight, o, httpfetch.Options{})
}

// startFetcherWith is startFetcher with the fetcher's own options (private
// targets are always allowed, the fetch timeout defaults to 2s); with
// o.Servers set, hosts resolve through the fetcher.
func startFetcherWith(ctx context.Context, t testing.TB, kcfg kafkaio.Config, store *chstore.Store, name string, maxInFlight int, o Options, fo httpfetch.Options) *fetcherProc {
	t.Helper()
	return startFetcherProd(ctx, t, kcfg, store, name, maxInFlight, o, fo, nil)
}

// startFetcherProd is startFetcherWith whose Service produces (deferrals,
// held requests, sitemaps, host states) through wrap(writer) when wrap is
// not nil; the recorder keeps the writer itself.
func startFetcherProd(ctx context.Context, t testing.TB, kcfg kafkaio.Config, store *chstore.Store, name string, maxInFlight int, o Options, fo httpfetch.Options, wrap func(Producer) Producer) *fetcherProc {
	t.Helper()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)).Named(name)
	reg := prometheus.NewRegistry()
	fo.AllowPrivate, fo.Metrics = true, reg
	if fo.FetchTimeout == 0 {
		fo.FetchTimeout = 2 * time.Second
	}
	f := httpfetch.New(fo)
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Servers != nil {
		o.Resolve = f.Resolve
	}
	t.Cleanup(f.Close)
	w := kafkaio.NewWriter(kcfg, log, reg)
	t.Cleanup(func() { _ = w.Close() })
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rec, stopRec := startRecorder(t, ctx, w, flog, nil, reg)
	o.Topics, o.Outcome.InstanceID = kcfg.Topics(), name
	var prod Producer = w
	if wrap != nil {
		prod = wrap(w)
	}
	svc, err := New(o, f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), prod, rec, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	group, err := kafkaio.NewGroup(kcfg, kafkaio.GroupConfig{
		GroupID: kcfg.GroupFor("fetcher"), Topic: kcfg.Topics().Fetch, MaxInFlight: maxInFlight, CloseTimeout: 3 * time.Second,
	}, svc.Assign, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	p := &fetcherProc{svc: svc, reg: reg, group: group, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := group.Run(runCtx)
		stopRec()
		p.done <- err
	}()
	return p
}

func (p *fetcherProc) stop(t testing.TB) {
	t.Helper()
	p.cancel()
	if err := <-p.done; err != nil {
		t.Errorf("fetcher: %v", err)
	}
}

// TestRebalanceKeepsPoliteness adds a second fetcher to the group mid-crawl
// and then removes the first, so partitions move twice, and checks in the
// sites' own request logs that no host ever saw two requests closer than
// its delay: 300ms, or the 1s Crawl-delay of two of the hosts, which only
// the persisted host state carries to the next owner (its robots cache is
// empty, so without the state it would fetch robots.txt one default delay
// after the assignment).
func TestRebalanceKeepsPoliteness(t *testing.T) {
	const (
		delay      = 300 * time.Millisecond
		crawlDelay = time.Second
	)
	kcfg := kafkatest.Config(t, 4)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()

	type hostSpec struct {
		site  *site
		pages int
		delay time.Duration
	}
	var hosts []hostSpec
	for i, spec := range []struct {
		robots string
		pages  int
		delay  time.Duration
	}{
		{"User-agent: *\nCrawl-delay: 1\n", 7, crawlDelay},
		{"User-agent: *\nCrawl-delay: 1\n", 7, crawlDelay},
		{"", 20, delay},
		{"", 20, delay},
	} {
		s := startSite(t, fmt.Sprintf("127.0.0.%d", 13+i), pageHandler(spec.robots))
		hosts = append(hosts, hostSpec{s, spec.pages, spec.delay})
	}
	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for _, h := range hosts {
		for i := range h.pages {
			u := fmt.Sprintf("%s/p%d", h.site.base, i)
			key, _ := kafkaio.Key(u)
			m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "rb", Url: u})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	o := Options{
		Politeness: politeness.Options{Delay: delay, MaxCrawlDelay: 2 * time.Second},
		HostStates: hoststate.NewLoader(kcfg, topics.HostState),
	}
	a := startFetcher(ctx, t, kcfg, store, "fetcher-a", 100, o)
	waitFor(ctx, t, "fetcher a assigned", func() bool { return len(a.group.Assigned()) == 4 })
	// Mid-crawl: every host fetched from a few times more before each move.
	progressed := func(more int) func() bool {
		base := make([]int, len(hosts))
		for i, h := range hosts {
			base[i] = h.site.pageHits()
		}
		return func() bool {
			for i, h := range hosts {
				if h.site.pageHits() < base[i]+more {
					return false
				}
			}
			return true
		}
	}
	waitFor(ctx, t, "every host fetched twice by a", progressed(2))
	b := startFetcher(ctx, t, kcfg, store, "fetcher-b", 100, o)
	waitFor(ctx, t, "partitions shared", func() bool { return len(b.group.Assigned()) > 0 && len(a.group.Assigned()) > 0 })
	waitFor(ctx, t, "every host fetched twice more with a and b", progressed(2))
	a.stop(t) // scale in: everything moves to b
	waitFor(ctx, t, "fetcher b owns everything", func() bool { return len(b.group.Assigned()) == 4 })
	waitFor(ctx, t, "crawl drained", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		return err == nil && lag == 0
	})
	b.stop(t)

	violations, duplicates, requests := 0, 0, 0
	for _, h := range hosts {
		spans, hits := h.site.snapshot()
		requests += len(spans)
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].end); gap < h.delay {
				violations++
				t.Errorf("%s: %s started %v after %s ended, delay %v", h.site.base, spans[i].path, gap, spans[i-1].path, h.delay)
			}
		}
		for i := range h.pages {
			n := hits[fmt.Sprintf("/p%d", i)]
			if n == 0 {
				t.Errorf("%s/p%d never fetched", h.site.base, i)
			}
			duplicates += max(n-1, 0)
		}
	}
	loaded := testutil.ToFloat64(b.svc.m.hostStatesLoaded) + testutil.ToFloat64(a.svc.m.hostStatesLoaded)
	if loaded == 0 {
		t.Errorf("no host state loaded at any assignment")
	}
	t.Logf("%d requests, %d politeness violations, %d duplicate fetches, %v host states loaded", requests, violations, duplicates, loaded)
}
