package chstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// ErrWriterStopped is returned by Write when the writer's Run has returned
// (or returns) before the rows were inserted. The rows were not written.
var ErrWriterStopped = errors.New("clickhouse writer stopped")

// BatchOptions tunes a BatchWriter.
type BatchOptions struct {
	MaxRows       int           // flush when this many rows are buffered (default DefaultBatchRows)
	FlushInterval time.Duration // flush at least this often (default DefaultFlushInterval)
	MaxBuffered   int           // Write blocks while this many rows wait (default 10 * MaxRows): bounded memory
	// MaxBytes and MaxBufferedBytes bound a batch and what waits in
	// bytes (Table.Size) as MaxRows and MaxBuffered do in rows, for a
	// table whose rows differ a thousandfold in size; 0 (the default),
	// or a table without Size, bounds rows only. MaxBufferedBytes is at
	// least MaxBytes.
	MaxBytes         int
	MaxBufferedBytes int
	RetryBackoff     time.Duration // first retry delay, doubled up to 5s (default 100ms)
	// ShutdownTimeout bounds the final flush Run makes once its ctx is
	// done (default 5s).
	ShutdownTimeout time.Duration
}

const (
	maxRetryBackoff = 5 * time.Second
)

func (o BatchOptions) withDefaults() BatchOptions {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultBatchRows
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.MaxBuffered <= 0 {
		o.MaxBuffered = 10 * o.MaxRows
	}
	if o.MaxBuffered < o.MaxRows {
		o.MaxBuffered = o.MaxRows
	}
	if o.MaxBytes > 0 && o.MaxBufferedBytes < o.MaxBytes {
		o.MaxBufferedBytes = o.MaxBytes
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 100 * time.Millisecond
	}
	return o
}

// batch is a set of rows inserted together; every Write whose rows are in
// it waits on done and then reads err.
type batch[T any] struct {
	rows  []T
	bytes int         // the rows' Table.Size, when the writer bounds bytes
	keys  map[int]int // rows by Table.Key, while the batch is current (countKeys)
	done  chan struct{}
	err   error
}

func newBatch[T any]() *batch[T] { return &batch[T]{done: make(chan struct{})} }

func (b *batch[T]) finish(err error) {
	b.err = err
	close(b.done)
}

// BatchWriter buffers rows of one table and inserts them in batches. A
// failed insert is retried with back-off until it succeeds or the writer's
// run context is done; rows are never dropped silently. Safe for concurrent
// use.
//
// A row the driver cannot encode (a programming error: Values returned a
// value of the wrong type) fails its whole batch at once: every Write of
// that batch returns the error instead of retrying forever.
type BatchWriter[T any] struct {
	store  *Store
	table  Table[T]
	opts   BatchOptions
	log    *zap.Logger
	m      writerMetrics
	insert string

	kick chan struct{} // cap 1: the current batch reached MaxRows, or Flush

	mu       sync.Mutex
	cur      *batch[T]     // accumulating, never nil
	due      int           // FlushWhen: cur is inserted once it holds this many rows (0: at MaxRows)
	dueKey   map[int]int   // FlushWhenKey: cur is inserted once it holds this many rows of a key
	buffered int           // rows accepted and not yet inserted or failed
	bufBytes int           // their Table.Size, when the writer bounds bytes
	space    chan struct{} // closed and replaced when buffered shrinks
	running  bool
	stopped  chan struct{} // closed when Run stops accepting rows
	stopOnce sync.Once
}

type writerMetrics struct {
	written  prometheus.Counter
	errors   prometheus.Counter
	flush    prometheus.Observer
	buffered prometheus.Gauge
	bytes    prometheus.Gauge
}

// NewBatchWriter returns a writer for table t. reg receives
// clickhouse_rows_written_total{table}, clickhouse_insert_errors_total{table},
// clickhouse_flush_seconds{table}, clickhouse_rows_buffered{table} (rows
// accepted by Write and not yet inserted) and, for a writer bounded in bytes,
// clickhouse_bytes_buffered{table} (their Table.Size). Several writers may share reg.
// A nil log or reg disables logging or metrics.
func NewBatchWriter[T any](s *Store, t Table[T], o BatchOptions, log *zap.Logger, reg prometheus.Registerer) *BatchWriter[T] {
	if log == nil {
		log = zap.NewNop()
	}
	w := &BatchWriter[T]{
		store:   s,
		table:   t,
		opts:    o.withDefaults(),
		log:     log.With(zap.String("table", t.Name)),
		insert:  "INSERT INTO " + t.Name + " (" + strings.Join(t.Columns, ", ") + ")",
		kick:    make(chan struct{}, 1),
		cur:     newBatch[T](),
		space:   make(chan struct{}),
		stopped: make(chan struct{}),
	}
	w.m = newWriterMetrics(reg, t.Name)
	return w
}

