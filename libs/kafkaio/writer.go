package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/segmentio/kafka-go/compress/snappy"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Writer produces records to any topic (the record's Topic field). Records
// are batched across concurrent callers, compressed with Config.Compression, partitioned with
// murmur2 on their key, and acknowledged by all in-sync replicas
// (RequireAll). Safe for concurrent use.
type Writer struct {
	cfg     Config // for recreating the crawler's topics a broker lost
	w       *kafka.Writer
	tr      *kafka.Transport
	sec     security
	log     *zap.Logger
	metrics *writerMetrics
	// err, when not nil, is why the writer could not be built (a TLS or
	// SASL file Config.Validate had read went missing since): every Write
	// returns it.
	err error
	// waitingSince is when the brokers stopped taking records (Unix
	// nanoseconds; 0 while they take them): Write waits for them, logging
	// once when that starts and once when it ends.
	waitingSince atomic.Int64
}

// Waiting reports whether the writer waits for brokers that do not take
// its records (their outage), for readiness and the dependency gauge.
func (w *Writer) Waiting() bool { return w.waitingSince.Load() != 0 }

// lostTopicWait is how long a topic may be unknown to the brokers before
// the writer takes it for lost and creates the crawler's topics again:
// longer than a new topic takes to reach every broker's metadata.
const lostTopicWait = 5 * time.Second

// waitedFor returns how long the writer has been waiting for the brokers
// (0 when it is not).
func (w *Writer) waitedFor() time.Duration {
	if since := w.waitingSince.Load(); since != 0 {
		return time.Since(time.Unix(0, since))
	}
	return 0
}

// Check is a readiness check (telemetry.Check): an error while the
// writer waits for brokers that do not take its records.
func (w *Writer) Check(context.Context) error {
	if d := w.waitedFor(); d > 0 {
		return fmt.Errorf("kafka brokers %s unavailable for %s: records wait to be produced", strings.Join(w.cfg.Brokers, ","), d.Round(time.Second))
	}
	return nil
}

// down records a retryable failure: the first of an outage is logged.
func (w *Writer) down(records int, err error) {
	if w.waitingSince.CompareAndSwap(0, time.Now().UnixNano()) {
		w.log.Warn("kafka unavailable, waiting for it; nothing is acknowledged meanwhile", zap.Strings("brokers", w.cfg.Brokers),
			zap.Int("records", records), zap.Error(err))
		return
	}
	w.log.Debug("kafka write failed, retrying", zap.Int("records", records), zap.Error(err))
}

// up records a write the brokers took: the end of an outage is logged.
func (w *Writer) up() {
	if since := w.waitingSince.Swap(0); since != 0 {
		w.log.Info("kafka available again", zap.Strings("brokers", w.cfg.Brokers),
			zap.Duration("unavailable_for", time.Since(time.Unix(0, since)).Round(time.Millisecond)))
	}
}

type writerMetrics struct {
	produced *prometheus.CounterVec
	errors   *prometheus.CounterVec
	requests *prometheus.CounterVec
}

func newWriterMetrics(reg prometheus.Registerer) *writerMetrics {
	return &writerMetrics{
		produced: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_produced_total",
			Help: "Records acknowledged by all in-sync replicas, by topic.",
		}, []string{"topic"})),
		requests: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_produce_requests_total",
			Help: "Record batches of one partition sent in a produce request and acknowledged, by topic: kafka_produced_total over this is how full they are (WithBatchSize).",
		}, []string{"topic"})),
		errors: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_produce_errors_total",
			Help: "Records whose produce attempt failed (retried or returned), by topic.",
		}, []string{"topic"})),
	}
}

// Writer tuning. BatchTimeout is short because Write is synchronous: a
// caller waits for the batch to fill or time out. BatchSize caps the
// records of one partition's batch, and kafka-go allocates that many
// Message slots (152 bytes each) for every batch it starts: at 500 that
// was 31% of the fetcher's and 42% of the scheduler's allocated bytes in
// the crawl benchmark, for batches that mostly hold a few records (a
// write is spread over the partitions). 64 records is still more than a
// partition receives from one write of the fetcher or the scheduler.
const (
	writerBatchTimeout = 5 * time.Millisecond
	writerBatchSize    = 64
)

