package chstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/disktest"
)

// TestWriterWaitsOutDiskFull: with ClickHouse's data volume full, inserts
// fail; the writer retries without end, its Write calls neither return
// nor lose their rows (nothing would be acknowledged), and once space is
// freed every row arrives, once.
func TestWriterWaitsOutDiskFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	vol := disktest.SmallVolume(t, "512m")
	srv, err := chlocal.StartWith(ctx, filepath.Join(vol, "ch"), chlocal.Options{StopTimeout: time.Second})
	if err != nil {
		t.Fatalf("start server on the small volume: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	s, err := chstore.Open(ctx, chstore.Config{Addr: []string{srv.Addr()}, Database: "diskfull", Username: "default", DialTimeout: time.Second}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w := chstore.NewBatchWriter(s, chstore.FetchLog,
		chstore.BatchOptions{MaxRows: 10, FlushInterval: 10 * time.Millisecond, RetryBackoff: 20 * time.Millisecond},
		zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), reg)
	stop := runWriter(t, w)
	if err := w.Write(ctx, fetchRow("c1", 0)); err != nil {
		t.Fatalf("write before the disk is full: %v", err)
	}

	filler := filepath.Join(vol, "filler")
	disktest.Fill(t, filler)
	const during = 20
	done := make(chan error, during)
	for i := range during {
		go func() { done <- w.Write(ctx, fetchRow("c1", 1+i)) }()
	}
	waitTrue(t, ctx, "inserts to fail on the full disk", func() bool {
		return metricValue(t, reg, "clickhouse_insert_errors_total", "fetch_log") >= 2
	})
	select {
	case err := <-done:
		t.Fatalf("a write returned while the disk was full: %v", err)
	case <-time.After(time.Second):
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for range during {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write after space was freed: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("writes did not complete after space was freed")
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := count(t, s, "SELECT count() FROM fetch_log FINAL"); got != during+1 {
		t.Errorf("rows = %d, want %d", got, during+1)
	}
	t.Logf("insert failures while the disk was full: %v", metricValue(t, reg, "clickhouse_insert_errors_total", "fetch_log"))
}
