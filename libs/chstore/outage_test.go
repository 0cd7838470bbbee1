package chstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

// TestWriterSurvivesOutage: while the server is down Write blocks and the
// writer retries; once a server is back on the same data directory and
// port, every row arrives.
func TestWriterSurvivesOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// A server with client connections takes its time to stop; an outage
	// may as well be abrupt.
	srv, err := chlocal.StartWith(ctx, t.TempDir(), chlocal.Options{StopTimeout: time.Second})
	if err != nil {
		t.Fatalf("start private server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	cfg := chstore.Config{Addr: []string{srv.Addr()}, Database: "outage", Username: "default", DialTimeout: time.Second}
	s, err := chstore.Open(ctx, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	w := chstore.NewBatchWriter(s, chstore.FetchLog,
		chstore.BatchOptions{MaxRows: 10, FlushInterval: 10 * time.Millisecond, RetryBackoff: 20 * time.Millisecond},
		zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), reg)
	stop := runWriter(t, w)

	before := make([]chstore.FetchLogRow, 50)
	for i := range before {
		before[i] = fetchRow("c1", i)
	}
	if err := w.Write(ctx, before...); err != nil {
		t.Fatalf("write before outage: %v", err)
	}

	stopAt := time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server stopped in %v", time.Since(stopAt))
	const during = 40
	done := make(chan error, during)
	for i := range during {
		go func() { done <- w.Write(ctx, fetchRow("c1", 1000+i)) }()
	}
	// A read and a new connection wait for the server too, instead of
	// failing: a service whose ClickHouse is down pauses, it does not exit.
	readDone := make(chan error, 1)
	go func() { readDone <- s.LoadSeen(ctx, 0, nil, func(string, uint64) {}) }()
	opened := make(chan error, 1)
	go func() {
		s2, err := chstore.OpenWaiting(ctx, cfg, zap.NewNop())
		if err == nil {
			s2.Close()
		}
		opened <- err
	}()
	waitTrue(t, ctx, "the store to say it waits for the server", func() bool { w, _, _ := s.Unavailable(); return w })
	if n := metricstest.Value(t, reg, "dependency_waiting", "dependency", "clickhouse"); n != 1 {
		t.Errorf("dependency_waiting{dependency=clickhouse} = %v during the outage, want 1", n)
	}
	// Write, the read and the open must not return while the server is
	// down; they wait.
	deadline := time.After(time.Second)
	for waiting := true; waiting; {
		select {
		case err := <-done:
			t.Fatalf("write returned during outage: %v", err)
		case err := <-readDone:
			t.Fatalf("read returned during outage: %v", err)
		case err := <-opened:
			t.Fatalf("OpenWaiting returned during outage: %v", err)
		case <-deadline:
			waiting = false
		}
	}
	if n := metricValue(t, reg, "clickhouse_insert_errors_total", "fetch_log"); n < 2 {
		t.Errorf("insert errors during outage = %v, want retries (>= 2)", n)
	}

	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	for range during {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write after restart: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("writes did not complete after the server came back")
		}
	}
	for what, ch := range map[string]chan error{"read": readDone, "open": opened} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s after restart: %v", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("the %s did not complete after the server came back", what)
		}
	}
	if waiting, _, _ := s.Unavailable(); waiting {
		t.Error("the store still says it waits after the server came back")
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got, want := count(t, s, "SELECT count() FROM fetch_log FINAL"), uint64(len(before)+during); got != want {
		t.Errorf("rows = %d, want %d", got, want)
	}
}

// TestWriterStopFailsPendingWrites: rows that cannot be written before Run
// returns make their Write calls fail; they are never dropped silently.
func TestWriterStopFailsPendingWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// A server with client connections takes its time to stop; an outage
	// may as well be abrupt.
	srv, err := chlocal.StartWith(ctx, t.TempDir(), chlocal.Options{StopTimeout: time.Second})
	if err != nil {
		t.Fatalf("start private server: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	cfg := chstore.Config{Addr: []string{srv.Addr()}, Database: "stopped", Username: "default", DialTimeout: 200 * time.Millisecond}
	s, err := chstore.Open(ctx, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := s.Register(reg); err != nil {
		t.Fatal(err)
	}
	w := chstore.NewBatchWriter(s, chstore.FetchLog,
		chstore.BatchOptions{MaxRows: 5, FlushInterval: 10 * time.Millisecond, RetryBackoff: 20 * time.Millisecond, ShutdownTimeout: 500 * time.Millisecond},
		zaptest.NewLogger(t, zaptest.Level(zap.DPanicLevel)), reg)
	stop := runWriter(t, w)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Write(ctx, fetchRow("c1", 1), fetchRow("c1", 2)) }()
	waitTrue(t, ctx, "a failed insert", func() bool { return metricValue(t, reg, "clickhouse_insert_errors_total", "fetch_log") > 0 })
	stopAt := time.Now()
	if err := stop(); err == nil {
		t.Error("run: want an error reporting unwritten rows")
	}
	if err := <-done; !errors.Is(err, chstore.ErrWriterStopped) {
		t.Errorf("write: %v, want ErrWriterStopped for rows the writer could not insert", err)
	}
	t.Logf("writer stopped in %v", time.Since(stopAt))
}

// waitTrue polls cond every 20ms until it holds or ctx is done.
func waitTrue(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waited for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