func newWriterMetrics(reg prometheus.Registerer, table string) writerMetrics {
	written := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clickhouse_rows_written_total",
		Help: "Rows inserted into ClickHouse.",
	}, []string{"table"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "clickhouse_insert_errors_total",
		Help: "Failed ClickHouse insert attempts (each retry counts).",
	}, []string{"table"})
	flush := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "clickhouse_flush_seconds",
		Help:    "Duration of successful ClickHouse batch inserts, retries included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"table"})
	buffered := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clickhouse_rows_buffered",
		Help: "Rows accepted by a writer and not yet inserted.",
	}, []string{"table"})
	bytes := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "clickhouse_bytes_buffered",
		Help: "Bytes of the rows accepted by a writer bounded in bytes and not yet inserted (0 for other writers).",
	}, []string{"table"})
	return writerMetrics{
		written:  telemetry.Register(reg, written).WithLabelValues(table),
		errors:   telemetry.Register(reg, errs).WithLabelValues(table),
		flush:    telemetry.Register(reg, flush).WithLabelValues(table),
		buffered: telemetry.Register(reg, buffered).WithLabelValues(table),
		bytes:    telemetry.Register(reg, bytes).WithLabelValues(table),
	}
}

// Write adds rows and blocks until the batch containing them has been
// inserted (durable), or ctx is done, or the writer stopped. Concurrent
// callers share batches.
//
// When ctx is done first, Write returns ctx.Err() but the rows stay queued
// and may still be inserted: the caller must treat them as not confirmed.
// Write blocks while MaxBuffered rows (or MaxBufferedBytes) wait (a single
// call larger than that is accepted when nothing else waits).
func (w *BatchWriter[T]) Write(ctx context.Context, rows ...T) error {
	if len(rows) == 0 {
		return nil
	}
	size := w.size(rows)
	var b *batch[T]
	for b == nil {
		w.mu.Lock()
		select {
		case <-w.stopped:
			w.mu.Unlock()
			return ErrWriterStopped
		default:
		}
		if w.buffered > 0 && (w.buffered+len(rows) > w.opts.MaxBuffered ||
			(w.opts.MaxBufferedBytes > 0 && w.bufBytes+size > w.opts.MaxBufferedBytes)) {
			space := w.space
			w.mu.Unlock()
			select {
			case <-space:
				continue
			case <-w.stopped:
				return ErrWriterStopped
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		b = w.cur
		b.rows = append(b.rows, rows...)
		b.bytes += size
		w.buffered += len(rows)
		w.bufBytes += size
		w.m.buffered.Set(float64(w.buffered))
		w.m.bytes.Set(float64(w.bufBytes))
		keyDue := w.countKeys(b, rows)
		if len(b.rows) >= w.opts.MaxRows || (w.opts.MaxBytes > 0 && b.bytes >= w.opts.MaxBytes) ||
			(w.due > 0 && len(b.rows) >= w.due) || keyDue {
			w.due = 0
			w.Flush()
		}
		w.mu.Unlock()
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// size is the bytes of rows by Table.Size when the writer bounds bytes
// (MaxBufferedBytes, at least MaxBytes when that is set), else 0.
func (w *BatchWriter[T]) size(rows []T) int {
	if w.opts.MaxBufferedBytes <= 0 || w.table.Size == nil {
		return 0
	}
	n := 0
	for _, r := range rows {
		n += w.table.Size(r)
	}
	return n
}

// Flush asks Run to insert the rows buffered now instead of at the next
// interval, and returns at once (a Write still waits for its batch). For
// a service whose reading pauses for the acks that wait on these rows
// (kafkaio.GroupConfig.OnFull).
func (w *BatchWriter[T]) Flush() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// FlushWhen asks Run to insert the rows buffered once they are n or more
// (at once if they are already), instead of at the next interval, and
// returns at once; it holds until then, whatever intervals pass, and a
// second call keeps the smaller n. For a service whose acks wait on these
// rows and which knows that n of them are on their way (the fetcher's
// partition with half its window waiting: its rows are still being
// produced when it asks), so that the insert carries them all.
func (w *BatchWriter[T]) FlushWhen(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cur.rows) >= n {
		w.due = 0
		w.Flush()
		return
	}
	if w.due == 0 || n < w.due {
		w.due = n
	}
}

// FlushWhenKey is FlushWhen for the rows of one key (Table.Key): Run
// inserts the rows buffered, all keys', once n or more of them are key's
// (at once if they are already). It holds until then, whatever inserts
// and intervals pass, and a second call for a key keeps the smaller n.
// For a fetcher's partition with half its window waiting for its rows:
// FlushWhen would let any n rows, mostly other partitions', trigger the
// insert, and the partition, still at its mark, would ask again for the
// next insert as soon as the one under way took its rows: inserts of a
// few hundred rows, each a part ClickHouse merges again and again. A
// writer whose table has no Key treats it as FlushWhen.
func (w *BatchWriter[T]) FlushWhenKey(key, n int) {
	if w.table.Key == nil {
		w.FlushWhen(n)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur.keys[key] >= n {
		delete(w.dueKey, key)
		w.Flush()
		return
	}
	if w.dueKey == nil {
		w.dueKey = map[int]int{}
	}
	if d, ok := w.dueKey[key]; !ok || n < d {
		w.dueKey[key] = n
	}
}

// countKeys counts rows, just added to b, by key (Table.Key) and reports
// whether a key reached the count FlushWhenKey asked for it (which is then
// met). w.mu is held.
func (w *BatchWriter[T]) countKeys(b *batch[T], rows []T) bool {
	if w.table.Key == nil {
		return false
	}
	if b.keys == nil {
		b.keys = map[int]int{}
	}
	met := false
	for _, r := range rows {
		k := w.table.Key(r)
		b.keys[k]++
		if d, ok := w.dueKey[k]; ok && b.keys[k] >= d {
			delete(w.dueKey, k)
			met = true
		}
	}
	return met
}

// Flusher is a writer that can be asked to flush now (BatchWriter).
type Flusher interface{ Flush() }

// FlushEach returns a function that asks each of ws to flush now: a
// consumer group's OnFull for a service whose acks wait on these writers.
func FlushEach(ws ...Flusher) func() {
	return func() {
		for _, w := range ws {
			w.Flush()
		}
	}
}

// Run flushes batches until ctx is done, then flushes what is buffered
// (bounded by a short deadline) and returns. Write fails after Run returns.
// Run returns nil after a clean shutdown, or an error saying how many rows
// could not be written (their Write calls got ErrWriterStopped). Call Run
// once.
func (w *BatchWriter[T]) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("clickhouse writer: Run called twice")
	}
	w.running = true
	w.mu.Unlock()

	ticker := time.NewTicker(w.opts.FlushInterval)
	defer ticker.Stop()
	var failed *batch[T] // a batch whose insert was cut short by ctx
	for failed == nil {
		select {
		case <-ctx.Done():
			return w.shutdown(ctx, nil)
		case <-w.kick:
		case <-ticker.C:
		}
		b := w.take()
		if b == nil {
			continue
		}
		// The interval counts from this insert: a batch flushed early
		// (MaxRows, Flush) is not followed by a tick's small one.
		ticker.Reset(w.opts.FlushInterval)
		if err := w.insertRetrying(ctx, b); err != nil {
			if ctx.Err() == nil {
				w.release(b, err) // permanent: Writes get the error
				continue
			}
			failed = b
		} else {
			w.release(b, nil)
		}
	}
	return w.shutdown(ctx, failed)
}

// take detaches the current batch, or returns nil when it is empty.
func (w *BatchWriter[T]) take() *batch[T] {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cur.rows) == 0 {
		return nil
	}
	b := w.cur
	w.cur = newBatch[T]()
	return b
}

// release completes b with err and frees its buffer space.
func (w *BatchWriter[T]) release(b *batch[T], err error) {
	w.mu.Lock()
	w.buffered -= len(b.rows)
	w.bufBytes -= b.bytes
	w.m.buffered.Set(float64(w.buffered))
	w.m.bytes.Set(float64(w.bufBytes))
	close(w.space)
	w.space = make(chan struct{})
	w.mu.Unlock()
	b.finish(err)
}

// shutdown stops accepting rows and makes one bounded attempt to insert
// the rows still buffered (failed first, then the current batch).
func (w *BatchWriter[T]) shutdown(ctx context.Context, failed *batch[T]) error {
	w.mu.Lock()
	w.stopOnce.Do(func() { close(w.stopped) })
	rest := w.cur
	w.cur = newBatch[T]()
	w.mu.Unlock()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.ShutdownTimeout)
	defer cancel()
	lost := 0
	for _, b := range []*batch[T]{failed, rest} {
		if b == nil || len(b.rows) == 0 {
			continue
		}
		if err := w.insertRetrying(fctx, b); err != nil {
			lost += len(b.rows)
			w.log.Error("dropped batch at shutdown, writers notified", zap.Int("rows", len(b.rows)), zap.Error(err))
			w.release(b, fmt.Errorf("%w: insert into %s: %w", ErrWriterStopped, w.table.Name, err))
			continue
		}
		w.release(b, nil)
	}
	if lost > 0 {
		return fmt.Errorf("flush %s at shutdown: %d rows not written", w.table.Name, lost)
	}
	return nil
}

