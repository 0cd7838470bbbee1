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
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/publish"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/refresh"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

const (
	checkBody = "trawl check page"
	password  = "s3cr3t-Hunter2"
)

// topicState follows a compacted topic and keeps every record per key.
type topicState struct {
	mu      sync.Mutex
	records map[string][]kafka.Message
	changed chan struct{} // a token after each record
}

func follow(t *testing.T, cfg kafkaio.Config, topic string) *topicState {
	t.Helper()
	s := &topicState{records: map[string][]kafka.Message{}, changed: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- kafkaio.Follow(ctx, cfg, topic, func(m kafka.Message) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.records[string(m.Key)] = append(s.records[string(m.Key)], m)
			signal(s.changed)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follow: %v", err)
		}
	})
	return s
}

// waitFor checks cond over the records each time one arrives, until it
// holds or 15s pass.
func (s *topicState) waitFor(t *testing.T, what string, cond func(map[string][]kafka.Message) bool) {
	t.Helper()
	waitSignalled(t, s.changed, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond(s.records)
	}, func() string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("timed out waiting for %s; records: %v", what, describe(s.records))
	})
}

// signal leaves a token in c (capacity 1) unless one is there.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// waitSignalled checks cond now and after each token on changed, until it
// holds; after 15s it fails with failure().
func waitSignalled(t *testing.T, changed <-chan struct{}, cond func() bool, failure func() string) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatal(failure())
		}
	}
}

func describe(recs map[string][]kafka.Message) string {
	var b strings.Builder
	for k, ms := range recs {
		fmt.Fprintf(&b, "%s:", k)
		for _, m := range ms {
			if m.Value == nil {
				b.WriteString(" tombstone")
			} else {
				b.WriteString(" live")
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}

// lastIs reports whether key's latest record is live (or a tombstone).
func lastIs(recs map[string][]kafka.Message, key string, live bool) bool {
	ms := recs[key]
	return len(ms) > 0 && (ms[len(ms)-1].Value != nil) == live
}

// recordingPublisher remembers what every round published.
type recordingPublisher struct {
	next   refresh.Publisher
	rounds [][]pool.Change
}

func (r *recordingPublisher) Publish(ctx context.Context, cs []pool.Change) error {
	r.rounds = append(r.rounds, cs)
	return r.next.Publish(ctx, cs)
}

func origin(t *testing.T, ip string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "<p>%s</p>", checkBody)
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestRoundsPublishLiveAndTombstoneDead(t *testing.T) {
	kcfg := kafkatest.Config(t, 4)
	topic := kcfg.Topics().Proxies
	page := origin(t, "127.0.0.40")

	healthy := proxytest.Start(t, "127.0.0.41", proxytest.Options{Username: "crawler", Password: password})
	dead := proxytest.Start(t, "127.0.0.42", proxytest.Options{})
	dead.Close()
	slow := proxytest.Start(t, "127.0.0.43", proxytest.Options{Mode: proxytest.Slow, Delay: 5 * time.Second})
	wrong := proxytest.Start(t, "127.0.0.44", proxytest.Options{Mode: proxytest.WrongContent})
	dying := proxytest.Start(t, "127.0.0.45", proxytest.Options{Username: "crawler", Password: password})

	var entries []proxylist.Entry
	ids := map[string]string{}
	for name, p := range map[string]*proxytest.Proxy{"healthy": healthy, "dead": dead, "slow": slow, "wrong": wrong, "dying": dying} {
		e, _, err := proxylist.ParseLine(p.URL())
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, e)
		ids[name] = e.ID()
	}

	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	reg := prometheus.NewRegistry()
	metrics, err := refresh.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kcfg, log, reg)
	defer w.Close()
	pub := &recordingPublisher{next: publish.New(w, topic)}
	p := pool.New(time.Second)
	p.Set(entries)
	checker := check.New(check.Config{URL: page.URL, Expect: checkBody, Timeout: 500 * time.Millisecond}, check.ProxyClient, time.Now)
	loop := refresh.New(refresh.Config{Interval: time.Hour, Concurrency: 2}, p, checker, pub, log, metrics)
	state := follow(t, kcfg, topic)
	ctx := t.Context()

	// Round 1: healthy and dying are live; the others are tombstoned (a
	// previous run may have left them live in the compacted topic).
	if err := loop.Round(ctx); err != nil {
		t.Fatal(err)
	}
	state.waitFor(t, "round 1", func(r map[string][]kafka.Message) bool {
		return lastIs(r, ids["healthy"], true) && lastIs(r, ids["dying"], true) &&
			lastIs(r, ids["dead"], false) && lastIs(r, ids["slow"], false) && lastIs(r, ids["wrong"], false)
	})
	state.mu.Lock()
	var got crawlv1.Proxy
	if err := kafkaio.Decode(state.records[ids["healthy"]][0], &got); err != nil {
		t.Fatal(err)
	}
	tomb := state.records[ids["dead"]][0]
	state.mu.Unlock()
	if len(tomb.Headers) != 1 || tomb.Headers[0].Key != crawlmsg.SchemaHeader || string(tomb.Headers[0].Value) != crawlmsg.SchemaOf(&crawlv1.Proxy{}) {
		t.Errorf("tombstone headers = %v, want the Proxy schema header", tomb.Headers)
	}
	if got.GetId() != ids["healthy"] || got.GetUrl() != healthy.URL() || got.GetLatencyUs() <= 0 || got.GetScore() <= 0 || got.GetCheckedAt() == nil {
		t.Errorf("healthy record = %v, want id %s url %s with latency, score and time", &got, ids["healthy"], healthy.URL())
	}
	if strings.Contains(got.GetId(), password) {
		t.Error("id contains the password")
	}

	// Round 2: dying died in between; only its tombstone is published.
	dying.Close()
	if err := loop.Round(ctx); err != nil {
		t.Fatal(err)
	}
	state.waitFor(t, "round 2", func(r map[string][]kafka.Message) bool {
		return lastIs(r, ids["dying"], false)
	})
	if len(pub.rounds) != 2 || len(pub.rounds[0]) != 5 || len(pub.rounds[1]) != 1 || pub.rounds[1][0].ID != ids["dying"] || !pub.rounds[1][0].Delete {
		t.Errorf("published rounds = %+v, want 5 records then only dying's tombstone", pub.rounds)
	}
	if live, dead := p.Counts(); live != 1 || dead != 4 {
		t.Errorf("counts = %d live %d dead, want 1 and 4", live, dead)
	}

	// Credentials never reach logs or metrics.
	if logs.Len() == 0 {
		t.Fatal("no logs captured")
	}
	for _, e := range logs.AllUntimed() {
		enc := zapcore.NewMapObjectEncoder()
		for _, f := range e.Context {
			f.AddTo(enc)
		}
		if text := fmt.Sprint(e.Message, enc.Fields); strings.Contains(text, password) {
			t.Errorf("log entry leaks the password: %s", text)
		}
	}
	if n := logs.FilterMessage("proxy removed").FilterField(zap.String("proxy_id", ids["dying"])).Len(); n != 1 {
		t.Errorf("%d 'proxy removed' logs for dying, want 1", n)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(families); strings.Contains(text, password) {
		t.Error("metrics leak the password")
	}
	checks := map[string]float64{}
	for _, f := range families {
		if f.GetName() == "checks_total" {
			for _, m := range f.GetMetric() {
				checks[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{check.OK: 3, check.Connect: 3, check.Timeout: 2, check.WrongContent: 2}
	if fmt.Sprint(checks) != fmt.Sprint(want) {
		t.Errorf("checks_total = %v, want %v", checks, want)
	}
}
