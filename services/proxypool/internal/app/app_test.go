package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/config"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/state"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// load returns the configuration args give, on top of a real broker.
func load(t *testing.T, args ...string) config.Config {
	t.Helper()
	kcfg := kafkatest.Config(t, 2)
	cfg, err := config.Load(append([]string{
		"--kafka-brokers", strings.Join(kcfg.Brokers, ","),
		"--kafka-topic-prefix", kcfg.TopicPrefix,
		"--kafka-partitions", fmt.Sprint(kcfg.Partitions),
		"--api-addr", "127.0.0.1:0",
	}, args...), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// serve runs the API until the test ends (it is bound by New: only Run
// releases it).
func serve(t *testing.T, pp *Proxypool) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- pp.ServeAPI(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeAPI: %v", err)
		}
	})
}

// TestNew: the feedback topic is consumed (by the leader) only by a pool
// that has proxies to score and --feedback.
func TestNew(t *testing.T) {
	proxies := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(proxies, []byte("127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withProxies := []string{"--proxies-file", proxies, "--check-url", "http://127.0.0.1:1/"}
	tests := []struct {
		name         string
		args         []string
		wantFeedback bool
	}{
		{name: "idle", wantFeedback: false},
		{name: "proxies", args: withProxies, wantFeedback: true},
		{name: "proxies without feedback", args: append([]string{"--feedback=false"}, withProxies...), wantFeedback: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pp, err := New(t.Context(), load(t, tt.args...), zaptest.NewLogger(t), prometheus.NewRegistry())
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer pp.Close()
			serve(t, pp)
			if pp.ConsumesFeedback() != tt.wantFeedback {
				t.Errorf("ConsumesFeedback = %v, want %v", pp.ConsumesFeedback(), tt.wantFeedback)
			}
		})
	}
}

// TestKeepIdle: an idle pool calls ready once the topics exist, then
// returns nil when stopped.
func TestKeepIdle(t *testing.T) {
	pp, err := New(t.Context(), load(t), zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer pp.Close()
	serve(t, pp)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- pp.Keep(ctx, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Keep returned before ready: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Keep = %v after its stop, want nil", err)
	}
}

// TestKeepLeads: a lone pool with proxies takes the lead once the topics
// exist, writes the verdicts of its first round to the state topic, and
// gives the lead up when stopped.
func TestKeepLeads(t *testing.T) {
	proxies := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(proxies, []byte("127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, "--proxies-file", proxies, "--check-url", "http://127.0.0.1:1/", "--check-timeout", "1s",
		"--kafka-session-timeout", kafkatest.SessionTimeout.String(), "--kafka-rebalance-timeout", kafkatest.RebalanceTimeout.String())
	pp, err := New(t.Context(), cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer pp.Close()
	serve(t, pp)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pp.Keep(ctx, func() {}) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	checkedStates := func() int {
		n := 0
		err := kafkaio.ReadToEnd(ctx, cfg.Kafka, cfg.Kafka.Topics().ProxyState, kafkaio.ReadOptions{}, func(m kafka.Message) {
			if st, err := state.Decode(m); err == nil && st.Status.Checked {
				n++
			}
		})
		if err != nil {
			t.Logf("read state topic: %v", err)
		}
		return n
	}
	for !pp.Leading() || checkedStates() == 0 {
		select {
		case err := <-done:
			t.Fatalf("Keep returned before leading: %v", err)
		case <-ctx.Done():
			t.Fatal("never led and wrote a checked state")
		case <-tick.C:
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Keep = %v after its stop, want nil", err)
	}
	if pp.Leading() {
		t.Error("still leading after the stop")
	}
}
