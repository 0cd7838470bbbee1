package hoststate

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestLoad writes states (an update, a tombstone) to the real broker and
// loads every partition: each host comes back from its own partition with
// its latest state, a deleted host not at all, an empty partition empty.
func TestLoad(t *testing.T) {
	const parts = 3
	kcfg := kafkatest.Config(t, parts)
	topic := kcfg.Topics().HostState
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	now := time.Now().Truncate(time.Millisecond)
	states := map[string]politeness.HostState{
		"a.example": {Next: now.Add(time.Second), Delay: 2 * time.Second, BackoffLevel: 1},
		"b.example": {Next: now.Add(3 * time.Second), Delay: time.Second},
		"c.example": {Next: now, Delay: time.Second},
	}
	var msgs []kafka.Message
	for host, st := range states {
		old := st
		old.Next = now.Add(-time.Hour)
		for _, s := range []politeness.HostState{old, st} {
			m, err := Message(topic, host, "t", s, now)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte("c.example")}) // tombstone
	delete(states, "c.example")
	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	l := NewLoader(kcfg, topic)
	got := map[string]politeness.HostState{}
	for p := range parts {
		loaded, err := l.Load(ctx, p)
		if err != nil {
			t.Fatalf("load partition %d: %v", p, err)
		}
		for host, st := range loaded {
			if want := kafkaio.PartitionFor([]byte(host), parts); want != p {
				t.Errorf("%s loaded from partition %d, want %d", host, p, want)
			}
			got[host] = st
		}
	}
	if len(got) != len(states) {
		t.Errorf("loaded %d hosts, want %d: %v", len(got), len(states), got)
	}
	for host, want := range states {
		st := got[host]
		if !st.Next.Equal(want.Next) || st.Delay != want.Delay || st.BackoffLevel != want.BackoffLevel {
			t.Errorf("%s: loaded %+v, want %+v", host, st, want)
		}
	}
}