// LargeWriteBatch is the batch size for a writer whose writes put
// hundreds of records on each partition (WithBatchSize): the parser's,
// whose batch of 200 pages publishes thousands of links. kafka-go sends a
// partition's batches one after another, each a produce round trip that
// waits for every in-sync replica, so with batches of 64 such a write
// was a dozen round trips in a row per partition, which the parser's
// partition waited on (crawler_parser_batch_step_duration_seconds
// {step="publish"}: 0.32 s a batch, more than its parse, in a 1.5 M-page
// crawl of six huge sites). Its 512 message slots (78 KB) are allocated
// for each batch, which those writes fill.
const LargeWriteBatch = 512

// WriterOption tunes a Writer beyond its Config.
type WriterOption func(*kafka.Writer)

// WithBatchSize caps the records of one partition's produce request at n
// (default 64; see LargeWriteBatch).
func WithBatchSize(n int) WriterOption {
	return func(w *kafka.Writer) {
		if n > 0 {
			w.BatchSize = n
		}
	}
}

// NewWriter returns a writer. reg receives the writer's metrics
// (kafka_produced_total{topic}, kafka_produce_errors_total{topic}); nil
// leaves them unexported. Its connections are secured per c.TLS and
// c.SASL; a TLS or SASL file that cannot be read (Config.Validate reports
// it first) makes every Write fail with the reason. opts tune it
// (WithBatchSize).
func NewWriter(c Config, log *zap.Logger, reg prometheus.Registerer, opts ...WriterOption) *Writer {
	fastSnappy()
	sec, err := c.loadSecurity()
	tr := sec.transport()
	w := &Writer{
		cfg: c,
		err: err,
		sec: sec,
		tr:  tr,
		w: &kafka.Writer{
			Transport:              tr,
			Addr:                   kafka.TCP(c.Brokers...),
			Balancer:               &kafka.Murmur2Balancer{Consistent: true},
			RequiredAcks:           kafka.RequireAll,
			BatchTimeout:           writerBatchTimeout,
			BatchSize:              writerBatchSize,
			BatchBytes:             int64(c.MaxMessageBytes),
			Compression:            compression(c.Compression),
			AllowAutoTopicCreation: false,
			Async:                  false,
		},
		log:     log,
		metrics: newWriterMetrics(reg),
	}
	w.w.Completion = func(msgs []kafka.Message, err error) {
		if err == nil && len(msgs) > 0 {
			w.metrics.requests.WithLabelValues(msgs[0].Topic).Inc()
		}
	}
	for _, o := range opts {
		o(w.w)
	}
	if reg != nil {
		// A service's first writer reports for it (one gauge a
		// registry): its records are the service's own.
		_ = reg.Register(telemetry.DependencyGauge("kafka", w.Waiting))
	}
	return w
}

// fastSnappy makes kafka-go's snappy codec encode with the fast encoder
// (s2.EncodeSnappy) instead of its default, the "better" one: on the bench
// web that encoder was 13% of the fetcher's CPU (every fetched page is
// compressed into its record), and the fast one compresses HTML 1.75 times
// faster (700 against 395 MB/s on the websim pages) for records 12% larger
// (ratio 3.3 against 3.7). Both write standard snappy; decoding is
// unchanged.
//
// kafka-go takes the codec of a compression from a process-wide table and
// has no per-writer setting, so this sets the global codec's level, once,
// before the first writer of the process is built: every snappy batch is
// encoded by a writer built after it, so no encode races the write.
var fastSnappy = sync.OnceFunc(func() {
	compress.SnappyCodec.Compression = snappy.FasterCompression
})

// compression maps a validated Config.Compression to kafka-go's codec
// ("" is the default).
func compression(name string) kafka.Compression {
	switch name {
	case "none":
		return 0
	case "lz4":
		return kafka.Lz4
	case "zstd":
		return kafka.Zstd
	case "gzip":
		return kafka.Gzip
	default:
		return kafka.Snappy
	}
}

