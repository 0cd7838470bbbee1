package kafkaio_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/compress/snappy"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

// readAll reads every partition of topic from the start until n records
// were read or the deadline passes.
func readAll(t *testing.T, c kafkaio.Config, topic string, n int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan kafka.Message, n)
	errc := make(chan error, 1)
	go func() {
		errc <- kafkaio.Follow(ctx, c, topic, func(m kafka.Message) {
			got <- m
			if len(got) == n {
				cancel()
			}
		})
	}()
	if err := <-errc; err != nil {
		t.Fatalf("follow %s: %v", topic, err)
	}
	close(got)
	var out []kafka.Message
	for m := range got {
		out = append(out, m)
	}
	if len(out) != n {
		t.Fatalf("read %d records from %s, want %d", len(out), topic, n)
	}
	return out
}

// TestWriterRoundTrip writes records with every codec and reads them back.
func TestWriterRoundTrip(t *testing.T) {
	for _, codec := range kafkaio.Compressions {
		t.Run(codec, func(t *testing.T) {
			c := kafkatest.Config(t, 4)
			c.Compression = codec
			testWriterRoundTrip(t, c)
		})
	}
}

func testWriterRoundTrip(t *testing.T, c kafkaio.Config) {
	topic := c.Topics().Fetch
	reg := prometheus.NewRegistry()
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), reg)
	defer w.Close()

	const n = 300
	want := make(map[string]*crawlv1.FetchRequest, n)
	var msgs []kafka.Message
	for i := range n {
		u := fmt.Sprintf("http://host%d.example/page/%d", i%17, i)
		req := &crawlv1.FetchRequest{CrawlId: "c1", Url: u, Depth: uint32(i % 5)}
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatalf("key %s: %v", u, err)
		}
		m, err := kafkaio.NewMessage(topic, key, req)
		if err != nil {
			t.Fatalf("new message: %v", err)
		}
		want[u] = req
		msgs = append(msgs, m)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Two concurrent callers share batches.
	errc := make(chan error, 2)
	go func() { errc <- w.Write(ctx, msgs[:n/2]...) }()
	go func() { errc <- w.Write(ctx, msgs[n/2:]...) }()
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if got := testutilValue(t, reg, "kafka_produced_total", topic); got != n {
		t.Errorf("kafka_produced_total = %v, want %d", got, n)
	}

	for _, m := range readAll(t, c, topic, n) {
		var got crawlv1.FetchRequest
		if err := kafkaio.Decode(m, &got); err != nil {
			t.Fatalf("decode: %v", err)
		}
		w, ok := want[got.Url]
		if !ok {
			t.Fatalf("unexpected record %s", got.Url)
		}
		if !proto.Equal(w, &got) {
			t.Errorf("record %s = %v, want %v", got.Url, &got, w)
		}
		// Key -> partition agreement: the writer put the record where
		// PartitionFor says.
		if p := kafkaio.PartitionFor(m.Key, c.Partitions); p != m.Partition {
			t.Errorf("record %s key %q in partition %d, PartitionFor says %d", got.Url, m.Key, m.Partition, p)
		}
		delete(want, got.Url)
	}
	if len(want) != 0 {
		t.Errorf("%d records missing", len(want))
	}
}

func TestDecodeSchemaMismatch(t *testing.T) {
	m, err := kafkaio.NewMessage("t", []byte("k"), &crawlv1.FetchRequest{Url: "http://a/"})
	if err != nil {
		t.Fatal(err)
	}
	var page crawlv1.FetchedPage
	if err := kafkaio.Decode(m, &page); !errors.Is(err, crawlmsg.ErrSchemaMismatch) {
		t.Fatalf("decode into other type: err = %v, want ErrSchemaMismatch", err)
	}
}

func TestWriterRecordTooLarge(t *testing.T) {
	c := kafkatest.Config(t, 1)
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	big := kafka.Message{Topic: c.Topics().Fetch, Key: []byte("k"), Value: make([]byte, c.MaxMessageBytes+1)}
	err := w.Write(ctx, big)
	var tooLarge kafka.MessageTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("write oversized record: err = %v, want MessageTooLargeError", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("oversized record was retried until the deadline")
	}
}