// permanentError marks an error retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// insertRetrying inserts b, retrying with exponential back-off until it
// succeeds, the error is permanent, or ctx is done. A server that cannot be
// reached is waited for as long as it takes (the store logs when it goes
// away and when it is back); refused credentials are permanent: no waiting
// fixes them.
func (w *BatchWriter[T]) insertRetrying(ctx context.Context, b *batch[T]) error {
	start := time.Now()
	retry := backoff.New(w.opts.RetryBackoff, maxRetryBackoff)
	recreated := false // once per batch: see Store.Read
	for attempt := 1; ; attempt++ {
		err := w.insertOnce(ctx, b.rows)
		if err == nil {
			w.store.avail.up()
			w.m.written.Add(float64(len(b.rows)))
			w.m.flush.Observe(time.Since(start).Seconds())
			return nil
		}
		w.m.errors.Inc()
		var perm permanentError
		if errors.As(err, &perm) {
			w.log.Error("rejected batch, writers notified", zap.Int("rows", len(b.rows)), zap.Error(err))
			return perm.err
		}
		if isAuthError(err) {
			w.log.Error("clickhouse refused the credentials, writers notified", zap.Int("rows", len(b.rows)), zap.Error(err))
			return fmt.Errorf("%w: %w", ErrAuth, err)
		}
		if ctx.Err() != nil {
			return err
		}
		if !recreated && isMissing(err) && w.store.recreate(ctx, "insert into "+w.table.Name, err) {
			recreated = true
			continue
		}
		if isUnavailable(err) {
			w.store.avail.down("insert into "+w.table.Name, err)
			w.log.Debug("retrying insert", zap.Int("rows", len(b.rows)), zap.Int("attempt", attempt),
				zap.Duration("backoff", retry.Next()), zap.Error(err))
		} else {
			w.log.Warn("retrying insert", zap.Int("rows", len(b.rows)), zap.Int("attempt", attempt),
				zap.Duration("backoff", retry.Next()), zap.Error(err))
		}
		if retry.Wait(ctx) != nil {
			return err
		}
	}
}

