package kafkaio_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestReadToEnd reads the host-state topic (compacted, 3 partitions) of a
// real broker: every partition or given ones, to the end observed at the
// call and no further, tombstones included, the records of a window
// before a partition's last one, the last n records, an empty partition.
func TestReadToEnd(t *testing.T) {
	c := kafkatest.Config(t, 3)
	topic := c.Topics().HostState
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	// partition 0: k0..k9 stamped a minute apart, then a tombstone of k3;
	// partition 1: one record; partition 2: empty.
	var msgs []kafka.Message
	for i := range 10 {
		msgs = append(msgs, kafka.Message{Topic: topic, Partition: 0, Key: fmt.Appendf(nil, "k%d", i),
			Value: fmt.Appendf(nil, "v%d", i), Time: base.Add(time.Duration(i) * time.Minute)})
	}
	msgs = append(msgs, kafka.Message{Topic: topic, Partition: 0, Key: []byte("k3"), Time: base.Add(10 * time.Minute)})
	msgs = append(msgs, kafka.Message{Topic: topic, Partition: 1, Key: []byte("p1"), Value: []byte("x"), Time: base})
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w2 := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Balancer: partitionOf{}, RequiredAcks: kafka.RequireAll, BatchSize: 1, Transport: tr}
	defer w2.Close()
	for _, m := range msgs { // one at a time: stamps and offsets in order
		m.Topic = ""
		w2.Topic = topic
		if err := w2.WriteMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}

	type rec struct {
		partition int
		key       string
		tombstone bool
	}
	read := func(o kafkaio.ReadOptions) []rec {
		t.Helper()
		var out []rec
		err := kafkaio.ReadToEnd(ctx, c, topic, o, func(m kafka.Message) {
			out = append(out, rec{m.Partition, string(m.Key), m.Value == nil})
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	p0 := func(keys ...string) []rec {
		var out []rec
		for _, k := range keys {
			out = append(out, rec{0, k, false})
		}
		return out
	}
	all0 := append(p0("k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"), rec{0, "k3", true})
	tests := []struct {
		name string
		o    kafkaio.ReadOptions
		want []rec
	}{
		{name: "every partition", o: kafkaio.ReadOptions{}, want: append(slices.Clone(all0), rec{1, "p1", false})},
		{name: "given partitions, in their order", o: kafkaio.ReadOptions{Partitions: []int{1, 0}}, want: append([]rec{{1, "p1", false}}, all0...)},
		{name: "an empty partition", o: kafkaio.ReadOptions{Partitions: []int{2}}, want: nil},
		{name: "a window before the last record", o: kafkaio.ReadOptions{Partitions: []int{0}, Window: 150 * time.Second},
			want: append(p0("k8", "k9"), rec{0, "k3", true})},
		{name: "the last records", o: kafkaio.ReadOptions{Partitions: []int{0}, MaxRecords: 3},
			want: append(p0("k8", "k9"), rec{0, "k3", true})},
		{name: "a window bounded by the last records", o: kafkaio.ReadOptions{Partitions: []int{0}, Window: time.Hour, MaxRecords: 2},
			want: append(p0("k9"), rec{0, "k3", true})},
		{name: "only the last record", o: kafkaio.ReadOptions{Partitions: []int{0, 1}, MaxRecords: 1},
			want: []rec{{0, "k3", true}, {1, "p1", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := read(tt.o); !slices.Equal(got, tt.want) {
				t.Fatalf("read\n %v\nwant\n %v", got, tt.want)
			}
		})
	}

	// The end is the one observed at the call: a record produced while fn
	// runs is not read (it would be with a reader that follows).
	var got []string
	produced := false
	err := kafkaio.ReadToEnd(ctx, c, topic, kafkaio.ReadOptions{Partitions: []int{1}}, func(m kafka.Message) {
		got = append(got, string(m.Key))
		if !produced {
			produced = true
			if err := w2.WriteMessages(ctx, kafka.Message{Partition: 1, Key: []byte("later"), Value: []byte("y")}); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil || !slices.Equal(got, []string{"p1"}) {
		t.Fatalf("read %v (%v), want only the record present at the call", got, err)
	}
}

// partitionOf writes every message to its Partition field.
type partitionOf struct{}

func (partitionOf) Balance(m kafka.Message, _ ...int) int { return m.Partition }
