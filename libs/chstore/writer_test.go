package chstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

// base is a fixed second-aligned time so that rows round-trip exactly.
var base = time.Date(2024, 5, 17, 10, 30, 0, 0, time.UTC)

func fetchRow(crawl string, i int) chstore.FetchLogRow {
	at := base.Add(time.Duration(i) * 1500 * time.Millisecond)
	return chstore.FetchLogRow{
		CrawlID:     crawl,
		URL:         fmt.Sprintf("http://h%d.test/p/%d", i%7, i),
		URLFP:       uint64(i)*0x9e3779b97f4a7c15 + 1,
		Host:        fmt.Sprintf("h%d.test", i%7),
		Partition:   uint16(i % 7),
		Attempt:     1,
		FetchedAt:   at.Truncate(time.Second),
		FetchedAtMs: chstore.Millis(at),
		Status:      []uint16{200, 200, 404, 0, 301}[i%5],
		ErrorKind:   []string{"", "", "", "timeout", ""}[i%5],
		Bytes:       uint64(1000 + i),
		ContentType: "text/html",
		DurationMs:  uint32(10 + i%90),
		Depth:       uint16(i % 3),
		Fetcher:     "f1",
	}
}

// runWriter starts w.Run and returns a function that stops it and returns
// Run's error.
func runWriter[T any](t testing.TB, w *chstore.BatchWriter[T]) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func count(t *testing.T, s *chstore.Store, query string, args ...any) uint64 {
	t.Helper()
	var n uint64
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Conn().QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func TestBatchWriterConcurrent(t *testing.T) {
	tests := []struct {
		name    string
		writers int
		perCall int
		calls   int
		opts    chstore.BatchOptions
	}{
		{name: "many small writes", writers: 16, perCall: 1, calls: 20, opts: chstore.BatchOptions{MaxRows: 100, FlushInterval: 20 * time.Millisecond}},
		{name: "bounded buffer", writers: 8, perCall: 10, calls: 8, opts: chstore.BatchOptions{MaxRows: 25, MaxBuffered: 30, FlushInterval: 10 * time.Millisecond}},
		{name: "interval flush only", writers: 4, perCall: 3, calls: 5, opts: chstore.BatchOptions{MaxRows: 100000, FlushInterval: 30 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := chtest.NewStore(t)
			reg := prometheus.NewRegistry()
			w := chstore.NewBatchWriter(s, chstore.FetchLog, tt.opts, zaptest.NewLogger(t), reg)
			stop := runWriter(t, w)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()

			var wg sync.WaitGroup
			errs := make(chan error, tt.writers*tt.calls)
			for g := range tt.writers {
				wg.Go(func() {
					for c := range tt.calls {
						first := (g*tt.calls + c) * tt.perCall
						rows := make([]chstore.FetchLogRow, tt.perCall)
						for i := range rows {
							rows[i] = fetchRow("c1", first+i)
						}
						if err := w.Write(ctx, rows...); err != nil {
							errs <- err
							return
						}
						// Write returned: the rows must be queryable now.
						n := count(t, s, "SELECT count() FROM fetch_log WHERE url_fp = ?", rows[len(rows)-1].URLFP)
						if n == 0 {
							errs <- fmt.Errorf("row %d not queryable after Write returned", first+len(rows)-1)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := stop(); err != nil {
				t.Fatalf("run: %v", err)
			}
			want := uint64(tt.writers * tt.calls * tt.perCall)
			if got := count(t, s, "SELECT count() FROM fetch_log"); got != want {
				t.Errorf("rows = %d, want %d", got, want)
			}
			if got := metricValue(t, reg, "clickhouse_rows_written_total", "fetch_log"); got != float64(want) {
				t.Errorf("rows written metric = %v, want %d", got, want)
			}
			if err := w.Write(ctx, fetchRow("c1", 0)); !errors.Is(err, chstore.ErrWriterStopped) {
				t.Errorf("write after stop: %v, want ErrWriterStopped", err)
			}
		})
	}
}

// metricValue returns the counter or gauge value of name{table=table}.
func metricValue(t *testing.T, reg *prometheus.Registry, name, table string) float64 {
	t.Helper()
	return metricstest.Value(t, reg, name, "table", table)
}

// TestBatchWriterLargeBatchIsOnePart: a batch several times BlockBytes goes
// out as several blocks of one insert, and the server still makes one part
// of it with every row intact.
func TestBatchWriterLargeBatchIsOnePart(t *testing.T) {
	s := chtest.NewStore(t)
	const n, textBytes = 64, 64 << 10 // 4 MiB of text: four blocks or more
	// MaxRows n: the batch is inserted once all n rows are buffered.
	w := chstore.NewBatchWriter(s, chstore.Documents, chstore.BatchOptions{MaxRows: n, FlushInterval: time.Hour},
		zaptest.NewLogger(t), prometheus.NewRegistry())
	stop := runWriter(t, w)
	rows := make([]chstore.DocumentRow, n)
	wantBytes := uint64(0)
	for i := range rows {
		text := strings.Repeat(fmt.Sprintf("word%d ", i%10), textBytes/6)
		rows[i] = chstore.DocumentRow{CrawlID: "c1", URL: fmt.Sprintf("http://h.test/%d", i), URLFP: uint64(i + 1),
			Host: "h.test", FetchedAt: base, Status: 200, Title: fmt.Sprint("t", i), Text: text, ContentType: "text/html"}
		wantBytes += uint64(len(text))
	}
	if wantBytes < 3*chstore.BlockBytes {
		t.Fatalf("test batch of %d bytes does not span several blocks of %d", wantBytes, chstore.BlockBytes)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got := count(t, s, "SELECT count() FROM documents"); got != n {
		t.Errorf("rows = %d, want %d", got, n)
	}
	if got := count(t, s, "SELECT sum(length(text)) FROM documents"); got != wantBytes {
		t.Errorf("text bytes = %d, want %d", got, wantBytes)
	}
	if got := count(t, s, "SELECT uniqExact(url_fp) FROM documents"); got != n {
		t.Errorf("distinct rows = %d, want %d", got, n)
	}
	if got := count(t, s, "SELECT count() FROM system.parts WHERE database = currentDatabase() AND table = 'documents' AND active"); got != 1 {
		t.Errorf("parts = %d, want 1 (one insert)", got)
	}
}

// TestBatchWriterFlush: Flush inserts the rows a writer holds without
// waiting for its interval (an hour here), each time it is called.
func TestBatchWriterFlush(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	w := chstore.NewBatchWriter(s, chstore.FetchLog, chstore.BatchOptions{FlushInterval: time.Hour}, zaptest.NewLogger(t), nil)
	runWriter(t, w)
	for round := range 3 {
		done := make(chan error, 1)
		go func() { done <- w.Write(ctx, fetchRow("flush", round)) }()
		select {
		case err := <-done:
			t.Fatalf("round %d: Write returned before a flush (%v)", round, err)
		case <-time.After(200 * time.Millisecond):
		}
		w.Flush()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Write still waiting 10 s after Flush", round)
		}
		if got := count(t, s, "SELECT count() FROM fetch_log WHERE crawl_id = 'flush'"); got != uint64(round+1) {
			t.Errorf("round %d: %d rows inserted, want %d", round, got, round+1)
		}
	}
	w.Flush() // nothing held: no insert, no error
}

// asyncWrites writes rows of crawl with w each in its own goroutine, and
// checks whether those Writes returned (their rows inserted) or still wait.
type asyncWrites[T any] struct {
	t     *testing.T
	w     *chstore.BatchWriter[T]
	row   func(crawl string, i int) T
	crawl string
	done  chan error
}

func newAsyncWrites[T any](t *testing.T, w *chstore.BatchWriter[T], row func(crawl string, i int) T, crawl string) *asyncWrites[T] {
	return &asyncWrites[T]{t: t, w: w, row: row, crawl: crawl, done: make(chan error, 16)}
}

// write writes row(crawl, i) for each i (fetchRow: of partition i%7).
func (a *asyncWrites[T]) write(ctx context.Context, is ...int) {
	for _, i := range is {
		go func() { a.done <- a.w.Write(ctx, a.row(a.crawl, i)) }()
	}
}

// waiting fails the test if a Write returns within 200 ms.
func (a *asyncWrites[T]) waiting(what string) {
	a.t.Helper()
	select {
	case err := <-a.done:
		a.t.Fatalf("%s: a Write returned (%v)", what, err)
	case <-time.After(200 * time.Millisecond):
	}
}

// inserted waits for n Writes to return without error.
func (a *asyncWrites[T]) inserted(what string, n int) {
	a.t.Helper()
	for range n {
		select {
		case err := <-a.done:
			if err != nil {
				a.t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			a.t.Fatalf("a Write still waiting 10 s after %s", what)
		}
	}
}

// TestBatchWriterFlushWhenKey: with an hour's interval, FlushWhenKey(1, 2)
// leaves any number of rows of other partitions (fetch_log's Key) waiting
// and inserts them all with the second row of partition 1; the mark is
// then used; a call the buffer already meets inserts at once, and of two
// calls for a key the smaller count holds.
func TestBatchWriterFlushWhenKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	w := chstore.NewBatchWriter(s, chstore.FetchLog, chstore.BatchOptions{FlushInterval: time.Hour}, zaptest.NewLogger(t), nil)
	runWriter(t, w)
	a := newAsyncWrites(t, w, fetchRow, "key")
	w.FlushWhenKey(1, 2)
	a.write(ctx, 0, 7, 14, 21, 1)
	a.waiting("four rows of partition 0 and one of partition 1")
	a.write(ctx, 8)
	a.inserted("the second row of partition 1", 6)
	if got := count(t, s, "SELECT count() FROM fetch_log WHERE crawl_id = 'key'"); got != 6 {
		t.Errorf("%d rows inserted, want 6 (every partition's)", got)
	}

	a.write(ctx, 15, 22)
	a.waiting("two rows of partition 1 after its mark was used")
	w.FlushWhenKey(1, 2)
	a.inserted("a FlushWhenKey the buffer met", 2)

	w.FlushWhenKey(0, 5)
	w.FlushWhenKey(0, 1)
	a.write(ctx, 28)
	a.inserted("the smaller of two counts asked for partition 0", 1)
}

// TestBatchWriterFlushWhen: with an hour's interval, rows asked for with
// FlushWhen(3) are inserted once the third is buffered (the first two
// wait for it, whatever was buffered when it was asked), and a FlushWhen
// the buffer already meets inserts at once.
func TestBatchWriterFlushWhen(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	w := chstore.NewBatchWriter(s, chstore.FetchLog, chstore.BatchOptions{FlushInterval: time.Hour}, zaptest.NewLogger(t), nil)
	runWriter(t, w)
	a := newAsyncWrites(t, w, fetchRow, "when")
	a.write(ctx, 0)
	w.FlushWhen(3)
	a.write(ctx, 1)
	a.waiting("two rows of three")
	a.write(ctx, 2)
	a.inserted("the third row", 3)
	if got := count(t, s, "SELECT count() FROM fetch_log WHERE crawl_id = 'when'"); got != 3 {
		t.Errorf("%d rows inserted, want 3", got)
	}

	// The mark was used: the next rows wait for their interval, or for a
	// FlushWhen they meet.
	a.write(ctx, 3)
	a.waiting("a row after the mark was used")
	w.FlushWhen(1)
	a.inserted("a FlushWhen the buffer met", 1)
}

// TestBatchWriterMaxBytes: a writer bounded in bytes (Documents.Size)
// inserts once its batch holds MaxBytes, whatever its rows, and a Write
// that would take what waits past MaxBufferedBytes waits for room: it is
// not in the insert the rows before it make.
func TestBatchWriterMaxBytes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	doc := func(crawl string, i int) chstore.DocumentRow {
		d := docRow(crawl, i)
		d.Text = strings.Repeat("word ", 2000) // 10 000 bytes
		return d
	}
	size := chstore.Documents.Size(doc("bytes", 0)) // of each row of crawl "bytes"
	if size < 10000 || size > 11000 {
		t.Fatalf("Documents.Size of a row with 10 000 bytes of text = %d, want 10 000 and its other fields", size)
	}

	// A batch of three rows' bytes: the third inserts all three.
	reg := prometheus.NewRegistry()
	w := chstore.NewBatchWriter(s, chstore.Documents, chstore.BatchOptions{FlushInterval: time.Hour, MaxBytes: 3 * size}, zaptest.NewLogger(t), reg)
	runWriter(t, w)
	a := newAsyncWrites(t, w, doc, "bytes")
	a.write(ctx, 0, 1)
	a.waiting("two rows of a three-row MaxBytes")
	if got := metricstest.Value(t, reg, "clickhouse_bytes_buffered", "table", "documents"); got != float64(2*size) {
		t.Errorf("clickhouse_bytes_buffered = %v with two rows waiting, want %d", got, 2*size)
	}
	a.write(ctx, 2)
	a.inserted("the third row's bytes", 3)
	if got := count(t, s, "SELECT count() FROM documents WHERE crawl_id = 'bytes'"); got != 3 {
		t.Errorf("%d rows inserted, want 3", got)
	}

	// Room for two rows' bytes: the third Write waits outside the batch.
	w2 := chstore.NewBatchWriter(s, chstore.Documents, chstore.BatchOptions{FlushInterval: time.Hour, MaxBufferedBytes: 2*size + size/2}, zaptest.NewLogger(t), nil)
	runWriter(t, w2)
	b := newAsyncWrites(t, w2, doc, "room")
	b.write(ctx, 0, 1)
	b.waiting("two rows")
	b.write(ctx, 2)
	b.waiting("a third row past MaxBufferedBytes")
	w2.Flush()
	b.inserted("a Flush of the first two", 2)
	if got := count(t, s, "SELECT count() FROM documents WHERE crawl_id = 'room'"); got != 2 {
		t.Errorf("%d rows inserted by the first Flush, want 2 (the third waits for room)", got)
	}
	b.waiting("the third row, in the batch after the first")
	w2.Flush()
	b.inserted("a second Flush", 1)
}