// BlockBytes is about how much row data one block of an insert carries.
// A batch larger than that is sent as several blocks of one INSERT: the
// server squashes them into one part (min_insert_block_size_rows and
// _bytes are far above a batch), while the driver's column and encode
// buffers stay this size instead of growing, copied and zeroed, to the
// size of the batch (documents: several MiB of text per insert).
const BlockBytes = 1 << 20

// rowBytes estimates the encoded size of a row's values: strings and byte
// slices by their length, anything else as eight bytes.
func rowBytes(vals []any) int {
	n := 0
	for _, v := range vals {
		switch v := v.(type) {
		case string:
			n += len(v) + 1
		case []byte:
			n += len(v) + 1
		case []string:
			for _, s := range v {
				n += len(s) + 1
			}
		default:
			n += 8
		}
	}
	return n
}

func (w *BatchWriter[T]) insertOnce(ctx context.Context, rows []T) error {
	pb, err := w.store.conn.PrepareBatch(ctx, w.insert)
	if err != nil {
		return fmt.Errorf("prepare insert into %s: %w", w.table.Name, err)
	}
	if w.table.Compare != nil {
		// In the table's order: the server then writes each block as it
		// comes (see Table.Compare). Stable, so that rows equal in the
		// key keep the order they were written in.
		slices.SortStableFunc(rows, w.table.Compare)
	}
	size := 0
	for _, r := range rows {
		vals := w.table.Values(r)
		if err := pb.Append(vals...); err != nil {
			_ = pb.Abort()
			return permanentError{fmt.Errorf("append row to %s: %w", w.table.Name, err)}
		}
		if size += rowBytes(vals); size >= BlockBytes {
			if err := pb.Flush(); err != nil {
				_ = pb.Abort()
				return fmt.Errorf("insert into %s: send block: %w", w.table.Name, err)
			}
			size = 0
		}
	}
	if err := pb.Send(); err != nil {
		return fmt.Errorf("insert into %s: %w", w.table.Name, err)
	}
	return nil
}
