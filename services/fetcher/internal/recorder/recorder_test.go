package recorder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// TestRecordBatches records outcomes from many goroutines against the real
// broker and ClickHouse: every record is produced, every row inserted (the
// robots.txt rows that some outcomes carry too), each Done called once with
// nil, and in far fewer batches than outcomes.
func TestRecordBatches(t *testing.T) {
	const outcomes, robotsEvery = 400, 50
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	w := kafkaio.NewWriter(kcfg, log, reg)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rlog := chstore.NewBatchWriter(store, chstore.RobotsTxt, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rec, err := New(Options{}, w, flog, rlog, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	recCtx, stopRec := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	g.Go(func() error { return rlog.Run(writerCtx) })
	g.Go(func() error { defer stopWriter(); return rec.Run(recCtx, 5*time.Second) })

	topic := kcfg.Topics().Fetched
	var done sync.WaitGroup
	var calls, failures atomic.Int32
	var senders sync.WaitGroup
	for i := range outcomes {
		done.Add(1)
		var robots []chstore.RobotsRow
		if i%robotsEvery == 0 {
			robots = []chstore.RobotsRow{{Origin: fmt.Sprintf("http://h%d", i), Host: fmt.Sprintf("h%d", i), Agent: "trawl",
				Outcome: "parsed", Status: 200, FetchedAt: time.Now(), Expires: time.Now().Add(time.Hour)}}
		}
		senders.Go(func() {
			rec.Record(ctx, Outcome{
				Msgs:   []kafka.Message{{Topic: topic, Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprint(i))}},
				Rows:   []chstore.FetchLogRow{{CrawlID: "rec", URL: fmt.Sprintf("http://a/%d", i), URLFP: uint64(i + 1), Host: "a", FetchedAt: time.Now(), Status: 200}},
				Robots: robots,
				Done: func(err error) {
					calls.Add(1)
					if err != nil {
						failures.Add(1)
					}
					done.Done()
				},
			})
		})
	}
	senders.Wait()
	done.Wait()
	stopRec()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != outcomes || failures.Load() != 0 {
		t.Fatalf("Done called %d times with %d failures, want %d and 0", calls.Load(), failures.Load(), outcomes)
	}
	var rows uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM fetch_log WHERE crawl_id = 'rec'").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != outcomes {
		t.Errorf("%d fetch_log rows, want %d", rows, outcomes)
	}
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM robots_txt").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if want := (outcomes + robotsEvery - 1) / robotsEvery; rows != uint64(want) {
		t.Errorf("%d robots_txt rows, want %d", rows, want)
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
	batches := histogramCount(t, rec.m.batch)
	if batches >= outcomes/4 {
		t.Errorf("%d batches for %d outcomes: not batched", batches, outcomes)
	}
	t.Logf("%d outcomes in %d batches", outcomes, batches)
}

// TestInsertWaitHoldsNoWriter: batches whose records are produced wait for
// the fetch log's flush without holding a writer, so with one writer and a
// flush every 800ms, eight batches recorded one after the other are all
// durable after about one flush, not eight.
func TestInsertWaitHoldsNoWriter(t *testing.T) {
	const batches, flush = 8, 800 * time.Millisecond
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	w := kafkaio.NewWriter(kcfg, log, nil)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: flush}, log, nil)
	rec, err := New(Options{Writers: 1, MaxBatch: 1}, w, flog, nil, nil)
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

	start := time.Now()
	var done sync.WaitGroup
	for i := range batches {
		done.Add(1)
		rec.Record(ctx, Outcome{
			Msgs: []kafka.Message{{Topic: kcfg.Topics().Fetched, Key: []byte("k"), Value: []byte(fmt.Sprint(i))}},
			Rows: []chstore.FetchLogRow{{CrawlID: "wait", URL: fmt.Sprintf("http://a/%d", i), URLFP: uint64(i + 1), Host: "a", FetchedAt: time.Now(), Status: 200}},
			Done: func(err error) {
				if err != nil {
					t.Errorf("outcome %d: %v", i, err)
				}
				done.Done()
			},
		})
	}
	done.Wait()
	took := time.Since(start)
	stopRec()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := histogramCount(t, rec.m.batch); got != batches {
		t.Fatalf("%d batches, want %d (MaxBatch 1)", got, batches)
	}
	// Held writers would serialize the batches: one flush each.
	if took >= 3*flush {
		t.Errorf("%d single-outcome batches took %v with one writer and a %v flush: the insert wait holds the writer", batches, took, flush)
	}
	t.Logf("%d batches durable in %v", batches, took)
}

// TestRecordFailsWithoutBroker: with the broker gone, outcomes are not
// durable; at stop each is reported failed (never acked), and Record after
// stop reports ErrStopped at once.
func TestRecordFailsWithoutBroker(t *testing.T) {
	cluster, brokers := kafkatest.Cluster(t)
	kcfg := kafkatest.ConfigFor(t, brokers, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	reg := prometheus.NewRegistry()
	w := kafkaio.NewWriter(kcfg, log, reg)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{}, log, nil)
	rec, err := New(Options{}, w, flog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recCtx, stopRec := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	g.Go(func() error { defer stopWriter(); return rec.Run(recCtx, 300*time.Millisecond) })

	errs := make(chan error, 3)
	for i := range 3 {
		rec.Record(ctx, Outcome{
			Msgs: []kafka.Message{{Topic: kcfg.Topics().Fetched, Value: []byte{byte(i)}}},
			Rows: []chstore.FetchLogRow{{CrawlID: "down", URL: "http://a/", URLFP: 1, Host: "a", FetchedAt: time.Now()}},
			Done: func(err error) { errs <- err },
		})
	}
	// Stop once the batch is being written and failing.
	for produceErrors(t, reg) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no produce attempt failed")
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopRec()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err == nil {
			t.Error("an outcome was reported durable with the broker down")
		}
	}
	var got error
	rec.Record(ctx, Outcome{Done: func(err error) { got = err }})
	if !errors.Is(got, ErrStopped) {
		t.Errorf("Record after stop: %v, want ErrStopped", got)
	}
}

func histogramCount(t *testing.T, h prometheus.Histogram) uint64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	h.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// produceErrors sums kafka_produce_errors_total over topics.
func produceErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == "kafka_produce_errors_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// TestRecordRobotsWithoutWriter: an outcome with a robots.txt row given to
// a recorder without a robots.txt writer is reported failed (never acked),
// so the wiring error cannot lose the row silently.
func TestRecordRobotsWithoutWriter(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	rec, err := New(Options{}, w, flog, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	recCtx, stopRec := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return flog.Run(writerCtx) })
	g.Go(func() error { defer stopWriter(); return rec.Run(recCtx, time.Second) })
	done := make(chan error, 1)
	rec.Record(ctx, Outcome{
		Msgs:   []kafka.Message{{Topic: kcfg.Topics().Fetched, Value: []byte("x")}},
		Robots: []chstore.RobotsRow{{Origin: "http://h", Agent: "trawl", Outcome: "parsed"}},
		Done:   func(err error) { done <- err },
	})
	if err := <-done; !errors.Is(err, ErrNoRobotsTxt) {
		t.Errorf("Done(%v), want ErrNoRobotsTxt", err)
	}
	stopRec()
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
