package chlocal

import (
	"errors"
	"testing"
)

// TestStartZooKeeper starts Debian's ZooKeeper on a loopback port, asks
// it "ruok", stops it and checks that it no longer answers.
func TestStartZooKeeper(t *testing.T) {
	if _, _, err := FindZooKeeper(); errors.Is(err, ErrZooKeeperNotInstalled) {
		t.Skipf("skipped: %v", err)
	}
	z, err := StartZooKeeper(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !ruok(t.Context(), z.Addr()) {
		t.Errorf("zookeeper at %s does not answer ruok", z.Addr())
	}
	if err := z.Stop(); err != nil {
		t.Fatal(err)
	}
	if ruok(t.Context(), z.Addr()) {
		t.Errorf("zookeeper at %s still answers after Stop", z.Addr())
	}
	if err := z.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
