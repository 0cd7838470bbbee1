// Package schedtest holds what the scheduler's integration tests share:
// reading the fetch topic back, the pipeline's partition of a URL, and
// waiting for state outside the test (the broker, ClickHouse, a
// consumer's metrics). Imported by tests only.
package schedtest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Fetched is one record read back from the Fetch topic.
type Fetched struct {
	Partition int
	Key       string
	Req       *crawlv1.FetchRequest
}

// Fetches reads every record of c's Fetch topic, up to its end now.
func Fetches(t *testing.T, c kafkaio.Config) []Fetched {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []Fetched
	err := kafkaio.ReadToEnd(ctx, c, c.Topics().Fetch, kafkaio.ReadOptions{}, func(m kafka.Message) {
		var req crawlv1.FetchRequest
		if err := kafkaio.Decode(m, &req); err != nil {
			t.Errorf("decode fetch request: %v", err)
		}
		out = append(out, Fetched{Partition: m.Partition, Key: string(m.Key), Req: &req})
	})
	if err != nil {
		t.Fatalf("read fetch topic: %v", err)
	}
	return out
}

// PartitionOf is the pipeline's key and partition of a canonical URL.
func PartitionOf(t *testing.T, url string, partitions int) (string, int) {
	t.Helper()
	k, err := kafkaio.Key(url)
	if err != nil {
		t.Fatalf("key %q: %v", url, err)
	}
	return string(k), kafkaio.PartitionFor(k, partitions)
}

// WaitFor polls cond on a ticker until it holds, for at most 20s: for
// state the test cannot be told about (a row in ClickHouse, a record on
// the broker, a metric of a consumer running its own goroutines).
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// HoldsFor checks cond every 50ms for window and fails the test the first
// time it does not hold: what a test checks when the point is that nothing
// happens (no second release, no request while paused).
func HoldsFor(t *testing.T, window time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.NewTimer(window)
	defer end.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		select {
		case <-end.C:
			return
		case <-tick.C:
		}
	}
}
