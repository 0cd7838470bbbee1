package kafkaio_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestLeaseFollowsTheCoordinator: a partition's Lease is renewed by the
// coordinator's answers to the member's heartbeats, and lapses a margin
// before the session timeout once the coordinator stops answering (the
// broker drops the heartbeats, as a cut link does: no error, no answer),
// before the member's heartbeat times out and its generation ends.
func TestLeaseFollowsTheCoordinator(t *testing.T) {
	cluster, brokers := kafkatest.Cluster(t)
	cfg := kafkatest.ConfigFor(t, brokers, 1)
	cfg.SessionTimeout = 3 * time.Second
	if err := kafkaio.EnsureTopics(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	var silent atomic.Bool
	cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, silent.Load() // handled without an answer: dropped
	})

	r := newRecorder(nil)
	var (
		mu    sync.Mutex
		lease kafkaio.Lease
	)
	assign := func(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
		mu.Lock()
		lease = kafkaio.LeaseOf(ctx)
		mu.Unlock()
		return r.assign(ctx, topic, partition)
	}
	g, err := kafkaio.NewGroup(cfg, kafkaio.GroupConfig{GroupID: cfg.GroupFor("lease"), Topic: cfg.Topics().Fetch}, assign, nopLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group: %v", err)
		}
	}()

	current := func() kafkaio.Lease {
		mu.Lock()
		defer mu.Unlock()
		return lease
	}
	eventually(t, 20*time.Second, "a partition assigned with a lease", func() bool {
		return current() != nil && !current().Expiry().IsZero()
	})
	l := current()
	first := l.Expiry()
	if until := time.Until(first); until <= 0 || until > cfg.SessionTimeout {
		t.Fatalf("a fresh lease expires in %v, want within the session timeout %v", until, cfg.SessionTimeout)
	}
	eventually(t, cfg.SessionTimeout, "the lease renewed by a heartbeat", func() bool { return l.Expiry().After(first) })

	silent.Store(true)
	cut := time.Now()
	eventually(t, cfg.SessionTimeout, "the lease lapsed before the session timeout", func() bool { return time.Now().After(l.Expiry()) })
	lapsed := time.Since(cut)
	t.Logf("lease lapsed %v after the coordinator stopped answering (session timeout %v)", lapsed.Round(time.Millisecond), cfg.SessionTimeout)
	if lapsed < cfg.SessionTimeout/2 {
		t.Fatalf("lease lapsed after %v, sooner than half the session timeout: it does not wait for the heartbeats", lapsed)
	}
	silent.Store(false)
}
