package consume

import (
	"context"
	"errors"
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
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/redelivery"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// lostLog is a fetch log whose inserts never land: the fetcher died
// between producing its outcomes and inserting their rows.
type lostLog struct{}

func (lostLog) Write(context.Context, ...chstore.FetchLogRow) error {
	return errors.New("killed before the insert")
}

// TestPublishedNotRefetched: a fetcher fetches a partition's requests and
// publishes their outcomes, but none of its fetch-log rows is inserted
// and none of its records is acked (it died within the flush interval).
// The next owner (a group that never committed) reads the partition again:
// it finds no row but reads the FetchedPages back, so it makes no request,
// writes the missing rows, and acks. Without the read-back it fetches
// every page again.
func TestPublishedNotRefetched(t *testing.T) {
	const pages = 10
	tests := []struct {
		name     string
		readback bool
		wantHits int // requests of the new owner
	}{
		{"read back", true, 0},
		{"without read-back", false, pages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcfg := kafkatest.Config(t, 2)
			store := chtest.NewStore(t)
			topics := kcfg.Topics()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			s := startSite(t, "127.0.0.52", pageHandler(""))
			key, err := kafkaio.Key(s.base + "/")
			if err != nil {
				t.Fatal(err)
			}
			part := kafkaio.PartitionFor(key, kcfg.Partitions)
			at := time.Now().Add(-time.Minute).Truncate(time.Second)
			var msgs []kafka.Message
			for i := range pages {
				u := fmt.Sprintf("%s/p%d", s.base, i)
				m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{
					CrawlId: "rb", Url: u, UrlFp: fingerprint.URL("rb", u), ScheduledAt: timestamppb.New(at)})
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
			w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
			defer w.Close()
			if err := w.Write(ctx, msgs...); err != nil {
				t.Fatal(err)
			}

			run := func(group string, flog recorder.FetchLog, readback redelivery.Published, done func() bool) *Service {
				t.Helper()
				reg := prometheus.NewRegistry()
				f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 2 * time.Second})
				defer f.Close()
				rec, err := recorder.New(recorder.Options{}, w, flog, nil, reg)
				if err != nil {
					t.Fatal(err)
				}
				svc, err := New(Options{Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: group}, Recorded: store, Published: readback,
					Politeness: politeness.Options{Delay: 10 * time.Millisecond}},
					f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), w, rec, log, reg)
				if err != nil {
					t.Fatal(err)
				}
				g, err := kafkaio.NewGroup(kcfg, kafkaio.GroupConfig{GroupID: kcfg.GroupFor(group), Topic: topics.Fetch,
					CloseTimeout: time.Second}, svc.Assign, log, reg)
				if err != nil {
					t.Fatal(err)
				}
				runCtx, stop := context.WithCancel(ctx)
				recCtx, stopRec := context.WithCancel(context.WithoutCancel(ctx))
				var eg errgroup.Group
				eg.Go(func() error { return rec.Run(recCtx, time.Second) })
				eg.Go(func() error { defer stopRec(); return g.Run(runCtx) })
				waitFor(ctx, t, group+" done", done)
				stop()
				if err := eg.Wait(); err != nil {
					t.Fatalf("%s: %v", group, err)
				}
				return svc
			}

			// The first owner: every page requested and published, no row.
			run("fetcher", lostLog{}, nil, func() bool {
				b, err := kafkaio.GroupOffsets(ctx, kcfg, "none", topics.Fetched)
				return err == nil && s.pageHits() == pages && b[part].End == pages
			})
			if lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch); err != nil || lag != pages {
				t.Fatalf("first owner's lag %d (%v), want every record unacked", lag, err)
			}

			// The next owner, with the fetch-log writer the fetcher's main
			// wires.
			reg := prometheus.NewRegistry()
			flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
			wctx, stopWriter := context.WithCancel(ctx)
			var wg errgroup.Group
			wg.Go(func() error { return flog.Run(wctx) })
			var rb redelivery.Published
			if tt.readback {
				rb = published.NewReader(kcfg, topics.Fetched, 10*time.Second, 0)
			}
			before := s.pageHits()
			second := run("fetcher-after-crash", flog, rb, func() bool {
				lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher-after-crash"), topics.Fetch)
				return err == nil && lag == 0
			})
			stopWriter()
			if err := wg.Wait(); err != nil {
				t.Fatal(err)
			}
			if n := s.pageHits() - before; n != tt.wantHits {
				t.Errorf("the new owner made %d requests, want %d", n, tt.wantHits)
			}
			if !tt.readback {
				return
			}
			if got := testutil.ToFloat64(second.m.repeatsSkipped.WithLabelValues(skipPublished)); got != pages {
				t.Errorf("repeats recognized from the published pages = %v, want %d", got, pages)
			}
			var rows uint64
			var fetchers string
			if err := store.Conn().QueryRow(ctx, "SELECT count(), arrayStringConcat(groupUniqArray(fetcher), ',') FROM fetch_log FINAL WHERE crawl_id = 'rb' AND status = 200").
				Scan(&rows, &fetchers); err != nil {
				t.Fatal(err)
			}
			if rows != pages || fetchers != "fetcher" {
				t.Errorf("%d fetch_log rows of status 200 by %q, want %d rows written from the pages, naming the fetcher that made the requests", rows, fetchers, pages)
			}
		})
	}
}
