package service_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestBootstrap: a bootstrapped store has its schema, the topics exist,
// the store's gauge is registered; refused credentials are an error
// (chstore.ErrAuth), not a wait.
func TestBootstrap(t *testing.T) {
	kc := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	reg := prometheus.NewRegistry()
	store, err := service.Bootstrap(t.Context(), ch, kc, zap.NewNop(), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var n uint64
	if err := store.Conn().QueryRow(t.Context(), "SELECT count() FROM system.tables WHERE database = ? AND name = 'fetch_log'", ch.Database).Scan(&n); err != nil || n != 1 {
		t.Errorf("fetch_log tables: %d, %v; want the schema migrated", n, err)
	}
	if err := kafkaio.EnsureTopics(t.Context(), kc); err != nil { // idempotent: the topics are there
		t.Errorf("topics: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "dependency_waiting"
	}
	if !found {
		t.Error("no dependency_waiting gauge registered")
	}

	bad := ch
	bad.Password = "not-the-password"
	if _, err := service.Bootstrap(t.Context(), bad, kc, zap.NewNop(), prometheus.NewRegistry()); !errors.Is(err, chstore.ErrAuth) {
		t.Errorf("Bootstrap with a wrong password = %v, want chstore.ErrAuth", err)
	}
}
