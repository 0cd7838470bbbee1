package kafkaio_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// BenchmarkWrite measures produce throughput through kfake over loopback:
// batches of 500 records of 200 bytes, zstd, acks=all.
func BenchmarkWrite(b *testing.B) {
	c := kafkatest.Config(b, 8)
	w := kafkaio.NewWriter(c, zap.NewNop(), nil)
	defer w.Close()
	value := make([]byte, 200)
	batch := make([]kafka.Message, 500)
	for i := range batch {
		batch[i] = kafka.Message{Topic: c.Topics().Fetch, Key: []byte(fmt.Sprintf("host%d.example", i%97)), Value: value}
	}
	ctx := b.Context()
	b.ResetTimer()
	for b.Loop() {
		if err := w.Write(ctx, batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkGroupConsume measures consume throughput of a Group whose
// handler acks at once: b.N batches of 500 records over 8 partitions.
func BenchmarkGroupConsume(b *testing.B) {
	c := kafkatest.Config(b, 8)
	topic := c.Topics().Fetch
	w := kafkaio.NewWriter(c, zap.NewNop(), nil)
	value := make([]byte, 200)
	total := 0
	ctx := b.Context()
	for range b.N {
		batch := make([]kafka.Message, 500)
		for i := range batch {
			batch[i] = kafka.Message{Topic: topic, Key: []byte(fmt.Sprintf("host%d.example", i%97)), Value: value}
		}
		if err := w.Write(ctx, batch...); err != nil {
			b.Fatal(err)
		}
		total += len(batch)
	}
	w.Close()

	var handled atomic.Int64
	done := make(chan struct{})
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return handlerFunc(func(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
			for _, m := range batch {
				ack(m)
			}
			if handled.Add(int64(len(batch))) == int64(total) {
				close(done)
			}
			return nil
		}), nil
	}
	g, err := kafkaio.NewGroup(c, kafkaio.GroupConfig{GroupID: c.GroupFor("bench"), Topic: topic}, assign, zap.NewNop(), nil)
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	b.ResetTimer()
	start := time.Now()
	go func() { errc <- g.Run(rctx) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		b.Fatalf("consumed %d of %d", handled.Load(), total)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total)/elapsed.Seconds(), "records/s")
}
