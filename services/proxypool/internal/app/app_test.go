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
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/config"
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
