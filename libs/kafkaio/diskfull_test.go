package kafkaio_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/disktest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestWriterWaitsOutBrokerDiskFull: with the embedded broker's data
// volume full, its produce answers are errors (kfake's: UNKNOWN_SERVER_ERROR,
// what a broker answers for a write it could not make). The writer waits
// them out, as it does a broker that is down: Write neither returns nor
// drops its records, and the writer says it waits (readiness); once space
// is freed every record is produced. The parser used to exit on the first
// such answer, and its restarts failed on the full disk until the
// launcher gave up.
func TestWriterWaitsOutBrokerDiskFull(t *testing.T) {
	vol := disktest.SmallVolume(t, "64m")
	_, brokers := kafkatest.Cluster(t, kfake.DataDir(filepath.Join(vol, "kafka")))
	c := kafkatest.ConfigFor(t, brokers, 1)
	if err := kafkaio.EnsureTopics(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	topic := c.Topics().Fetch
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	record := func(v string) kafka.Message { return kafka.Message{Topic: topic, Key: []byte("k"), Value: []byte(v)} }
	if err := w.Write(ctx, record("before")); err != nil {
		t.Fatalf("write before the disk is full: %v", err)
	}

	filler := filepath.Join(vol, "filler")
	disktest.Fill(t, filler)
	done := make(chan error, 1)
	// Larger than what a file's last page may still hold.
	during := record("during" + strings.Repeat(".", 256<<10))
	go func() { done <- w.Write(ctx, during) }()
	eventually(t, 20*time.Second, "the writer to say it waits while the broker's disk is full", func() bool {
		select {
		case err := <-done:
			t.Fatalf("a write returned while the broker's disk was full: %v", err)
		default:
		}
		return w.Waiting()
	})
	select {
	case err := <-done:
		t.Fatalf("a write returned while the broker's disk was full: %v", err)
	case <-time.After(time.Second):
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("write once space was freed: %v", err)
	}
	if w.Waiting() {
		t.Error("the writer still says it waits after the write went through")
	}
	got := readAll(t, c, topic, 2)
	if string(got[0].Value) != "before" || string(got[1].Value) != string(during.Value) {
		t.Errorf("records of %d and %d bytes; want before and the %d bytes written during", len(got[0].Value), len(got[1].Value), len(during.Value))
	}
}
