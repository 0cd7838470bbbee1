package consume

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestFlushAtHalfWindow: one busy host, a partition's window of 20
// unacked requests and a fetch log that inserts only once an hour. The
// window fills with requests already made, waiting for their insert; when
// ten of them wait (Options.FlushAt) the insert goes as soon as their rows
// are buffered, so the partition goes on reading, and all but the last
// few requests (fewer than the mark: their rows wait for the interval, as
// on a quiet partition) are fetched, recorded and acked within the test.
// Without the flush mark the partition would stop reading after its
// first 20 requests until the hour's insert.
func TestFlushAtHalfWindow(t *testing.T) {
	const pages, window = 120, 20
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b := newBusyHost(ctx, t, "127.0.0.61", "fa", pages)
	kcfg, store, topics := b.kcfg, b.store, b.kcfg.Topics()
	svc, stop := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "flushat-test"},
		Politeness: politeness.Options{Delay: time.Millisecond},
		FlushAt:    window / 2,
	}, b.f, b.rc, b.w, time.Hour, window, b.log)

	var lag int64
	waitFor(ctx, t, "all but fewer than the flush mark acked", func() bool {
		var err error
		lag, err = kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		return err == nil && lag < window/2
	})
	// An acked request has its row: at least the acked ones are stored.
	var rows uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM fetch_log WHERE crawl_id = 'fa'").Scan(&rows); err != nil {
		t.Fatalf("count fetch_log: %v", err)
	}
	if int64(rows) < pages-lag {
		t.Errorf("fetch_log holds %d rows of the crawl, want at least the %d acked", rows, pages-lag)
	}
	flushed := testutil.ToFloat64(svc.m.writesFlushed)
	if err := stop(); err != nil {
		t.Fatalf("fetcher: %v", err)
	}
	if flushed < 1 {
		t.Errorf("writes flushed %v times, want at least once", flushed)
	}
}

// TestWaitingForInsertOutsideTheWindow: a request whose outcome is with
// the recorder is released from its partition's window (SetRelease) and
// waits for its fetch-log insert beside it, up to the group's
// MaxSettling. With a window of 10, 40 settling and a fetch log that
// inserts once an hour (and no flush mark), the partition goes on
// fetching past its window, pauses below window + settling, and acks
// nothing: the requests still hold the commit until their rows are in.
// Without the release it would stop after its first 10 requests.
func TestWaitingForInsertOutsideTheWindow(t *testing.T) {
	const pages, window, settling = 120, 10, 40
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b := newBusyHost(ctx, t, "127.0.0.62", "fs", pages)
	kcfg, topics, served := b.kcfg, b.kcfg.Topics(), &b.served
	_, stop := runFetcherGroup(t, ctx, kcfg, b.store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "settling-test"},
		Politeness: politeness.Options{Delay: time.Millisecond},
	}, b.f, b.rc, b.w, time.Hour, kafkaio.GroupConfig{MaxInFlight: window, MaxSettling: settling}, b.log)

	waitFor(ctx, t, "requests fetched past the window", func() bool { return served.Load() >= settling })
	holdsFor(ctx, t, 500*time.Millisecond, "fewer than window + settling requests fetched with none acked",
		func() bool { return served.Load() < window+settling })
	lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
	if err != nil {
		t.Fatal(err)
	}
	if lag != pages {
		t.Errorf("lag %d with no row inserted, want %d: a released request was committed before its row", lag, pages)
	}
	if err := stop(); err != nil {
		t.Fatalf("fetcher: %v", err)
	}
}

// busyHost is one host of pages pages whose requests wait in the fetch
// topic of crawl, and what a fetcher of it needs: the tests of the fetch
// log's flush mark and of the requests waiting for it.
type busyHost struct {
	kcfg   kafkaio.Config
	store  *chstore.Store
	log    *zap.Logger
	f      *httpfetch.Fetcher
	w      *kafkaio.Writer
	rc     *robots.Cache
	served atomic.Int64 // the pages it answered
}

func newBusyHost(ctx context.Context, t *testing.T, addr, crawl string, pages int) *busyHost {
	t.Helper()
	b := &busyHost{kcfg: kafkatest.Config(t, 1), store: chtest.NewStore(t),
		log: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))}
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", http.NotFound)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b.served.Add(1)
		_, _ = fmt.Fprintf(w, "<html><body>%s</body></html>", r.URL.Path)
	})
	s := startSite(t, addr, mux)
	reqs := make([]*crawlv1.FetchRequest, pages)
	for i := range reqs {
		reqs[i] = &crawlv1.FetchRequest{Url: fmt.Sprintf("/p%d", i)}
	}
	writeRequests(ctx, t, b.kcfg, s, crawl, map[string]uint64{}, reqs...)
	b.f = httpfetch.New(httpfetch.Options{AllowPrivate: true})
	t.Cleanup(b.f.Close)
	b.w = kafkaio.NewWriter(b.kcfg, b.log, prometheus.NewRegistry())
	t.Cleanup(func() { _ = b.w.Close() })
	b.rc = robots.NewCache(b.f, time.Now, robots.Options{UserAgent: b.f.UserAgent()})
	return b
}
