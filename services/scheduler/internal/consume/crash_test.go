package consume

import (
	"context"
	"errors"
	"fmt"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
)

// lostFrontier is a frontier whose inserts never land: the scheduler died
// before the frontier writer's flush.
type lostFrontier struct{ sinks.Frontier }

func (lostFrontier) Write(context.Context, ...chstore.FrontierRow) error {
	return errors.New("killed before the insert")
}

// TestDeferredURLSurvivesCrash: a batch admits six URLs of one host with a
// quota of two, so four wait in the frontier; the scheduler dies after the
// batch's fingerprints are inserted into url_seen but before its frontier
// rows are (two writers, each flushing on its own clock). The next owner
// gets the batch again and loads the seen set: a deferred URL whose
// fingerprint is there and whose frontier row is not would be dropped as a
// duplicate and never fetched. Every URL must be requested.
func TestDeferredURLSurvivesCrash(t *testing.T) {
	e := newEnv(t)
	cfg := Config{Depth: admit.FixedDepth(16), HostQuota: 2, QuotaWindow: 100 * time.Millisecond, Topics: e.kafka.Topics(), Partitions: e.kafka.Partitions}
	s, err := New(cfg, e.producer, e.seenW, e.eventsW, lostFrontier{sinks.Frontier{W: e.frontW, Store: e.store}}, e.store,
		budget.NewTracker(budget.Fixed(0)), time.Now, e.log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g, err := kafkaio.NewGroup(e.kafka, kafkaio.GroupConfig{
		GroupID: e.kafka.GroupFor("scheduler"), Topic: e.kafka.Topics().Discovered, CommitInterval: 20 * time.Millisecond,
	}, s.Assign, e.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var recs []rec
	want := make(map[[2]string]uint32)
	for i := range 6 {
		u := fmt.Sprintf("http://quota.example/p%d", i)
		recs = append(recs, disc("c1", u, 1))
		want[[2]string{"c1", u}] = 1
	}
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	e.publish(recs...)
	for len(e.fetches()) < 2 { // the quota's two are out: the batch is handled
		select {
		case <-ctx.Done():
			t.Fatal("no fetch request produced")
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The next batch of the partition surfaces the failed insert.
	e.publish(disc("c1", "http://quota.example/next", 1))
	want[[2]string{"c1", "http://quota.example/next"}] = 1
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "persist deferred urls") {
			t.Fatalf("first instance: %v, want the frontier insert failure", err)
		}
	case <-ctx.Done():
		t.Fatal("first instance did not fail")
	}

	second := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 2, QuotaWindow: 100 * time.Millisecond}, 0)
	e.drain()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		got := map[string]bool{}
		for _, f := range e.fetches() {
			got[f.req.Url] = true
		}
		var missing []string
		for id := range want {
			if !got[id[1]] {
				missing = append(missing, id[1])
			}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-deadline.C:
			t.Fatalf("never requested after the crash: %v (second instance released %v from the frontier)",
				missing, testutil.ToFloat64(second.s.metrics.released))
		case <-tick.C:
		}
	}
}
