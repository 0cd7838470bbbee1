package consume

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", http.NotFound)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "<html><body>%s</body></html>", r.URL.Path)
	})
	s := startSite(t, "127.0.0.61", mux)

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	reqs := make([]*crawlv1.FetchRequest, pages)
	for i := range reqs {
		reqs[i] = &crawlv1.FetchRequest{Url: fmt.Sprintf("/p%d", i)}
	}
	writeRequests(ctx, t, kcfg, s, "fa", map[string]uint64{}, reqs...)

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	defer f.Close()
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	svc, stop := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "flushat-test"},
		Politeness: politeness.Options{Delay: time.Millisecond},
		FlushAt:    window / 2,
	}, f, rc, w, time.Hour, window, log)

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
