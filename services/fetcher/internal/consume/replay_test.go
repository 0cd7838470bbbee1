package consume

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/hanguptest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

// TestReplayRefusedKeepsPoliteness crawls a site that hangs up on every
// second request of a connection, after receiving it. net/http would send
// each such request again at once on a new connection; the fetcher must
// not: every request the site received is one the politeness engine sent
// (one fetch_log row each, robots.txt aside), at least the host's delay
// after the previous one, and the hung-up requests are retried on the
// host's later turns until every page is fetched.
func TestReplayRefusedKeepsPoliteness(t *testing.T) {
	const (
		delay = 150 * time.Millisecond
		pages = 4
	)
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	site := hanguptest.Start(t, "127.0.0.83")
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i := range pages {
		u := fmt.Sprintf("%s/p%d", site.URL, i)
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: "rr", Url: u, UrlFp: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	p := startFetcherWith(ctx, t, kcfg, store, "replay", 100, Options{
		Workers: 2, Outcome: outcome.Options{MaxAttempts: 5}, Politeness: politeness.Options{Delay: delay},
	}, httpfetch.Options{})
	var logged uint64
	waitFor(ctx, t, "a 200 row for every page", func() bool {
		var ok uint64
		if err := store.Conn().QueryRow(ctx, "SELECT uniqExact(url) FROM fetch_log WHERE crawl_id = 'rr' AND status = 200").Scan(&ok); err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		return ok == pages
	})
	p.stop(t)
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM fetch_log FINAL WHERE crawl_id = 'rr'").Scan(&logged); err != nil {
		t.Fatalf("query fetch_log: %v", err)
	}

	got := site.Received()
	requests := 0
	for i, a := range got {
		if a.Path != "/robots.txt" {
			requests++
		}
		if i > 0 {
			if gap := a.At.Sub(got[i-1].At); gap < delay {
				t.Errorf("%s arrived %v after %s, want at least the delay %v", a.Path, gap, got[i-1].Path, delay)
			}
		}
	}
	refused := metricstest.Value(t, p.reg, "replays_refused_total", "", "")
	t.Logf("%d page requests received, %d fetch_log rows, %v replays refused", requests, logged, refused)
	if uint64(requests) != logged {
		t.Errorf("the site received %d page requests, the fetch log has %d attempts: a request the politeness engine did not send", requests, logged)
	}
	if refused == 0 {
		t.Error("no replay was refused: the site never hung up on a reused connection, the test proves nothing")
	}
}
