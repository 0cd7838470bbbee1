// Package recorder makes the outcomes of fetches durable in batches, apart
// from the workers that fetch: a worker hands over an outcome (the records
// to produce, the fetch-log row, and the robots.txt row when its turn
// fetched one) and takes the next request at once; the recorder produces
// the records of many outcomes in one write (acks=all), then inserts their
// fetch-log rows in one write (and their robots.txt rows in another, at
// the same time), then reports each outcome done, and only then is its
// fetch request acknowledged.
//
// The order inside an outcome is the delivery contract of the fetcher: the
// FetchedPage (Outcome.Last) is produced after every other record of its
// batch is durable, so a FetchedPage in the fetched topic proves its whole
// outcome was published; and the fetch-log row is written after that, so a
// row in fetch_log proves it too. A redelivered request whose attempt has
// either is not fetched again: the row is found at once, the FetchedPage
// read back from the topic when the fetcher that made the request died
// before its row was inserted.
package recorder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/semaphore"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
)

// Producer publishes records and returns once every one is durable
// (*kafkaio.Writer). Safe for concurrent use; blocks.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// FetchLog stores fetch-log rows and returns once they are inserted
// (*chstore.BatchWriter). Safe for concurrent use; blocks.
type FetchLog interface {
	Write(ctx context.Context, rs ...rows.FetchLogRow) error
}

// RobotsTxt stores robots.txt rows and returns once they are inserted
// (*chstore.BatchWriter). Safe for concurrent use; blocks.
type RobotsTxt interface {
	Write(ctx context.Context, rs ...rows.RobotsRow) error
}

// ErrNoRobotsTxt is reported for a batch with robots.txt rows when the
// recorder has no RobotsTxt to write them to (a wiring error).
var ErrNoRobotsTxt = errors.New("robots.txt rows without a robots.txt writer")

// Outcome is what one fetch attempt leaves behind.
type Outcome struct {
	Msgs []kafka.Message // next attempt, redirect target, host state, proxy feedback
	// Last are produced once every record of Msgs of the whole batch is
	// durable: the FetchedPages, whose presence in the fetched topic then
	// proves that the rest of their outcome was published.
	Last []kafka.Message
	Rows []rows.FetchLogRow // its fetch-log row (none, or several for a batch of cancelled requests)
	// Robots is the robots.txt its turn fetched, to be reused by the next
	// owner of the host (none when robots.txt came from the cache).
	Robots []rows.RobotsRow
	// Done is called once, from the recorder's goroutines, when the
	// outcome is durable (nil) or could not be made so (the error; the
	// request is then left unacknowledged and redelivered). It must not
	// block for long.
	Done func(err error)

	weight int64 // the bytes of its records it holds of the recorder's MaxBytes
}

// size is the bytes of the records an outcome holds until produced.
func (o *Outcome) size() int64 {
	var n int64
	for _, m := range o.Msgs {
		n += int64(len(m.Key) + len(m.Value))
	}
	for _, m := range o.Last {
		n += int64(len(m.Key) + len(m.Value))
	}
	return n
}

// Options tunes a Recorder.
type Options struct {
	// MaxBatch is the most outcomes written together (default 256).
	MaxBatch int
	// Linger is how long a batch waits for more outcomes after its first
	// (default 10ms): a write is paid per batch, not per page, and a
	// fetch takes tens of milliseconds anyway.
	Linger time.Duration
	// Writers is the most batches being produced at once (default 4).
	// A batch whose records are produced waits for its rows' insert (up
	// to the fetch-log writer's flush interval) without holding a
	// writer, and without its records: the bodies are released once
	// produced.
	Writers int
	// Queue bounds the outcomes waiting for a batch (default 1024);
	// Record blocks while it is full, which holds the workers back.
	Queue int
	// MaxBytes bounds the bytes of the records held by the outcomes not
	// yet produced, queued or in a batch being produced (default 16 MiB):
	// Record blocks past it, which holds the workers back. The outcomes'
	// FetchedPages carry the pages' bodies: by count alone (Queue, plus
	// Writers × MaxBatch in production) they held up to 2 300 pages, 70
	// MB of 30 KB pages, whenever producing fell behind fetching (with
	// --warc on one core), and the collector then ran without pause
	// above the fetcher's soft memory limit. One outcome larger than
	// MaxBytes passes alone.
	MaxBytes int64
	// Recycle, when set, is given the Last records of a batch once they
	// are produced (the producer returned nil: nothing reads them any
	// more), to give their buffers back (kafkaio.Recycle). It is not
	// called for records whose write failed or was abandoned.
	Recycle func([]kafka.Message)
}

