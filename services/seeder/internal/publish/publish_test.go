package publish_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestSeedsAcrossBatches publishes more seeds than one Write carries and
// reads every one back, once, on its host's partition.
func TestSeedsAcrossBatches(t *testing.T) {
	const partitions = 3
	kc := kafkatest.Config(t, partitions)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(kc, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()

	n := 2*publish.BatchSize + 7
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.%d.%d/seed/%d", i%7, 1+i%11, i)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got, err := publish.Seeds(ctx, w, kc.Topics().Discovered, "batches", urls, now)
	if err != nil || got != n {
		t.Fatalf("Seeds = %d, %v; want %d, nil", got, err, n)
	}

	seen := make(map[string]int)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	err = kafkaio.Follow(rctx, kc, kc.Topics().Discovered, func(m kafka.Message) {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		seen[d.Url]++
		key, _ := kafkaio.Key(d.Url)
		if string(m.Key) != string(key) || m.Partition != kafkaio.PartitionFor(key, partitions) {
			t.Errorf("%s: key %q partition %d, want %q %d", d.Url, m.Key, m.Partition, key, kafkaio.PartitionFor(key, partitions))
		}
		if d.CrawlId != "batches" || d.Source != crawlv1.Source_SOURCE_SEED || !d.DiscoveredAt.AsTime().Equal(now) {
			t.Errorf("%s: %v", d.Url, &d)
		}
		if len(seen) == n {
			rcancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		if seen[u] != 1 {
			t.Errorf("%s read %d times, want once", u, seen[u])
		}
	}
}