// Write blocks until every record is acknowledged, or returns an error.
// Transient broker errors (see isRetryable) are retried with back-off until
// ctx is done; only the records that failed are sent again, so a retry may
// duplicate nothing that was acknowledged. A permanent error (record too
// large, unknown error) is returned at once, wrapping kafka.WriteErrors when
// the broker reported per-record errors.
func (w *Writer) Write(ctx context.Context, msgs ...kafka.Message) error {
	if w.err != nil {
		w.countErrors(msgs)
		return fmt.Errorf("write %d records: %w", len(msgs), w.err)
	}
	pending := msgs
	recreated := false
	wait := backoff.New(50*time.Millisecond, 2*time.Second)
	for {
		err := w.sec.classify(w.w.WriteMessages(ctx, pending...))
		if err == nil {
			w.up()
			w.countProduced(pending)
			return nil
		}
		if ctx.Err() != nil {
			w.countErrors(pending)
			return fmt.Errorf("write %d records: %w", len(pending), ctx.Err())
		}
		var werrs kafka.WriteErrors
		var retry []kafka.Message
		var permanent error
		if errors.As(err, &werrs) && len(werrs) == len(pending) {
			var ok []kafka.Message
			for i, e := range werrs {
				switch {
				case e == nil:
					ok = append(ok, pending[i])
				case isRetryable(e):
					retry = append(retry, pending[i])
				default:
					permanent = err
				}
			}
			w.countProduced(ok)
		} else if isRetryable(err) {
			retry = pending
		} else {
			permanent = err
		}
		if permanent != nil {
			w.countErrors(pending)
			return fmt.Errorf("write %d records: %w", len(pending), permanent)
		}
		w.countErrors(retry)
		w.down(len(retry), err)
		if !recreated && errors.Is(err, kafka.UnknownTopicOrPartition) && w.waitedFor() >= lostTopicWait {
			// A broker that came back without its data (a lost
			// volume) has none of the crawler's topics: they are
			// created again, once per Write; what it held is gone.
			recreated = true
			if cerr := EnsureTopics(ctx, w.cfg); cerr == nil {
				w.log.Warn("kafka topics missing on the broker for a while, created them again; records the broker held before are lost",
					zap.Error(err))
			}
		}
		pending = retry
		if werr := wait.Wait(ctx); werr != nil {
			return fmt.Errorf("write %d records: %w", len(pending), errors.Join(werr, err))
		}
	}
}

func (w *Writer) countProduced(msgs []kafka.Message) {
	for _, m := range msgs {
		w.metrics.produced.WithLabelValues(m.Topic).Inc()
	}
}

func (w *Writer) countErrors(msgs []kafka.Message) {
	for _, m := range msgs {
		w.metrics.errors.WithLabelValues(m.Topic).Inc()
	}
}

// Close flushes and closes the writer.
func (w *Writer) Close() error {
	err := w.w.Close()
	w.tr.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("close kafka writer: %w", err)
	}
	return nil
}

// IsRetryable reports whether a Kafka error is transient: retrying the same
// request later can succeed.
func IsRetryable(err error) bool { return isRetryable(err) }

func isRetryable(err error) bool {
	if err == nil {
		return false
	}
	var kerr kafka.Error
	var nerr net.Error
	var tooLarge kafka.MessageTooLargeError
	switch {
	case errors.Is(err, context.Canceled):
		// The caller gave up; retrying would outlive its context.
		return false
	case errors.Is(err, context.DeadlineExceeded):
		// A dial or I/O timeout says DeadlineExceeded too: a broker that
		// does not answer (a network fault, a host cut off) rather than
		// one that refuses. That is weather, retried; the caller's own
		// deadline is the caller's to check (ctx.Err()), and comes
		// without a *net.OpError.
		var oerr *net.OpError
		return errors.As(err, &oerr) && oerr.Timeout()
	case IsAuthError(err):
		// Wrong credentials or certificates stay wrong: no retry storm
		// against the brokers, a clear error at once.
		return false
	case errors.As(err, &tooLarge):
		// The record will never fit.
		return false
	case errors.As(err, &kerr):
		// Broker error codes: kafka-go classifies leader elections,
		// timeouts, not-enough-replicas, coordinator moves, a broker's
		// storage error as temporary. UNKNOWN_SERVER_ERROR is a broker's
		// answer to a write it could not make for a reason of its own:
		// the embedded broker's (kfake) when its disk is full. Nothing
		// was acknowledged; the write is waited out like a broker that
		// is down, rather than failing the service, whose restart on the
		// same broker would fail the same way.
		return kerr.Temporary() || kerr == kafka.Unknown
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		// The broker connection dropped or the broker is restarting.
		return true
	case errors.As(err, &nerr):
		// Other network failures (dial errors, I/O timeouts).
		return true
	default:
		return false
	}
}