// TestWriterUnknownTopicRetriesUntilDeadline: records the broker does not
// take are retried until the caller gives up, and meanwhile the writer
// says it waits (Waiting, its readiness Check, the dependency_waiting
// gauge); a write the broker takes ends the wait.
func TestWriterUnknownTopicRetriesUntilDeadline(t *testing.T) {
	c := kafkatest.Config(t, 1)
	reg := prometheus.NewRegistry()
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), reg)
	defer w.Close()
	if err := w.Check(t.Context()); err != nil {
		t.Errorf("Check before any write: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	err := w.Write(ctx, kafka.Message{Topic: c.TopicPrefix + "missing", Key: []byte("k"), Value: []byte("v")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write to missing topic: err = %v, want deadline exceeded", err)
	}
	if err := w.Check(t.Context()); err == nil || !w.Waiting() || !strings.Contains(err.Error(), c.Brokers[0]) {
		t.Errorf("Check = %v, Waiting = %v after writes the broker refused; want an error naming broker %s and true", err, w.Waiting(), c.Brokers[0])
	}
	if v := metricstest.Value(t, reg, "dependency_waiting", "dependency", "kafka"); v != 1 {
		t.Errorf("dependency_waiting{dependency=kafka} = %v, want 1", v)
	}
	if err := w.Write(t.Context(), kafka.Message{Topic: c.Topics().Fetch, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(t.Context()); err != nil || w.Waiting() {
		t.Errorf("Check = %v, Waiting = %v after a write the broker took; want nil and false", err, w.Waiting())
	}
	if v := metricstest.Value(t, reg, "dependency_waiting", "dependency", "kafka"); v != 0 {
		t.Errorf("dependency_waiting{dependency=kafka} = %v after the wait, want 0", v)
	}
}

// TestWriterBatchSize: one write of 600 records to one partition goes in
// batches of 64 by default, one produce request each (sent one after
// another), and in two with WithBatchSize(LargeWriteBatch);
// kafka_produce_requests_total counts them.
func TestWriterBatchSize(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	msgs := make([]kafka.Message, 600)
	for i := range msgs {
		msgs[i] = kafka.Message{Topic: topic, Key: []byte("a.example"), Value: []byte(fmt.Sprintf("link %d", i))}
	}
	for _, tc := range []struct {
		name     string
		opts     []kafkaio.WriterOption
		min, max float64
	}{
		{"default", nil, 10, 600},
		{"large", []kafkaio.WriterOption{kafkaio.WithBatchSize(kafkaio.LargeWriteBatch)}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			w := kafkaio.NewWriter(c, zaptest.NewLogger(t), reg, tc.opts...)
			defer w.Close()
			if err := w.Write(t.Context(), msgs...); err != nil {
				t.Fatal(err)
			}
			if n := testutilValue(t, reg, "kafka_produced_total", topic); n != 600 {
				t.Fatalf("produced %v, want 600", n)
			}
			if n := testutilValue(t, reg, "kafka_produce_requests_total", topic); n < tc.min || n > tc.max {
				t.Errorf("%v produce requests for 600 records, want %v to %v", n, tc.min, tc.max)
			}
		})
	}
}

// testutilValue returns the value of the counter or gauge name{topic}.
func testutilValue(t *testing.T, reg *prometheus.Registry, name, topic string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, name, "topic", topic)
}

func TestDropPayloads(t *testing.T) {
	batch := []kafka.Message{
		{Topic: "t", Partition: 3, Offset: 7, Key: []byte("k"), Value: make([]byte, 1<<20), Headers: []kafka.Header{{Key: "h"}}},
		{Topic: "t", Partition: 3, Offset: 8, Value: []byte("v")},
	}
	kafkaio.DropPayloads(batch)
	for i, r := range batch {
		if r.Topic != "t" || r.Partition != 3 || r.Offset != int64(7+i) || r.Key != nil || r.Value != nil || r.Headers != nil {
			t.Errorf("record %d = %+v, want only topic t, partition 3 and offset %d", i, r, 7+i)
		}
	}
}

func TestAckRefs(t *testing.T) {
	batch := []kafka.Message{
		{Topic: "t", Partition: 3, Offset: 7, Key: []byte("k"), Value: make([]byte, 1<<20), Headers: []kafka.Header{{Key: "h"}}},
		{Topic: "t", Partition: 3, Offset: 8, Value: []byte("v")},
	}
	refs := kafkaio.AckRefs(batch)
	if len(refs) != len(batch) {
		t.Fatalf("%d refs for %d records", len(refs), len(batch))
	}
	for i, r := range refs {
		want := kafka.Message{Topic: "t", Partition: 3, Offset: batch[i].Offset}
		if r.Topic != want.Topic || r.Partition != want.Partition || r.Offset != want.Offset ||
			r.Key != nil || r.Value != nil || r.Headers != nil {
			t.Errorf("ref %d = %+v, want only topic, partition and offset of %+v", i, r, want)
		}
	}
}

// TestWriterUsesFastSnappy checks that building a writer switches kafka-go's
// snappy codec to its fast encoder (the round trip above reads what it
// writes, through kafka-go's ordinary snappy decoder).
func TestWriterUsesFastSnappy(t *testing.T) {
	w := kafkaio.NewWriter(kafkaio.DefaultConfig(), zaptest.NewLogger(t), nil)
	defer w.Close()
	if got := compress.SnappyCodec.Compression; got != snappy.FasterCompression {
		t.Errorf("snappy codec level = %v, want FasterCompression (%v)", got, snappy.FasterCompression)
	}
}

// TestWriterRecreatesLostTopics: a broker that comes back without the
// crawler's topics (a lost volume) gets them again from a writer that
// has waited for one of them for a while, and the write goes through.
func TestWriterRecreatesLostTopics(t *testing.T) {
	c := kafkatest.Config(t, 1)
	if err := kafkaio.EnsureTopics(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	topic := c.Topics().Fetch
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	resp, err := client.DeleteTopics(t.Context(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Errors[topic]; err != nil {
		t.Fatalf("delete %s: %v", topic, err)
	}
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := w.Write(ctx, kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("write to the lost topic: %v", err)
	}
	t.Logf("written after %s", time.Since(start).Round(time.Millisecond))
	if w.Waiting() {
		t.Error("the writer still says it waits after the write went through")
	}
}
