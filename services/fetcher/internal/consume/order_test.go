package consume

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestBoundedQueueBreadthFirst: a host's queue holds at most 3 requests
// (--max-host-queue) while another host of the partition has room (a busy
// host, its one request in flight throughout: see TestHostSurplus), so
// most of its requests are deferred to the fetch topic and come back
// later; the host's site still sees every depth-1 page before any depth-2
// page. "deep first": the depth-2 requests are
// ahead of the depth-1 ones in the topic, so the depth-1 ones find the
// queue full of deeper work, which makes room for them (with the FIFO
// queues before, the site saw /b0…/b5 first). "deep later": the depth-2
// requests arrive once the host has started, while depth-1 ones wait
// outside, deferred (this one passed with the FIFO queues too: it guards
// the deferral path).
func TestBoundedQueueBreadthFirst(t *testing.T) {
	const (
		delay   = 40 * time.Millisecond
		shallow = 8
		deep    = 6
	)
	tests := []struct {
		name      string
		ip, busy  string
		deepFirst bool
	}{
		{"deep first", "127.0.0.91", "127.0.0.97", true},
		{"deep later", "127.0.0.92", "127.0.0.98", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcfg := kafkatest.Config(t, 1)
			store := chtest.NewStore(t)
			log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			srv := startSite(t, tt.ip, pageHandler(""))
			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			busy := startSite(t, tt.busy, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/slow") { // in flight until the test is done
					select {
					case <-release:
					case <-r.Context().Done():
					}
				}
				http.NotFound(w, r)
			}))
			w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
			defer w.Close()
			requests := func(base, prefix string, n int, depth uint32) []kafka.Message {
				var msgs []kafka.Message
				for i := range n {
					u := fmt.Sprintf("%s/%s%d", base, prefix, i)
					key, err := kafkaio.Key(u)
					if err != nil {
						t.Fatal(err)
					}
					m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{
						CrawlId: "c", Url: u, UrlFp: uint64(depth)<<32 | uint64(i+1), Depth: depth})
					if err != nil {
						t.Fatal(err)
					}
					msgs = append(msgs, m)
				}
				return msgs
			}
			first := append(requests(busy.base, "slow", 1, 0), requests(srv.base, "a", shallow, 1)...)
			if tt.deepFirst {
				first = append(requests(srv.base, "b", deep, 2), first...)
				first[0], first[deep] = first[deep], first[0] // the busy host's request first
			}
			if err := w.Write(ctx, first...); err != nil {
				t.Fatal(err)
			}
			p := startFetcherWith(ctx, t, kcfg, store, "bfs", 100, Options{
				Workers: 2, Politeness: politeness.Options{Delay: delay}, Limits: decide.Limits{MaxHostQueue: 3},
			}, httpfetch.Options{FetchTimeout: 30 * time.Second})
			defer p.stop(t)
			if !tt.deepFirst {
				waitFor(ctx, t, "the first page", func() bool { return srv.pageHits() >= 1 })
				if err := w.Write(ctx, requests(srv.base, "b", deep, 2)...); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(ctx, t, "every page", func() bool { return srv.pageHits() >= shallow+deep })
			releaseOnce.Do(func() { close(release) })
			if n := testutil.ToFloat64(p.svc.m.deferred); n == 0 {
				t.Error("no request deferred: the queue's bound was not exercised")
			}
			spans, hits := srv.snapshot()
			sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
			var order []string
			lastShallow, firstDeep := -1, len(spans)
			for i, s := range spans {
				if s.path == "/robots.txt" {
					continue
				}
				order = append(order, s.path)
				if strings.HasPrefix(s.path, "/a") {
					lastShallow = i
				} else if i < firstDeep {
					firstDeep = i
				}
			}
			t.Logf("order: %s", strings.Join(order, " "))
			if lastShallow > firstDeep {
				t.Errorf("a depth-2 page was fetched before the last depth-1 page: %s", strings.Join(order, " "))
			}
			for path, n := range hits {
				if n != 1 && path != "/robots.txt" {
					t.Errorf("%s requested %d times, want once", path, n)
				}
			}
		})
	}
}