func (o Options) withDefaults() Options {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Linger <= 0 {
		o.Linger = 10 * time.Millisecond
	}
	if o.Writers <= 0 {
		o.Writers = 4
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// DefaultMaxBytes is Options.MaxBytes's default.
const DefaultMaxBytes = 16 << 20

// ErrStopped is reported to the Done of an outcome recorded after Run
// returned, or still queued when it returned.
var ErrStopped = errors.New("recorder stopped")

// Recorder batches outcomes. Record is safe for concurrent use; Run must be
// running for outcomes to be written.
type Recorder struct {
	opts   Options
	prod   Producer
	flog   FetchLog
	robots RobotsTxt // nil: no outcome carries robots.txt rows
	queue  chan Outcome
	stop   chan struct{}       // closed when Run stops accepting outcomes
	held   *semaphore.Weighted // bytes of records not yet produced (Options.MaxBytes)
	m      metrics

	mu      sync.Mutex
	stopped bool
	senders sync.WaitGroup // Record calls between the stopped check and their send
}

type metrics struct {
	batch   prometheus.Histogram
	write   prometheus.Histogram
	failed  prometheus.Counter
	waiting prometheus.Gauge
	held    prometheus.Counter
}

// New returns a recorder writing to prod, flog and robots (nil when no
// outcome carries robots.txt rows: a batch with some then fails with
// ErrNoRobotsTxt). reg receives
// crawler_fetcher_record_batch_outcomes, crawler_fetcher_record_seconds,
// crawler_fetcher_record_failures_total and crawler_fetcher_record_queued
// (names relative to reg's prefix); nil leaves them unexported.
func New(o Options, prod Producer, flog FetchLog, robots RobotsTxt, reg prometheus.Registerer) (*Recorder, error) {
	o = o.withDefaults()
	m := metrics{
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "record_batch_outcomes", Help: "Fetch outcomes written together in one batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}),
		write: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "record_seconds", Help: "Time to make one batch of outcomes durable (produce, then insert the fetch-log rows).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "record_failures_total", Help: "Outcomes that could not be made durable (their requests are redelivered).",
		}),
		held: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "record_bytes_waits_total", Help: "Outcomes that waited because the records not yet produced held their bytes' bound (Options.MaxBytes): producing fell behind fetching.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "record_queued", Help: "Outcomes waiting to be written.",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.batch, m.write, m.failed, m.waiting, m.held} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register recorder metrics: %w", err)
			}
		}
	}
	return &Recorder{opts: o, prod: prod, flog: flog, robots: robots, queue: make(chan Outcome, o.Queue), stop: make(chan struct{}),
		held: semaphore.NewWeighted(o.MaxBytes), m: m}, nil
}

// Record queues o. It blocks while the queue is full, until ctx is done
// (then o.Done is called with ctx's error). Done is never called from
// Record's goroutine otherwise.
func (r *Recorder) Record(ctx context.Context, o Outcome) {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		o.Done(ErrStopped)
		return
	}
	r.senders.Add(1)
	r.mu.Unlock()
	defer r.senders.Done()
	o.weight = min(o.size(), r.opts.MaxBytes)
	if err := r.hold(ctx, o.weight); err != nil {
		o.Done(err)
		return
	}
	select {
	case r.queue <- o:
		r.m.waiting.Inc()
	case <-r.stop:
		r.held.Release(o.weight)
		o.Done(ErrStopped)
	case <-ctx.Done():
		r.held.Release(o.weight)
		o.Done(fmt.Errorf("record fetch outcome: %w", ctx.Err()))
	}
}

// hold takes n bytes of MaxBytes, waiting while the outcomes not yet
// produced hold too many, until ctx is done or Run stops accepting
// outcomes (whose drain waits for the senders: a sender must not wait for
// bytes only the drain would give back).
func (r *Recorder) hold(ctx context.Context, n int64) error {
	if r.held.TryAcquire(n) {
		return nil
	}
	r.m.held.Inc()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-hctx.Done():
		}
	}()
	if err := r.held.Acquire(hctx, n); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("record fetch outcome: %w", ctx.Err())
		}
		return ErrStopped
	}
	return nil
}

