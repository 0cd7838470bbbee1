package chlocal_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/trawl-crawler/trawl/libs/chlocal"
)

// TestStartRestartKeepsData: a server answers after Start, keeps its data
// and ports across Stop and Restart, and stops answering after Stop.
func TestStartRestartKeepsData(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	srv, err := chlocal.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	t.Logf("started in %v on %s (http %s)", time.Since(start), srv.Addr(), srv.HTTPAddr())

	exec := func(q string) {
		t.Helper()
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE TABLE default.kept (x UInt8) ENGINE = MergeTree ORDER BY x")
	if a, err := chlocal.ConfiguredAddr(srv.Dir()); err != nil || a != srv.Addr() {
		t.Errorf("ConfiguredAddr = %q, %v; want %s", a, err, srv.Addr())
	}
	if _, err := chlocal.ConfiguredAddr(t.TempDir()); err == nil {
		t.Error("ConfiguredAddr of a directory without a server config: want an error")
	}
	if srv.Pid() <= 0 {
		t.Errorf("pid of the running server = %d", srv.Pid())
	}

	addr := srv.Addr()
	start = time.Now()
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(start))
	if srv.Pid() != 0 {
		t.Errorf("pid after Stop = %d, want 0", srv.Pid())
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	if err := chlocal.Ping(pctx, addr); err == nil {
		t.Error("ping after Stop: want error")
	}
	pcancel()
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != addr {
		t.Errorf("addr after restart = %s, want %s", srv.Addr(), addr)
	}
	exec("SELECT count() FROM default.kept") // the table survived
}

func TestFindBinary(t *testing.T) {
	cmd, err := chlocal.FindBinary()
	if err != nil {
		t.Fatalf("FindBinary: %v (this machine has clickhouse-server installed)", err)
	}
	if len(cmd) == 0 || cmd[0] == "" {
		t.Fatalf("FindBinary = %q", cmd)
	}
}

func TestStartRefusesBusyPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, err := chlocal.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Stop() })
	// The ports of a running server: the new server could not bind, and a
	// readiness check would be answered by the old one.
	start := time.Now()
	b, err := chlocal.StartWith(ctx, a.Dir(), chlocal.Options{TCPPort: port(t, a.Addr()), HTTPPort: port(t, a.HTTPAddr())})
	if err == nil {
		_ = b.Stop()
		t.Fatal("second server on the same ports: want error")
	}
	t.Logf("failed after %v: %.300s", time.Since(start), err)
}

func port(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
