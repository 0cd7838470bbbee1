package consume

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
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
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// hangUpSite is a real HTTP/1.1 server that answers the first request of
// every connection with keep-alive and receives the second one in full,
// then closes the connection without an answer. It logs every request it
// received with its arrival time.
type hangUpSite struct {
	base string
	mu   sync.Mutex
	got  []arrival
}

type arrival struct {
	path string
	at   time.Time
}

func startHangUpSite(t *testing.T, ip string) *hangUpSite {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &hangUpSite{base: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return s
}

func (s *hangUpSite) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.got = append(s.got, arrival{path: req.URL.Path, at: time.Now()})
		s.mu.Unlock()
		if n == 2 {
			return // received, never answered
		}
		if req.URL.Path == "/robots.txt" {
			fmt.Fprint(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		body := "<html><body><p>page " + req.URL.Path + "</p></body></html>"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

func (s *hangUpSite) arrivals() []arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]arrival(nil), s.got...)
}

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

	site := startHangUpSite(t, "127.0.0.83")
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i := range pages {
		u := fmt.Sprintf("%s/p%d", site.base, i)
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
		Workers: 2, MaxAttempts: 5, Politeness: politeness.Options{Delay: delay},
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

	got := site.arrivals()
	requests := 0
	for i, a := range got {
		if a.path != "/robots.txt" {
			requests++
		}
		if i > 0 {
			if gap := a.at.Sub(got[i-1].at); gap < delay {
				t.Errorf("%s arrived %v after %s, want at least the delay %v", a.path, gap, got[i-1].path, delay)
			}
		}
	}
	refused := testutil.ToFloat64(p.svc.m.replaysRefused)
	t.Logf("%d page requests received, %d fetch_log rows, %v replays refused", requests, logged, refused)
	if uint64(requests) != logged {
		t.Errorf("the site received %d page requests, the fetch log has %d attempts: a request the politeness engine did not send", requests, logged)
	}
	if refused == 0 {
		t.Error("no replay was refused: the site never hung up on a reused connection, the test proves nothing")
	}
}
