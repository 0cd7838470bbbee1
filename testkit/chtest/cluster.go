package chtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// StartCluster starts a local ClickHouse cluster for the test (one
// ZooKeeper, shards × replicas servers on loopback ports, data in a
// temporary directory), stopped when the test ends. Without ZooKeeper
// installed the test is skipped, saying what to install (CI installs it:
// .ci/run); any other failure fails the test.
func StartCluster(t testing.TB, shards, replicas int) *chlocal.Cluster {
	t.Helper()
	if _, _, err := chlocal.FindZooKeeper(); err != nil {
		if errors.Is(err, chlocal.ErrZooKeeperNotInstalled) {
			t.Skipf("chtest: cluster test skipped: %v", err)
		}
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "chtest-cluster-")
	if err != nil {
		t.Fatalf("create cluster dir: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := chlocal.StartCluster(ctx, dir, chlocal.ClusterOptions{Shards: shards, Replicas: replicas, StopTimeout: 5 * time.Second})
	if err != nil {
		_ = os.RemoveAll(dir) // best effort: the start error is the one to report
		t.Fatalf("start clickhouse cluster: %v", err)
	}
	t.Logf("clickhouse cluster %s (%d×%d) ready in %s: %v", c.Name(), shards, replicas, time.Since(start).Round(time.Millisecond), c.Addrs())
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("chtest: stop cluster: %v", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("chtest: remove cluster dir: %v", err)
		}
	})
	return c
}

// ClusterConfig returns a chstore.Config in cluster mode for a fresh,
// uniquely named database on c, addressing every server (in order, so the
// first answers while it runs).
func ClusterConfig(t testing.TB, c *chlocal.Cluster) chstore.Config {
	t.Helper()
	return chstore.Config{
		Addr:        c.Addrs(),
		Database:    DatabaseName(t.Name()),
		Username:    "default",
		DialTimeout: 5 * time.Second,
		Cluster:     c.Name(),
	}
}

// RestartReplica starts a cluster server again after a crash (Kill). When
// it refuses to start, as 18.16 may after a SIGKILL when a replicated
// table's parts on disk disagree with ZooKeeper, it logs why and starts it
// with ClickHouse's recovery flag (chlocal.Server.ForceRestoreData).
func RestartReplica(ctx context.Context, t testing.TB, srv *chlocal.Server) {
	t.Helper()
	err := srv.Restart(ctx)
	if err == nil {
		return
	}
	t.Logf("replica %s did not start after the crash, starting it with force_restore_data: %v", srv.Addr(), err)
	if err := srv.ForceRestoreData(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart replica %s with force_restore_data: %v", srv.Addr(), err)
	}
}
