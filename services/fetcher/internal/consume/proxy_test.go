package consume

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// TestProxyFeedback fetches through real forward proxies with credentials
// (HTTP and SOCKS5, one per host, sticky) and checks the ProxyFeedback
// published for every page: success, blocked (403/429 through the proxy)
// and timeout, with the proxy's id and never its credentials.
func TestProxyFeedback(t *testing.T) {
	const secret = "pr0xy-s3cret"
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	mux := pageHandler("")
	mux.HandleFunc("/forbidden", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	mux.HandleFunc("/throttled", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	hosts := []*site{startSite(t, "127.0.0.17", mux), startSite(t, "127.0.0.18", mux)}

	pool := proxies.NewPool()
	httpProxy := proxytest.Start(t, "127.0.0.19", proxytest.Options{Username: "u", Password: secret})
	socksProxy := proxytest.StartSOCKS5(t, "127.0.0.20", proxytest.Options{Username: "u", Password: secret})
	for id, p := range map[string]*proxytest.Proxy{"px-http": httpProxy, "px-socks": socksProxy} {
		if err := pool.Put(id, p.URL()); err != nil {
			t.Fatal(err)
		}
	}
	wantOutcome := map[string]string{"/p": outcome.ProxySuccess, "/forbidden": outcome.ProxyBlocked, "/throttled": outcome.ProxyBlocked, "/hang": outcome.ProxyTimeout}
	var msgs []kafka.Message
	for _, h := range hosts {
		for _, path := range []string{"/p", "/forbidden", "/throttled", "/hang"} {
			u := h.base + path
			key, _ := kafkaio.Key(u)
			m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "px", Url: u})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, Proxies: pool, FetchTimeout: 500 * time.Millisecond})
	defer f.Close()
	_, stopFetcher := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "px-test", MaxAttempts: 1},
		Politeness: politeness.Options{Delay: 50 * time.Millisecond},
	}, f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), w, 20*time.Millisecond, kafkaio.DefaultMaxInFlight, log)

	var (
		mu       sync.Mutex
		feedback []*crawlv1.ProxyFeedback
		leaked   bool
	)
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, topics.ProxyFeedback, func(m kafka.Message, fb *crawlv1.ProxyFeedback) {
		mu.Lock()
		feedback = append(feedback, fb)
		leaked = leaked || bytes.Contains(m.Value, []byte(secret)) || bytes.Contains(m.Key, []byte(secret))
		mu.Unlock()
	})
	waitFor(ctx, t, "feedback for every page", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(feedback) >= len(msgs)
	})
	if err := stopFetcher(); err != nil {
		t.Fatal(err)
	}
	stopFollow()
	_ = fg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(feedback) != len(msgs) {
		t.Errorf("%d feedback records, want %d", len(feedback), len(msgs))
	}
	if leaked {
		t.Errorf("proxy credentials in a feedback record")
	}
	proxyOf := map[string]string{}
	var got []string
	for _, fb := range feedback {
		if prev, ok := proxyOf[fb.GetHost()]; ok && prev != fb.GetProxyId() {
			t.Errorf("host %s went through %s and %s: proxies must be sticky per host", fb.GetHost(), prev, fb.GetProxyId())
		}
		proxyOf[fb.GetHost()] = fb.GetProxyId()
		got = append(got, fmt.Sprintf("%s %s %s", fb.GetHost(), fb.GetProxyId(), fb.GetOutcome()))
		if fb.GetLatencyUs() <= 0 || fb.GetAt() == nil {
			t.Errorf("feedback without latency or time: %v", fb)
		}
	}
	sort.Strings(got)
	counts := map[string]int{}
	for _, fb := range feedback {
		counts[fb.GetOutcome()]++
	}
	want := map[string]int{}
	for _, o := range wantOutcome {
		want[o] += len(hosts)
	}
	for o, n := range want {
		if counts[o] != n {
			t.Errorf("%d %q outcomes, want %d (%v)", counts[o], o, n, got)
		}
	}
	if httpProxy.Requests()+socksProxy.Requests() == 0 {
		t.Errorf("no request went through the proxies")
	}
	t.Logf("feedback: %v; http proxy %d requests, socks5 proxy %d", got, httpProxy.Requests(), socksProxy.Requests())
}
