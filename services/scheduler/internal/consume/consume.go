// Package consume is the scheduler's Kafka adapter: it owns, for every
// assigned partition of the Discovered topic, that partition's seen set,
// runs the admission policy over each batch, produces the fetch requests and
// persists the new fingerprints before acknowledging.
//
// Delivery order per batch: decide every record → produce every
// FetchRequest (and every re-keyed DiscoveredURL) with acks=all → insert the
// new fingerprints into url_seen → add them to the in-memory seen set → ack.
// A crash after producing and before the insert redelivers the batch to the
// next owner, which fetches those URLs a second time (bounded by the
// partition's in-flight window); no order of failures loses a URL.
package consume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/dedup"
	"go.uber.org/zap"
)

// Producer writes records durably (acks=all); *kafkaio.Writer. Write blocks
// until every record is acknowledged or returns an error. Safe for
// concurrent use.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// SeenWriter inserts url_seen rows; *chstore.BatchWriter[chstore.SeenRow].
// Write blocks until the rows are inserted or returns an error. Safe for
// concurrent use.
type SeenWriter interface {
	Write(ctx context.Context, rows ...chstore.SeenRow) error
}

// SeenLoader streams a partition's stored fingerprints; *chstore.Store.
// Safe for concurrent use.
type SeenLoader interface {
	LoadSeen(ctx context.Context, partition int, fn func(crawlID string, fp uint64)) error
}

