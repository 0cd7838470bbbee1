package pages_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestHandleDropsParsedPayloads hands a partition's handler a batch of
// pages, as the group does, and checks that once Handle returns the
// batch's records no longer hold their payloads (the handler is then
// waiting only on its inserts, and must not keep the pages alive), while
// every record is still acked once its document is stored.
func TestHandleDropsParsedPayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	kc := kafkatest.Config(t, partitions)
	topics := kc.Topics()
	store := chtest.NewStore(t)
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)

	w := kafkaio.NewWriter(kc, log, prometheus.NewRegistry())
	defer w.Close()
	docs := chstore.NewBatchWriter(store, chstore.Documents, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	runWriters(t, docs)
	metrics, err := pages.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	proc := pages.NewProcessor(pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048},
		topics, pages.Sinks{Publisher: w, Documents: docs, Seen: store}, nil, nil, log, metrics, func() time.Time { return now })
	h, err := proc.Assign(ctx, topics.Fetched, 0)
	if err != nil {
		t.Fatal(err)
	}

	const n = 5
	batch := make([]kafka.Message, n)
	for i := range batch {
		u := fmt.Sprintf("http://127.0.0.2/p%d.html", i)
		page := htmlPage(u, 0, fmt.Sprintf(`<title>P%d</title><p>page %d</p><a href="/q%d">q</a>`, i, i, i), now.Add(-time.Second))
		m, err := kafkaio.NewMessage(topics.Fetched, []byte("127.0.0.2"), page)
		if err != nil {
			t.Fatal(err)
		}
		m.Partition, m.Offset = 0, int64(100+i)
		batch[i] = m
	}
	var mu sync.Mutex
	acked := make(map[int64]bool)
	allAcked := make(chan struct{})
	ack := func(m kafka.Message) {
		mu.Lock()
		defer mu.Unlock()
		acked[m.Offset] = true
		if len(acked) == n {
			close(allAcked)
		}
	}
	if err := h.Handle(ctx, batch, ack); err != nil {
		t.Fatal(err)
	}
	for i, m := range batch {
		if m.Value != nil || m.Key != nil {
			t.Errorf("record %d still holds its payload after Handle (%d bytes)", i, len(m.Value))
		}
		if m.Offset != int64(100+i) || m.Partition != 0 {
			t.Errorf("record %d lost its place: partition %d offset %d", i, m.Partition, m.Offset)
		}
	}
	select {
	case <-allAcked:
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("acked %v of offsets 100..%d", acked, 100+n-1)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var stored uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM documents WHERE crawl_id = 'c'").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != n {
		t.Fatalf("%d documents stored, want %d", stored, n)
	}
}
