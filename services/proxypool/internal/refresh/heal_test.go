package refresh_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// source serves a proxy list (an HTML table page) that the test changes.
type source struct {
	mu    sync.Mutex
	addrs []string
}

func (s *source) set(addrs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addrs = addrs
}

func (s *source) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprint(w, "<html><body><table><tr><th>IP</th><th>Port</th></tr>")
	for _, a := range s.addrs {
		h, p, _ := net.SplitHostPort(a)
		fmt.Fprintf(w, "<tr><td>%s</td><td>%s</td></tr>", h, p)
	}
	fmt.Fprint(w, "</table></body></html>")
}

// TestPoolHealsWhenProxiesDie harvests proxies from a proxy-list page,
// kills some mid-run, bans one through fetcher feedback on the real
// broker, and checks that every round evicts the lost ones, harvests
// newcomers as the page lists them and keeps the topic's live set at the
// target size.
func TestPoolHealsWhenProxiesDie(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	topic := kcfg.Topics().Proxies
	page := origin(t, "127.0.0.80")
	var px []*proxytest.Proxy
	ids := make([]string, 7)
	for i := range 7 {
		p := proxytest.Start(t, fmt.Sprintf("127.0.0.%d", 81+i), proxytest.Options{})
		px = append(px, p)
		e, _, _ := proxylist.ParseLine(p.Addr())
		ids[i] = e.ID()
	}
	src := &source{}
	src.set(px[0].Addr(), px[1].Addr(), px[2].Addr())
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.88:0")
	if err != nil {
		t.Fatal(err)
	}
	srcSrv := httptest.NewUnstartedServer(src)
	srcSrv.Listener.Close()
	srcSrv.Listener = ln
	srcSrv.Start()
	defer srcSrv.Close()

	reg := prometheus.NewRegistry()
	metrics, err := refresh.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kcfg, zap.NewNop(), reg)
	defer w.Close()
	p := pool.NewWithConfig(pool.Config{CheckTimeout: time.Second, MaxSize: 5, EvictAfter: 1, BanHosts: 2})
	checker := check.New(check.Config{URL: page.URL, Expect: checkBody, Timeout: time.Second}, check.ProxyClient, time.Now)
	loop := refresh.New(refresh.Config{Interval: time.Hour, Concurrency: 4, TargetSize: 3}, p, checker,
		publish.New(w, topic), zap.NewNop(), metrics).
		WithHarvester(harvest.New([]string{srcSrv.URL + "/free-proxy-list"}, 5*time.Second))
	state := follow(t, kcfg, topic)

	liveIs := func(want ...int) func(map[string][]kafka.Message) bool {
		return func(recs map[string][]kafka.Message) bool {
			live := map[string]bool{}
			for k, ms := range recs {
				if ms[len(ms)-1].Value != nil {
					live[k] = true
				}
			}
			if len(live) != len(want) {
				return false
			}
			for _, i := range want {
				if !live[ids[i]] {
					return false
				}
			}
			return true
		}
	}
	usable := func(want int) {
		t.Helper()
		if got := p.Usable(); got != want {
			t.Errorf("usable = %d, want %d (%+v)", got, want, p.Snapshot())
		}
	}

	// Round 1: the empty pool harvests the page's three proxies.
	if err := loop.Round(ctx); err != nil {
		t.Fatal(err)
	}
	state.waitFor(t, "proxies 0-2 live", liveIs(0, 1, 2))

	// Two proxies die; the page now lists two newcomers (and a dead one).
	px[0].Close()
	px[1].Close()
	src.set(px[0].Addr(), px[2].Addr(), px[3].Addr(), px[4].Addr())
	if err := loop.Round(ctx); err != nil {
		t.Fatal(err)
	}
	state.waitFor(t, "0 and 1 replaced by 3 and 4", liveIs(2, 3, 4))
	usable(3)

	// A fetcher reports that two hosts block proxy 3: it is banned.
	fbMetrics, err := feedback.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	fed := &signallingPool{Pool: p, fed: make(chan struct{}, 1)}
	group, err := feedback.NewGroup(kcfg, fed, nil, fbMetrics, zap.NewNop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithCancel(ctx)
	gdone := make(chan error, 1)
	go func() { gdone <- group.Run(gctx) }()
	defer func() {
		gcancel()
		if err := <-gdone; err != nil {
			t.Errorf("feedback group: %v", err)
		}
	}()
	var msgs []kafka.Message
	for _, host := range []string{"a.example", "b.example"} {
		m, err := kafkaio.NewMessage(kcfg.Topics().ProxyFeedback, []byte(ids[3]),
			&crawlv1.ProxyFeedback{ProxyId: ids[3], Host: host, Outcome: "blocked", At: timestamppb.Now()})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, kafka.Message{Topic: kcfg.Topics().ProxyFeedback, Key: []byte("x"), Value: []byte{0xff}}) // poison
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	waitSignalled(t, fed.fed, func() bool { return banned(p, ids[3]) },
		func() string { return fmt.Sprintf("proxy 3 not banned: %+v", p.Snapshot()) })
	src.set(px[2].Addr(), px[3].Addr(), px[4].Addr(), px[5].Addr(), px[6].Addr())
	if err := loop.Round(ctx); err != nil {
		t.Fatal(err)
	}
	// 3 is tombstoned and evicted, and not harvested again although the
	// page still lists it; the refill adds 5 and 6.
	state.waitFor(t, "3 banned, 5 and 6 live", func(recs map[string][]kafka.Message) bool {
		return lastIs(recs, ids[3], false) && lastIs(recs, ids[5], true) && lastIs(recs, ids[6], true) && lastIs(recs, ids[2], true)
	})
	state.waitFor(t, "live set 2, 4, 5, 6", liveIs(2, 4, 5, 6))
	if n := len(p.Snapshot()); n != 4 || banned(p, ids[3]) {
		t.Errorf("pool holds %d proxies, want 4 without the banned one: %+v", n, p.Snapshot())
	}
	metricsText := gather(t, reg)
	for _, want := range []string{"harvested_proxies_total", "evicted_proxies_total", `feedback_total{outcome="blocked"} 2`, "feedback_undecodable_total 1"} {
		if !strings.Contains(metricsText, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// signallingPool is the pool the feedback group feeds, leaving a token on
// fed after each report.
type signallingPool struct {
	*pool.Pool
	fed chan struct{}
}

func (p *signallingPool) Feedback(proxyID, host, outcome string) bool {
	ok := p.Pool.Feedback(proxyID, host, outcome)
	signal(p.fed)
	return ok
}

func banned(p *pool.Pool, id string) bool {
	for _, st := range p.Snapshot() {
		if st.Entry.ID() == id {
			return st.Banned
		}
	}
	return false
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := mf.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, "%s %v\n", name, v)
		}
	}
	return b.String()
}
