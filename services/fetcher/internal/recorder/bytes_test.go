package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestRecordBytesBound: outcomes whose pages hold more bytes than MaxBytes
// wait in Record until the records before them are produced (the workers
// are held back, memory stays bounded), and every one is still produced
// and inserted; a page larger than the bound passes alone.
func TestRecordBytesBound(t *testing.T) {
	const outcomes, page, bound = 60, 8 << 10, 20 << 10
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	w := kafkaio.NewWriter(kcfg, log, nil)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	rec, err := New(Options{MaxBytes: bound}, w, flog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	recCtx, stopRec := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	g.Go(func() error { defer stopWriter(); return rec.Run(recCtx, 5*time.Second) })

	topic := kcfg.Topics().Fetched
	var failures atomic.Int32
	var senders sync.WaitGroup
	for i := range outcomes {
		size := page
		if i == outcomes/2 {
			size = 3 * bound // over the bound: passes alone
		}
		senders.Go(func() {
			done := make(chan struct{})
			rec.Record(ctx, Outcome{
				Last: []kafka.Message{{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{'x'}, size)}},
				Rows: []chstore.FetchLogRow{{CrawlID: "bytes", URL: fmt.Sprintf("http://a/%d", i), URLFP: uint64(i + 1), Host: "a", FetchedAt: time.Now(), Status: 200}},
				Done: func(err error) {
					if err != nil {
						failures.Add(1)
					}
					close(done)
				},
			})
			<-done
		})
	}
	senders.Wait()
	stopRec()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if failures.Load() != 0 {
		t.Fatalf("%d outcomes failed", failures.Load())
	}
	if n := testutil.ToFloat64(rec.m.held); n == 0 {
		t.Errorf("no Record waited for bytes: %d outcomes of %d KiB against a bound of %d KiB", outcomes, page>>10, bound>>10)
	}
	parts, err := kafkaio.GroupOffsets(ctx, kcfg, "none", topic)
	if err != nil {
		t.Fatal(err)
	}
	var produced int64
	for _, p := range parts {
		produced += p.End
	}
	if produced != outcomes {
		t.Errorf("%d records produced, want %d", produced, outcomes)
	}
	if got := rec.held.TryAcquire(bound); !got {
		t.Error("bytes still held after every outcome was produced")
	}
}

// TestRecordBytesStop: a Record waiting for bytes when Run stops is told
// ErrStopped at once (the drain waits for the senders), and the outcome
// that held the bytes is still written by the drain.
func TestRecordBytesStop(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	w := kafkaio.NewWriter(kcfg, log, nil)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	rec, err := New(Options{MaxBytes: 1 << 10}, w, flog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	topic := kcfg.Topics().Fetched
	outcome := func(i int, done chan<- error) Outcome {
		return Outcome{
			Last: []kafka.Message{{Topic: topic, Value: bytes.Repeat([]byte{'x'}, 1<<10)}},
			Rows: []chstore.FetchLogRow{{CrawlID: "stop", URL: fmt.Sprintf("http://a/%d", i), URLFP: uint64(i + 1), Host: "a", FetchedAt: time.Now(), Status: 200}},
			Done: func(err error) { done <- err },
		}
	}
	first, second := make(chan error, 1), make(chan error, 1)
	rec.Record(ctx, outcome(1, first)) // queued, holding the whole bound: Run is not running
	go rec.Record(ctx, outcome(2, second))
	for testutil.ToFloat64(rec.m.held) == 0 { // the second waits for bytes
		select {
		case <-ctx.Done():
			t.Fatal("the second outcome never waited for bytes")
		case <-time.After(time.Millisecond):
		}
	}

	writerCtx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	go func() { _ = flog.Run(writerCtx) }()
	recCtx, stopRec := context.WithCancel(ctx)
	stopRec() // Run goes straight to its drain
	if err := rec.Run(recCtx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Errorf("the queued outcome: %v, want it written by the drain", err)
	}
	if err := <-second; !errors.Is(err, ErrStopped) {
		t.Errorf("the outcome waiting for bytes: %v, want ErrStopped", err)
	}
}
