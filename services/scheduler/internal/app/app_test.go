package app

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/svctest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// load returns the configuration the flags give for a real broker and a
// fresh ClickHouse database; broken replaces the broker or ClickHouse
// address by one nothing listens on.
func load(t *testing.T, broken string) config.Config {
	t.Helper()
	cfg, err := config.Load(svctest.Args(t, broken), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNew builds the scheduler against a real broker and ClickHouse: the
// readiness check answers, the revisit consumer stopped before any crawl
// revisits returns nil without joining its group, and Close releases the
// clients (TestMain finds no goroutine left).
func TestNew(t *testing.T) {
	s, err := New(t.Context(), load(t, ""), zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.Revisit(ctx); err != nil {
		t.Errorf("Revisit with no revisiting crawl = %v, want nil once stopped", err)
	}
}

// TestNewFails: a part that cannot be built fails New with the step named,
// and what was opened before it is closed (no goroutine left).
func TestNewFails(t *testing.T) {
	tests := []struct {
		broken, wantErr string
	}{
		{broken: "clickhouse", wantErr: "open clickhouse"},
		{broken: "kafka", wantErr: "ensure topics"},
	}
	for _, tt := range tests {
		t.Run(tt.broken, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			s, err := New(ctx, load(t, tt.broken), zaptest.NewLogger(t), prometheus.NewRegistry())
			if err == nil {
				s.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}
