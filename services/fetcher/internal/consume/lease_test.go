package consume

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestLeaseStopsRequests: a fetcher whose group coordinator falls silent
// (the broker drops its heartbeats, as a cut link does) stops requesting
// before its session can expire and another fetcher take its hosts: the
// request in flight then is cancelled, no request starts until the
// coordinator answers again, and afterwards every page is fetched, the
// cancelled one again, with no politeness violation.
func TestLeaseStopsRequests(t *testing.T) {
	const delay = 300 * time.Millisecond
	cluster, brokers := kafkatest.Cluster(t)
	kcfg := kafkatest.ConfigFor(t, brokers, 1)
	kcfg.SessionTimeout = 3 * time.Second
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	var silent atomic.Bool
	cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, silent.Load() // handled without an answer: dropped
	})

	// host A: /slow hangs the first time until its client gives up;
	// host B: pages fetched all along.
	var (
		slowMu        sync.Mutex
		slowStarted   = make(chan struct{})
		slowCancelled time.Time
		slowCalls     int
	)
	muxA := pageHandler("")
	muxA.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		slowMu.Lock()
		slowCalls++
		first := slowCalls == 1
		slowMu.Unlock()
		if first {
			close(slowStarted)
			select {
			case <-r.Context().Done():
				slowMu.Lock()
				slowCancelled = time.Now()
				slowMu.Unlock()
			case <-time.After(20 * time.Second):
			}
			return
		}
		fmt.Fprint(w, "<html>slow, at last</html>")
	})
	hostA := startSite(t, "127.0.0.90", muxA)
	hostB := startSite(t, "127.0.0.91", pageHandler(""))

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	urls := []string{hostA.base + "/slow"}
	for i := range 16 {
		urls = append(urls, fmt.Sprintf("%s/p%d", hostB.base, i))
	}
	var msgs []kafka.Message
	for i, u := range urls {
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "c1", Url: u, UrlFp: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, ResponseHeaderTimeout: 30 * time.Second, FetchTimeout: 30 * time.Second})
	defer f.Close()
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	_, stop := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "lease"},
		Politeness: politeness.Options{Delay: delay, MaxCrawlDelay: time.Second},
	}, f, rc, w, 50*time.Millisecond, 100, log)

	select {
	case <-slowStarted:
	case <-ctx.Done():
		t.Fatal("the slow page was never requested")
	}
	silent.Store(true)
	cut := time.Now()
	waitFor(ctx, t, "the slow request cancelled", func() bool {
		slowMu.Lock()
		defer slowMu.Unlock()
		return !slowCancelled.IsZero()
	})
	slowMu.Lock()
	lapse := slowCancelled
	slowMu.Unlock()
	if lapse.Sub(cut) >= kcfg.SessionTimeout {
		t.Fatalf("the request in flight was cancelled %v after the coordinator fell silent, not before the session timeout %v", lapse.Sub(cut), kcfg.SessionTimeout)
	}
	// Nothing starts while the lease has lapsed (until the coordinator
	// answers again or the member joins a new generation).
	holdsFor(ctx, t, 1500*time.Millisecond, "no request after the lease lapsed", func() bool {
		for _, s := range []*site{hostA, hostB} {
			spans, _ := s.snapshot()
			for _, sp := range spans {
				if sp.start.After(lapse.Add(50 * time.Millisecond)) {
					t.Logf("%s%s requested %v after the lease lapsed, before the coordinator answered again", s.base, sp.path, sp.start.Sub(lapse))
					return false
				}
			}
		}
		return true
	})
	silent.Store(false)
	t.Logf("lease lapsed %v after the coordinator fell silent (session timeout %v)", lapse.Sub(cut).Round(time.Millisecond), kcfg.SessionTimeout)

	waitFor(ctx, t, "every page fetched and committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		return err == nil && lag == 0 && hostB.pageHits() == 16 && hostA.pageHits() == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*site{hostA, hostB} {
		spans, _ := s.snapshot()
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].end); gap < delay-10*time.Millisecond {
				t.Errorf("%s: %s started %v after %s ended, under the delay %v", s.base, spans[i].path, gap, spans[i-1].path, delay)
			}
		}
	}
}
