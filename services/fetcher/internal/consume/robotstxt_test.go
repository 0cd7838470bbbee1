package consume

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// robotsProc is one fetcher process for TestRobotsSurviveRestart: its own
// HTTP client, robots cache, recorder and Service, with a clock.
type robotsProc struct {
	svc  *Service
	stop func() // ends the recorder (flushing), closes the clients
}

func startRobotsProc(t *testing.T, kcfg kafkaio.Config, store *chstore.Store, loadFrom RobotsStore, now func() time.Time, log *zap.Logger) *robotsProc {
	t.Helper()
	reg := prometheus.NewRegistry()
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 5 * time.Second})
	w := kafkaio.NewWriter(kcfg, log, reg)
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rlog := chstore.NewBatchWriter(store, chstore.RobotsTxt, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rec, stopRec := startRecorder(t, t.Context(), w, flog, rlog, reg)
	rc := robots.NewCache(f, now, robots.Options{UserAgent: f.UserAgent()})
	svc, err := New(Options{
		Topics: kcfg.Topics(), Workers: 8, Outcome: outcome.Options{InstanceID: "robots-test"}, Now: now,
		Politeness: politeness.Options{Delay: 20 * time.Millisecond},
		RobotsTxt:  loadFrom,
	}, f, rc, w, rec, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	p := &robotsProc{svc: svc, stop: func() {
		once.Do(func() {
			stopRec()
			_ = w.Close()
			f.Close()
		})
	}}
	t.Cleanup(p.stop)
	return p
}

// fetchAll assigns partition to p, hands it one request per URL, waits
// until every request is acked, and closes the partition.
func (p *robotsProc) fetchAll(ctx context.Context, t *testing.T, topic string, partition int, urls []string) {
	t.Helper()
	h, err := p.svc.Assign(ctx, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[int64]bool{}
	)
	batch := make([]kafka.Message, 0, len(urls))
	for i, u := range urls {
		m, err := kafkaio.NewMessage(topic, []byte("k"), &crawlv1.FetchRequest{CrawlId: "robots", Url: u, UrlFp: uint64(1000*partition + i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		m.Offset, m.Partition = int64(i), partition
		batch = append(batch, m)
	}
	if err := h.Handle(ctx, batch, func(m kafka.Message) { mu.Lock(); acked[m.Offset] = true; mu.Unlock() }); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "every request acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) == len(urls)
	})
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRobotsSurviveRestart: a fetcher fetches the robots.txt of N hosts
// and stops; a new process (new Service, new robots cache) is assigned the
// same partition and fetches more pages of those hosts. Within the
// robots.txt's life the sites see no new robots.txt request, and the rules,
// Crawl-delay and Sitemap lines are those of the first fetch; an expired
// entry is fetched again; a store that cannot be read falls back to
// fetching, with a warning.
func TestRobotsSurviveRestart(t *testing.T) {
	const hosts = 5
	tests := []struct {
		name         string
		later        time.Duration // clock of the second process, ahead of the first
		broken       bool          // the second process's store cannot be read
		wantRestored int
		wantRobots   int // robots.txt requests per site in all
		wantWarning  bool
	}{
		{name: "restart within the robots.txt's life", later: time.Hour, wantRestored: hosts, wantRobots: 1},
		{name: "expired entries are fetched again", later: robots.DefaultTTL + time.Minute, wantRestored: 0, wantRobots: 2},
		{name: "unreadable store falls back to fetching", later: time.Hour, broken: true, wantRestored: 0, wantRobots: 2, wantWarning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcfg := kafkatest.Config(t, 4)
			store := chtest.NewStore(t)
			topic := kcfg.Topics().Fetch
			const partition = 2
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()

			var (
				sites      []*site
				first, now []string // URLs fetched before and after the restart
			)
			for i := range hosts {
				body := fmt.Sprintf("User-agent: *\nDisallow: /private\nCrawl-delay: 0.05\nSitemap: http://maps.test/%d.xml\n", i)
				s := startSite(t, fmt.Sprintf("127.0.2.%d", 10+i), pageHandler(body))
				sites = append(sites, s)
				first = append(first, s.base+"/p0")
				now = append(now, s.base+"/p1", s.base+"/private/x")
			}
			// a site whose robots.txt fails: nothing of it may be stored
			broken := startSite(t, "127.0.2.30", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
			quiet := zap.NewNop()
			p1 := startRobotsProc(t, kcfg, store, store, time.Now, quiet)
			p1.fetchAll(ctx, t, topic, partition, append(first, broken.base+"/p0"))
			p1.stop()
			if n := countRows(ctx, t, store, "SELECT count() FROM robots_txt WHERE host = '"+broken.base[len("http://"):]+"'"); n != 0 {
				t.Errorf("%d robots_txt rows for a robots.txt answered 503, want 0", n)
			}
			for _, s := range sites {
				if _, hits := s.snapshot(); hits["/robots.txt"] != 1 || hits["/p0"] != 1 {
					t.Fatalf("%s: first process made %d robots.txt and %d page requests, want 1 and 1", s.base, hits["/robots.txt"], hits["/p0"])
				}
			}
			if n := countRows(ctx, t, store, "SELECT count() FROM robots_txt WHERE partition = 2 AND outcome = 'parsed'"); n != hosts {
				t.Fatalf("%d robots_txt rows after the first process, want %d", n, hosts)
			}

			loadFrom := RobotsStore(store)
			if tt.broken {
				closed := chtest.NewStore(t)
				if err := closed.Close(); err != nil {
					t.Fatal(err)
				}
				loadFrom = closed
			}
			core, logs := observer.New(zap.WarnLevel)
			later := tt.later
			p2 := startRobotsProc(t, kcfg, store, loadFrom, func() time.Time { return time.Now().Add(later) }, zap.New(core))
			p2.fetchAll(ctx, t, topic, partition, now)

			if got := testutil.ToFloat64(p2.svc.m.robotsRestored); got != float64(tt.wantRestored) {
				t.Errorf("crawler_fetcher_robots_restored_total = %v, want %d", got, tt.wantRestored)
			}
			for i, s := range sites {
				_, hits := s.snapshot()
				if hits["/robots.txt"] != tt.wantRobots {
					t.Errorf("%s: robots.txt requested %d times in all, want %d", s.base, hits["/robots.txt"], tt.wantRobots)
				}
				if hits["/p1"] != 1 || hits["/private/x"] != 0 {
					t.Errorf("%s: /p1 requested %d times, /private/x %d times, want 1 and 0", s.base, hits["/p1"], hits["/private/x"])
				}
				if tt.wantRestored == 0 {
					continue
				}
				origin, err := robots.Origin(s.base)
				if err != nil {
					t.Fatal(err)
				}
				r, ok := p2.svc.robots.Lookup(origin)
				if !ok || r.CrawlDelay != 50*time.Millisecond || !slices.Equal(r.Sitemaps, []string{fmt.Sprintf("http://maps.test/%d.xml", i)}) ||
					r.Text() != "User-agent: *\nDisallow: /private\n" {
					t.Errorf("%s: restored rules %+v (found %v), want the first fetch's", s.base, r, ok)
				}
			}
			denied := countRows(ctx, t, store, fmt.Sprintf("SELECT count() FROM fetch_log FINAL WHERE url LIKE '%%/private/x' AND error_kind = '%s'", failure.RobotsDenied))
			if denied != hosts {
				t.Errorf("%d robots_denied rows for /private/x, want %d", denied, hosts)
			}
			warned := logs.FilterMessage("started without stored robots.txt, fetching it again").Len()
			if (warned > 0) != tt.wantWarning {
				t.Errorf("%d load warnings, want one: %v", warned, tt.wantWarning)
			}
		})
	}
}

func countRows(ctx context.Context, t *testing.T, store *chstore.Store, q string) int {
	t.Helper()
	var n uint64
	if err := store.Conn().QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return int(n)
}
