package control_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestInFlightByPartitions: unconsumed records on the fetch and fetched
// topics count only on the given partitions (a crawl's hosts); the
// discovered topic counts on every partition.
func TestInFlightByPartitions(t *testing.T) {
	const partitions = 4
	kc := kafkatest.Config(t, partitions)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kc, zap.NewNop(), nil)
	defer w.Close()

	// Two hosts on different partitions.
	hostA, hostB := "http://127.0.0.2/", ""
	keyA, _ := kafkaio.Key(hostA)
	pa := kafkaio.PartitionFor(keyA, partitions)
	var keyB []byte
	for i := 3; i < 50 && hostB == ""; i++ {
		u := "http://127.0.0." + string(rune('0'+i/10)) + string(rune('0'+i%10)) + "/"
		k, _ := kafkaio.Key(u)
		if kafkaio.PartitionFor(k, partitions) != pa {
			hostB, keyB = u, k
		}
	}
	if hostB == "" {
		t.Fatal("no host on another partition")
	}
	pb := kafkaio.PartitionFor(keyB, partitions)
	topics := kc.Topics()
	var msgs []kafka.Message
	for range 3 {
		msgs = append(msgs, kafka.Message{Topic: topics.Fetch, Key: keyA, Value: []byte("a")})
	}
	for range 5 {
		msgs = append(msgs, kafka.Message{Topic: topics.Fetched, Key: keyB, Value: []byte("b")})
	}
	msgs = append(msgs, kafka.Message{Topic: topics.Discovered, Key: keyB, Value: []byte("d")})
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	c := control.New(kc, w, zap.NewNop())
	tests := []struct {
		name  string
		parts []int
		want  int64
	}{
		{"all partitions", nil, 9},
		{"crawl on host A", []int{pa}, 3 + 1},
		{"crawl on host B", []int{pb}, 5 + 1},
		{"crawl with no admitted URL", []int{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.InFlight(ctx, tt.parts)
			if err != nil || got != tt.want {
				t.Errorf("InFlight(%v) = %d, %v; want %d", tt.parts, got, err, tt.want)
			}
		})
	}
}
