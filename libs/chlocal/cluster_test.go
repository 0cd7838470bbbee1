package chlocal

import (
	"errors"
	"testing"
)

// TestStartZooKeeper starts Debian's ZooKeeper on a loopback port, checks
// that it opens a session at once (StartZooKeeper returned only when it
// does), stops it and checks that it no longer does.
func TestStartZooKeeper(t *testing.T) {
	if _, _, err := FindZooKeeper(); errors.Is(err, ErrZooKeeperNotInstalled) {
		t.Skipf("skipped: %v", err)
	}
	z, err := StartZooKeeper(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !serving(t.Context(), z.Addr()) {
		t.Errorf("zookeeper at %s does not open a session", z.Addr())
	}
	if err := z.Stop(); err != nil {
		t.Fatal(err)
	}
	if serving(t.Context(), z.Addr()) {
		t.Errorf("zookeeper at %s still answers after Stop", z.Addr())
	}
	if err := z.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