// Run writes queued outcomes until ctx is done, then writes what is queued
// (with a context bounded by drain) and returns. Outcomes recorded after
// Run returned get ErrStopped.
func (r *Recorder) Run(ctx context.Context, drain time.Duration) error {
	sem := make(chan struct{}, r.opts.Writers)
	var wg sync.WaitGroup
	write := func(wctx context.Context, batch []Outcome) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.write(wctx, batch, func() { <-sem })
		}()
	}
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		if ctx.Err() != nil { // before the queue: the drain writes what is queued
			return r.drain(ctx, drain, write, &wg)
		}
		var first Outcome
		select {
		case <-ctx.Done():
			return r.drain(ctx, drain, write, &wg)
		case first = <-r.queue:
		}
		batch := []Outcome{first}
		linger.Reset(r.opts.Linger)
	fill:
		for len(batch) < r.opts.MaxBatch {
			select {
			case o := <-r.queue:
				batch = append(batch, o)
			case <-linger.C:
				break fill
			case <-ctx.Done():
				break fill
			}
		}
		linger.Stop()
		r.m.waiting.Sub(float64(len(batch)))
		write(ctx, batch)
	}
}

// drain stops accepting outcomes, writes what is queued under a context of
// its own (bounded by d) and waits for every batch in flight.
func (r *Recorder) drain(ctx context.Context, d time.Duration, write func(context.Context, []Outcome), wg *sync.WaitGroup) error {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	close(r.stop)
	r.senders.Wait() // every outcome is now queued or refused
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	defer cancel()
	for {
		var batch []Outcome
	take:
		for len(batch) < r.opts.MaxBatch {
			select {
			case o := <-r.queue:
				batch = append(batch, o)
			default:
				break take
			}
		}
		if len(batch) == 0 {
			break
		}
		r.m.waiting.Sub(float64(len(batch)))
		write(dctx, batch)
	}
	wg.Wait()
	return nil
}

// write makes one batch durable: every record of Msgs produced in one
// write, then every record of Last in another, then every fetch-log row
// inserted in one write and every robots.txt row in another (concurrently:
// nothing orders them), then each outcome done.
// produced is called once the records are produced (or failed to be):
// the rest of the batch no longer holds a writer, nor its records.
func (r *Recorder) write(ctx context.Context, batch []Outcome, produced func()) {
	start := time.Now()
	var logRows []rows.FetchLogRow
	var robots []rows.RobotsRow
	var weight int64
	for _, o := range batch {
		logRows = append(logRows, o.Rows...)
		robots = append(robots, o.Robots...)
		weight += o.weight
	}
	// produce holds the batch's records: once it returns they are
	// produced (or abandoned), and nothing of the batch keeps them while
	// its rows wait for their insert (up to the fetch log's flush
	// interval; before, each such batch kept its pages' buffers
	// reachable that long).
	err := r.produce(ctx, batch)
	r.held.Release(weight)
	produced()
	if err == nil {
		err = r.insert(ctx, logRows, robots)
	}
	r.m.batch.Observe(float64(len(batch)))
	if err != nil {
		r.m.failed.Add(float64(len(batch)))
	} else {
		r.m.write.Observe(time.Since(start).Seconds())
	}
	for _, o := range batch {
		o.Done(err)
	}
}

// produce writes the records of a batch's Msgs in one write, then those
// of its Last in another, and takes them out of the batch.
func (r *Recorder) produce(ctx context.Context, batch []Outcome) error {
	var msgs, last []kafka.Message
	for i, o := range batch {
		msgs = append(msgs, o.Msgs...)
		last = append(last, o.Last...)
		batch[i].Msgs, batch[i].Last = nil, nil
	}
	if err := r.prod.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("publish fetch outcomes: %w", err)
	}
	if len(last) == 0 {
		return nil
	}
	if err := r.prod.Write(ctx, last...); err != nil {
		return fmt.Errorf("publish fetch outcomes: %w", err)
	}
	if r.opts.Recycle != nil {
		r.opts.Recycle(last)
	}
	return nil
}

// insert writes the fetch-log rows and the robots.txt rows of a batch.
func (r *Recorder) insert(ctx context.Context, logRows []rows.FetchLogRow, robots []rows.RobotsRow) error {
	if len(robots) == 0 {
		if err := r.flog.Write(ctx, logRows...); err != nil {
			return fmt.Errorf("write fetch log: %w", err)
		}
		return nil
	}
	if r.robots == nil {
		return ErrNoRobotsTxt
	}
	robotsErr := make(chan error, 1)
	go func() { robotsErr <- r.robots.Write(ctx, robots...) }()
	ferr := r.flog.Write(ctx, logRows...)
	rerr := <-robotsErr
	if ferr != nil {
		return fmt.Errorf("write fetch log: %w", ferr)
	}
	if rerr != nil {
		return fmt.Errorf("write robots.txt: %w", rerr)
	}
	return nil
}