// Config is the scheduler's consuming configuration.
type Config struct {
	Topics     kafkaio.Topics
	Partitions int    // partition count of every URL topic
	MaxDepth   uint32 // deepest link depth admitted (seeds are 0)
	// LoadRetry is the first delay before retrying a failed seen-set load,
	// doubled up to 5s (default 200ms). A partition whose set cannot be
	// loaded stalls; it is never served without its set.
	LoadRetry time.Duration
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	var errs []error
	if c.Topics.Discovered == "" || c.Topics.Fetch == "" {
		errs = append(errs, errors.New("topics: discovered and fetch must be named"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d must be positive", c.Partitions))
	}
	if c.LoadRetry < 0 {
		errs = append(errs, fmt.Errorf("load retry: %v must not be negative", c.LoadRetry))
	}
	return errors.Join(errs...)
}

// Scheduler creates the handler of every assigned Discovered partition. Its
// Assign method is the kafkaio.AssignFunc of the scheduler's group. Safe for
// concurrent use.
type Scheduler struct {
	cfg      Config
	producer Producer
	seenW    SeenWriter
	loader   SeenLoader
	budget   *budget.Tracker
	policy   admit.Policy
	now      func() time.Time
	log      *zap.Logger
	metrics  *metrics
}

// New returns a scheduler. b is shared by every partition (per-crawl page
// budget); now is the clock stamped on fetch requests and seen rows.
func New(cfg Config, p Producer, w SeenWriter, l SeenLoader, b *budget.Tracker, now func() time.Time, log *zap.Logger, reg prometheus.Registerer) (*Scheduler, error) {
	if cfg.LoadRetry == 0 {
		cfg.LoadRetry = 200 * time.Millisecond
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new scheduler: %w", err)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new scheduler: %w", err)
	}
	s := &Scheduler{cfg: cfg, producer: p, seenW: w, loader: l, budget: b, now: now, log: log, metrics: m}
	s.policy = admit.Policy{MaxDepth: cfg.MaxDepth, Partition: s.partitionOf, Now: now}
	return s, nil
}

// partitionOf is the pipeline's one partition function applied to a
// canonical URL.
func (s *Scheduler) partitionOf(canonical string) ([]byte, int, error) {
	key, err := kafkaio.Key(canonical)
	if err != nil {
		return nil, 0, fmt.Errorf("key url: %w", err)
	}
	return key, kafkaio.PartitionFor(key, s.cfg.Partitions), nil
}

// Assign loads the partition's seen set from ClickHouse, retrying until it
// succeeds or ctx is done, and returns the partition's handler. It is a
// kafkaio.AssignFunc.
func (s *Scheduler) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	log := s.log.With(telemetry.Topic(topic), telemetry.Partition(partition))
	delay := s.cfg.LoadRetry
	for {
		start := time.Now()
		set := dedup.New(0)
		counts := make(map[string]int64)
		err := s.loader.LoadSeen(ctx, partition, func(crawlID string, fp uint64) {
			if set.Add(fp) { // a row not yet merged by ClickHouse may repeat
				counts[crawlID]++
			}
		})
		if err == nil {
			took := time.Since(start)
			s.metrics.seenLoad.Observe(took.Seconds())
			s.metrics.seenSize.Add(float64(set.Len()))
			s.budget.Hold(partition, counts)
			log.Info("loaded seen set", zap.Int("urls", set.Len()), zap.Int("crawls", len(counts)),
				zap.Int("bytes", set.Bytes()), zap.Duration("took", took))
			return &handler{s: s, partition: partition, seen: set, batch: dedup.New(0), log: log}, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load seen set: %w", ctx.Err())
		}
		log.Warn("load seen set failed, retrying", zap.Error(err), zap.Duration("retry_in", delay))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("load seen set: %w", ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// handler serves one assigned partition; called from one goroutine at a
// time (kafkaio.Handler).
type handler struct {
	s         *Scheduler
	partition int
	seen      *dedup.Set // persisted fingerprints of the partition
	batch     *dedup.Set // fingerprints admitted in the current batch
	log       *zap.Logger
}

// seenView is the partition's seen set plus the batch admitted so far.
type seenView struct{ seen, batch *dedup.Set }

func (v seenView) Contains(fp uint64) bool { return v.seen.Contains(fp) || v.batch.Contains(fp) }

// Handle decides every record, produces, persists, then acks the batch. An
// error leaves the whole batch unacked (redelivered to the next owner).
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	s := h.s
	start := time.Now()
	h.batch.Reset()
	view := seenView{seen: h.seen, batch: h.batch}
	var (
		out      []kafka.Message // fetch requests and re-keyed discoveries
		rows     []chstore.SeenRow
		reserved = make(map[string]int64)
		dropped  = make(map[admit.Reason]int)
	)
	now := s.now()
	for _, msg := range batch {
		var u crawlv1.DiscoveredURL
		if err := kafkaio.Decode(msg, &u); err != nil {
			dropped[Malformed]++
			h.log.Warn("undecodable record skipped", telemetry.Offset(msg.Offset), zap.Error(err))
			continue
		}
		d := s.policy.Decide(&u, h.partition, view, s.budget)
		switch {
		case d.Admit:
			h.batch.Add(d.FP)
			reserved[u.GetCrawlId()]++
			m, err := kafkaio.NewMessage(s.cfg.Topics.Fetch, d.Key, d.Fetch)
			if err != nil {
				h.unreserve(reserved)
				return fmt.Errorf("encode fetch request: %w", err)
			}
			out = append(out, m)
			rows = append(rows, chstore.SeenRow{
				CrawlID:   u.GetCrawlId(),
				Partition: uint16(h.partition),
				FP:        d.FP,
				URL:       d.Canonical,
				Depth:     uint16(min(u.GetDepth(), 65535)),
				FirstSeen: now,
			})
		case d.Reason == admit.WrongPartition:
			// Hand the record to the partition that owns its host, so
			// that only one seen set ever holds the URL.
			m, err := kafkaio.NewMessage(s.cfg.Topics.Discovered, d.Key, &u)
			if err != nil {
				h.unreserve(reserved)
				return fmt.Errorf("encode discovered url: %w", err)
			}
			out = append(out, m)
			dropped[d.Reason]++
			h.log.Debug("discovered url re-keyed to its partition", telemetry.URL(d.Canonical),
				telemetry.Offset(msg.Offset), zap.Int("owner", d.Partition))
		default:
			dropped[d.Reason]++
		}
	}
	if len(out) > 0 {
		if err := s.producer.Write(ctx, out...); err != nil {
			h.unreserve(reserved)
			return fmt.Errorf("produce fetch requests: %w", err)
		}
	}
	if len(rows) > 0 {
		// The requests are out: from here on a failure redelivers the
		// batch and its URLs are fetched twice, never lost.
		if err := s.seenW.Write(ctx, rows...); err != nil {
			return fmt.Errorf("persist seen urls: %w", err)
		}
		for _, r := range rows {
			h.seen.Add(r.FP)
		}
	}
	for _, msg := range batch {
		ack(msg)
	}
	s.metrics.received.Add(float64(len(batch)))
	s.metrics.admitted.Add(float64(len(rows)))
	for r, n := range dropped {
		s.metrics.dropped.WithLabelValues(string(r)).Add(float64(n))
	}
	s.metrics.seenSize.Add(float64(len(rows)))
	s.metrics.batchTime.Observe(time.Since(start).Seconds())
	return nil
}

// unreserve gives back the budget of a batch that produced nothing.
func (h *handler) unreserve(reserved map[string]int64) {
	for id, n := range reserved {
		h.s.budget.Unreserve(h.partition, id, n)
	}
}

// Close drops the partition's seen set and its share of the budget; the
// next owner reloads it from ClickHouse.
func (h *handler) Close(context.Context) error {
	h.s.metrics.seenSize.Sub(float64(h.seen.Len()))
	h.s.budget.Release(h.partition)
	h.log.Info("released seen set", zap.Int("urls", h.seen.Len()))
	h.seen, h.batch = nil, nil
	return nil
}

// CountSeen returns the budget's global count: distinct fingerprints per
// crawl in url_seen over every partition.
func CountSeen(store *chstore.Store) budget.CountFunc {
	return func(ctx context.Context, crawlIDs []string) (map[string]int64, error) {
		if len(crawlIDs) == 0 {
			return map[string]int64{}, nil
		}
		args := make([]any, len(crawlIDs))
		for i, id := range crawlIDs {
			args[i] = id
		}
		q := "SELECT crawl_id, uniqExact(fp) FROM url_seen WHERE crawl_id IN (" +
			strings.TrimSuffix(strings.Repeat("?,", len(crawlIDs)), ",") + ") GROUP BY crawl_id"
		rows, err := store.Conn().Query(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("query url_seen counts: %w", err)
		}
		defer rows.Close()
		counts := make(map[string]int64, len(crawlIDs))
		for rows.Next() {
			var (
				id string
				n  uint64
			)
			if err := rows.Scan(&id, &n); err != nil {
				return nil, fmt.Errorf("scan url_seen count: %w", err)
			}
			counts[id] = int64(n)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read url_seen counts: %w", err)
		}
		return counts, nil
	}
}
