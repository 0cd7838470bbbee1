package kafkaio_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
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

// TestSettleAfterLapse: with GroupConfig.SettleAfterLapse, the partitions
// of the generation a member joins after its lease lapsed (the broker
// dropped its heartbeats past the session timeout, then answered again)
// are handed to the assign function only once the generation has lasted
// the settle time; the member's first generation, which follows no lapse,
// starts its partitions at once.
func TestSettleAfterLapse(t *testing.T) {
	const settle = 4 * time.Second
	cluster, brokers := kafkatest.Cluster(t)
	cfg := kafkatest.ConfigFor(t, brokers, 2)
	cfg.SessionTimeout = 3 * time.Second
	if err := kafkaio.EnsureTopics(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	var silent atomic.Bool
	cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, silent.Load()
	})

	r := newRecorder(nil)
	var (
		mu      sync.Mutex
		assigns []time.Time
	)
	assign := func(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
		mu.Lock()
		assigns = append(assigns, time.Now())
		mu.Unlock()
		return r.assign(ctx, topic, partition)
	}
	assigned := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(assigns)
	}
	reg := prometheus.NewRegistry()
	topic := cfg.Topics().Fetch
	g, err := kafkaio.NewGroup(cfg, kafkaio.GroupConfig{GroupID: cfg.GroupFor("settle"), Topic: topic, SettleAfterLapse: settle},
		assign, nopLogger(t), reg)
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
	eventually(t, 20*time.Second, "both partitions assigned", func() bool { return len(assigned()) == 2 })
	if got := testutilValue(t, reg, "kafka_settle_holds_total", topic); got != 0 {
		t.Fatalf("the first generation was held back (%v holds) though the lease never lapsed", got)
	}
	gens := testutilValue(t, reg, "kafka_rebalances_total", topic)

	silent.Store(true)
	waitGroupEmpty(t, cfg, cfg.GroupFor("settle")) // the lease lapsed; the coordinator expired the session
	silent.Store(false)
	var joined time.Time // when the member joined its next generation (polled)
	eventually(t, 30*time.Second, "a new generation after the lapse", func() bool {
		if testutilValue(t, reg, "kafka_rebalances_total", topic) > gens {
			// the generation after the lapse (later ones would only
			// restart the hold)
			joined = time.Now()
			return true
		}
		return false
	})
	eventually(t, 30*time.Second, "the partitions assigned again", func() bool { return len(assigned()) >= 4 })
	first := assigned()[2]
	held := first.Sub(joined)
	t.Logf("after the lapse: generation joined, partitions started %v later (settle %v)", held.Round(time.Millisecond), settle)
	if held < settle-2*pollInterval-100*time.Millisecond {
		t.Errorf("partitions started %v after the generation that followed the lapse, want about the settle time %v", held, settle)
	}
	if got := testutilValue(t, reg, "kafka_settle_holds_total", topic); got < 1 {
		t.Errorf("kafka_settle_holds_total = %v after a lapse, want at least 1", got)
	}
}

// TestSettleKeepsOwners: three members of a group all lose the
// coordinator past the session timeout (the broker drops every heartbeat,
// as when the brokers' host is cut off) and rejoin one by one when it
// answers again. With SettleAfterLapse, the passing generations of the
// rejoin are held back and claim nothing, so the group settles with each
// member holding the partitions it held before the outage: the ones whose
// outage-time work its own recorder still holds.
func TestSettleKeepsOwners(t *testing.T) {
	const partitions = 6
	cluster, brokers := kafkatest.Cluster(t)
	cfg := kafkatest.ConfigFor(t, brokers, partitions)
	cfg.SessionTimeout = 3 * time.Second
	if err := kafkaio.EnsureTopics(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	var silent atomic.Bool
	cluster.ControlKey(int16(kmsg.Heartbeat), func(kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return nil, nil, silent.Load()
	})
	ctx, cancel := context.WithCancel(t.Context())
	var groups []*kafkaio.Group
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range 3 {
		r := newRecorder(nil)
		g, err := kafkaio.NewGroup(cfg, kafkaio.GroupConfig{GroupID: cfg.GroupFor("owners"), Topic: cfg.Topics().Fetch, SettleAfterLapse: 2 * time.Second},
			r.assign, nopLogger(t), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		groups = append(groups, g)
		wg.Go(func() {
			if err := g.Run(ctx); err != nil {
				t.Errorf("member %d: %v", i, err)
			}
		})
		// one at a time, so that each joins a settled group
		eventually(t, 20*time.Second, "the member assigned", func() bool { return len(g.Assigned()) > 0 })
	}
	owners := func() [][]int {
		out := make([][]int, len(groups))
		for i, g := range groups {
			out[i] = g.Assigned()
		}
		return out
	}
	balanced := func() bool {
		n := 0
		for _, o := range owners() {
			if len(o) != partitions/len(groups) {
				return false
			}
			n += len(o)
		}
		return n == partitions
	}
	stableFor(t, 30*time.Second, 2*time.Second, "a balanced assignment", balanced)
	before := owners()

	silent.Store(true)
	waitGroupEmpty(t, cfg, cfg.GroupFor("owners"))
	silent.Store(false)
	eventually(t, 60*time.Second, "the members rejoined", func() bool { return !slices.EqualFunc(owners(), before, slices.Equal) })
	stableFor(t, 60*time.Second, 5*time.Second, "a balanced assignment after the outage", balanced)
	after := owners()
	t.Logf("partitions before the outage %v, after %v", before, after)
	if !slices.EqualFunc(after, before, slices.Equal) {
		t.Errorf("members hold %v after the outage, want what they held before it: %v", after, before)
	}
}

// waitGroupEmpty waits until the coordinator has expired every member of
// the group (its state Empty: their heartbeats went unanswered past the
// session timeout), asking it with DescribeGroups.
func waitGroupEmpty(t *testing.T, cfg kafkaio.Config, group string) {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Transport: tr}
	eventually(t, 4*cfg.SessionTimeout, "the coordinator expired the group's members", func() bool {
		res, err := client.DescribeGroups(t.Context(), &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		return err == nil && len(res.Groups) == 1 && res.Groups[0].GroupState == "Empty"
	})
}
