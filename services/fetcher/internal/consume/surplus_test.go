package consume

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestHostSurplus: what a host's requests beyond --max-host-queue cost.
//
//   - "alone": a partition holding one big site. Records read further
//     could only feed a host that is full, so its surplus is held over the
//     bound (the in-flight window bounds memory) instead of cycling through
//     the fetch topic: no deferral, every record read once.
//   - "past a busy host": another host of the partition has room (its one
//     request in flight), so the big site's surplus is deferred to get the
//     reader past it, and every page is still fetched once.
func TestHostSurplus(t *testing.T) {
	const (
		delay = 30 * time.Millisecond
		pages = 24
		limit = 3
	)
	tests := []struct {
		name      string
		ip        string
		busyFirst bool
	}{
		{"alone", "127.0.0.93", false},
		{"past a busy host", "127.0.0.94", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcfg := kafkatest.Config(t, 1)
			store := chtest.NewStore(t)
			log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			big := startSite(t, tt.ip, pageHandler(""))
			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			busy := startSite(t, "127.0.0.95", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					select { // in flight until the big site is done
					case <-release:
					case <-r.Context().Done():
					}
				}
				http.NotFound(w, r)
			}))
			w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
			defer w.Close()
			request := func(base, path string, fp uint64) kafka.Message {
				u := base + path
				key, err := kafkaio.Key(u)
				if err != nil {
					t.Fatal(err)
				}
				m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: "c", Url: u, UrlFp: fp, Depth: 1})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			var msgs []kafka.Message
			if tt.busyFirst {
				msgs = append(msgs, request(busy.base, "/slow", 1000))
			}
			for i := range pages {
				msgs = append(msgs, request(big.base, fmt.Sprintf("/p%d", i), uint64(i+1)))
			}
			// Every record is on partition 0 (one partition): in this order.
			if err := w.Write(ctx, msgs[:1]...); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(ctx, msgs[1:]...); err != nil {
				t.Fatal(err)
			}

			var (
				mu      sync.Mutex
				copies  int // deferred copies
				records int
			)
			followCtx, stopFollow := context.WithCancel(ctx)
			var fg errgroup.Group
			follow(t, followCtx, &fg, kcfg, kcfg.Topics().Fetch, func(m kafka.Message, _ *crawlv1.FetchRequest) {
				mu.Lock()
				defer mu.Unlock()
				records++
				if emit.WasDeferred(m) {
					copies++
				}
			})

			p := startFetcherWith(ctx, t, kcfg, store, "surplus", 100, Options{
				Workers: 2, Politeness: politeness.Options{Delay: delay}, Limits: decide.Limits{MaxHostQueue: limit},
				DeferPause: 50 * time.Millisecond,
			}, httpfetch.Options{FetchTimeout: 30 * time.Second})
			defer p.stop(t)
			waitFor(ctx, t, "every page of the big site", func() bool { return big.pageHits() >= pages })
			releaseOnce.Do(func() { close(release) })
			waitFor(ctx, t, "every record acknowledged", func() bool {
				lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), kcfg.Topics().Fetch)
				return err == nil && lag == 0
			})
			stopFollow()
			if err := fg.Wait(); err != nil {
				t.Fatal(err)
			}
			_, hits := big.snapshot()
			for i := range pages {
				if n := hits[fmt.Sprintf("/p%d", i)]; n != 1 {
					t.Errorf("/p%d requested %d times, want once", i, n)
				}
			}
			deferred := testutil.ToFloat64(p.svc.m.deferred)
			mu.Lock()
			defer mu.Unlock()
			if !tt.busyFirst {
				if deferred != 0 || copies != 0 || records != pages {
					t.Errorf("%v deferred, %d copies, %d records in the fetch topic: want the %d requests read once, none deferred",
						deferred, copies, records, pages)
				}
				return
			}
			if copies < pages-limit-1 || deferred != float64(copies) {
				t.Errorf("%d copies deferred (metric %v), want the surplus beyond %d: %d or more", copies, deferred, limit, pages-limit-1)
			}
		})
	}
}
