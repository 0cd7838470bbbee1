// Package schedule is the scheduler's revisit consumer: in its own
// consumer group on the fetched topic it folds every fetch outcome of a
// revisiting crawl into the partition's revisit schedule (revisit.Observe:
// the pure policy; ClickHouse tables revisits and change_history through
// Store), keeps a copy in memory while the partition is assigned, and
// produces each due URL as a revisit fetch request with its stored
// validators. A scheduler joins the group only once some crawl revisits
// (WaitRevisiting).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit"
)

// Producer writes records durably (acks=all; *kafkaio.Writer). Safe for
// concurrent use; blocks.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// Store is the durable revisit schedule (sinks.Revisits): rows go through
// batching writers, Load reads a partition's latest states. Safe for
// concurrent use.
type Store interface {
	WriteRevisits(ctx context.Context, rows ...rows.RevisitRow) error
	WriteChanges(ctx context.Context, rows ...rows.ChangeRow) error
	LoadRevisits(ctx context.Context, partition int, fn func(rows.RevisitRow)) error
}

// Config configures the revisit consumer.
type Config struct {
	Topics     kafkaio.Topics
	Partitions int
	// Policy returns a crawl's revisit policy and whether it revisits
	// (CrawlSpec.revisit); crawls without one are not revisited.
	Policy func(crawlID string) (revisit.Policy, bool)
	// State returns a crawl's operator state: only RUNNING crawls are
	// revisited (a PAUSED crawl's due URLs wait, a CANCELLED one's stay).
	State func(crawlID string) crawlv1.CrawlState
	// Tick is how often a partition's due URLs are looked for (default 1s).
	Tick time.Duration
	// MaxPerTick bounds the revisits produced per partition per tick
	// (default 1000); the rest stays due.
	MaxPerTick int
}

// Revisiter consumes fetch outcomes (Fetched, its own group), keeps the
// revisit schedule of every URL of a revisiting crawl per partition
// (ClickHouse table revisits, and a copy in memory while the partition is
// assigned) and produces the due revisits. Its Assign is the group's
// AssignFunc. Safe for concurrent use.
type Revisiter struct {
	cfg      Config
	producer Producer
	store    Store
	now      func() time.Time
	log      *zap.Logger
	m        *revisitMetrics
}

type revisitMetrics struct {
	observed  prometheus.Counter
	changed   prometheus.Counter
	scheduled prometheus.Counter
	tracked   prometheus.Gauge
	refolded  prometheus.Counter
}

// New returns a revisit consumer.
func New(cfg Config, p Producer, st Store, now func() time.Time, log *zap.Logger, reg prometheus.Registerer) (*Revisiter, error) {
	if cfg.Topics.Fetch == "" || cfg.Partitions < 1 || cfg.Policy == nil {
		return nil, errors.New("new revisiter: fetch topic, partitions and policy required")
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.MaxPerTick <= 0 {
		cfg.MaxPerTick = 1000
	}
	if cfg.State == nil {
		cfg.State = func(string) crawlv1.CrawlState { return crawlv1.CrawlState_CRAWL_STATE_RUNNING }
	}
	m := &revisitMetrics{
		observed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revisit_visits_total", Help: "Fetch outcomes of revisiting crawls folded into the revisit schedule.",
		}),
		changed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revisit_changes_total", Help: "Visits whose content fingerprint differed from the previous visit's.",
		}),
		scheduled: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revisits_scheduled_total", Help: "Revisit fetch requests produced.",
		}),
		tracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "revisit_urls", Help: "URLs in the revisit schedules held in memory, all partitions.",
		}),
		refolded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "revisit_stale_outcomes_total", Help: "Fetch outcomes not folded into the revisit schedule because the URL's state already learnt from that fetch or a later one (redelivered batches).",
		}),
	}
	for _, c := range []prometheus.Collector{m.observed, m.changed, m.scheduled, m.tracked, m.refolded} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("new revisiter: register metrics: %w", err)
		}
	}
	return &Revisiter{cfg: cfg, producer: p, store: st, now: now, log: log, m: m}, nil
}

// Assign loads the partition's schedule (retrying until it succeeds or ctx
// ends) and starts its pump. It is a kafkaio.AssignFunc.
func (r *Revisiter) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	log := r.log.With(telemetry.Topic(topic), telemetry.Partition(partition))
	retry := backoff.New(200*time.Millisecond, 5*time.Second)
	for {
		sched := make(map[uint64]*rows.RevisitRow)
		err := r.store.LoadRevisits(ctx, partition, func(row rows.RevisitRow) {
			sched[row.URLFP] = &row
		})
		if err == nil {
			log.Info("loaded revisit schedule", zap.Int("urls", len(sched)))
			r.m.tracked.Add(float64(len(sched)))
			h := &revisitHandler{r: r, partition: partition, sched: sched, log: log}
			pctx, cancel := context.WithCancel(context.Background())
			h.cancel = cancel
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				h.pump(pctx)
			}()
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load revisit schedule: %w", ctx.Err())
		}
		log.Warn("load revisit schedule failed, retrying", zap.Error(err), zap.Duration("retry_in", retry.Next()))
		if retry.Wait(ctx) != nil {
			return nil, fmt.Errorf("load revisit schedule: %w", ctx.Err())
		}
	}
}

// revisitHandler owns one partition's schedule. Handle runs on the group's
// goroutine, the pump on its own; mu guards sched.
type revisitHandler struct {
	r         *Revisiter
	partition int
	log       *zap.Logger
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	mu    sync.Mutex
	sched map[uint64]*rows.RevisitRow // by url_fp (fingerprints are per crawl)
}

// Handle folds the batch's fetch outcomes into the schedule, persists the
// new states and their history, then acks.
func (h *revisitHandler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	r := h.r
	now := r.now()
	var (
		states  []rows.RevisitRow
		changes []rows.ChangeRow
	)
	next := make(map[uint64]rows.RevisitRow)
	h.mu.Lock()
	for _, msg := range batch {
		var page crawlv1.FetchedPage
		if err := kafkaio.Decode(msg, &page); err != nil {
			h.log.Warn("undecodable fetched page skipped", telemetry.Offset(msg.Offset), zap.Error(err))
			continue
		}
		pol, ok := r.cfg.Policy(page.GetCrawlId())
		if !ok || !revisit.Counts(&page) {
			continue
		}
		var prev *rows.RevisitRow
		if p, ok := next[page.GetUrlFp()]; ok {
			prev = &p
		} else if p := h.sched[page.GetUrlFp()]; p != nil {
			prev = p
		}
		if revisit.Folded(prev, &page, now) {
			r.m.refolded.Inc()
			continue
		}
		row, ch := revisit.Observe(pol, prev, &page, h.partition, string(msg.Key), now)
		if prev != nil {
			row.UpdatedAt = nextVersion(prev.UpdatedAt, now)
		}
		next[row.URLFP] = row
		states = append(states, row)
		changes = append(changes, ch)
	}
	// The schedule takes the new states now, under the same lock: the
	// pump must never lease a URL's older state after this one. A failed
	// write below fails the partition, whose next owner reloads the
	// schedule from ClickHouse.
	for fp, row := range next {
		if h.sched[fp] == nil {
			r.m.tracked.Inc()
		}
		row := row
		h.sched[fp] = &row
	}
	h.mu.Unlock()
	if len(states) > 0 {
		var g errgroup.Group
		g.Go(func() error {
			if err := r.store.WriteRevisits(ctx, states...); err != nil {
				return fmt.Errorf("persist revisit schedule: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			if err := r.store.WriteChanges(ctx, changes...); err != nil {
				return fmt.Errorf("persist change history: %w", err)
			}
			return nil
		})
		if err := g.Wait(); err != nil {
			return err
		}
		for _, ch := range changes {
			r.m.observed.Inc()
			if ch.Changed == 1 {
				r.m.changed.Inc()
			}
		}
	}
	for _, msg := range batch {
		ack(msg)
	}
	return nil
}

// pump produces the partition's due revisits every tick until ctx ends.
func (h *revisitHandler) pump(ctx context.Context) {
	t := time.NewTicker(h.r.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.releaseDue(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn("produce revisits failed, retrying next tick", zap.Error(err))
		}
	}
}

// releaseDue produces a fetch request, with the stored validators, for
// every due URL of a running revisiting crawl, then leases it: its
// next_visit moves one interval ahead (persisted), so it is not sent again
// before the fetch outcome reschedules it. A lost fetch is retried when the
// lease runs out; a crash between produce and lease sends it twice.
func (h *revisitHandler) releaseDue(ctx context.Context) error {
	r := h.r
	now := r.now()
	var (
		msgs   []kafka.Message
		leased []rows.RevisitRow
	)
	h.mu.Lock()
	for _, row := range h.sched {
		if len(msgs) >= r.cfg.MaxPerTick {
			break
		}
		if row.NextVisit.After(now) {
			continue
		}
		if _, ok := r.cfg.Policy(row.CrawlID); !ok || r.cfg.State(row.CrawlID) != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
			continue
		}
		fr := &crawlv1.FetchRequest{
			CrawlId:      row.CrawlID,
			Url:          row.URL,
			UrlFp:        row.URLFP,
			Depth:        uint32(row.Depth),
			ScheduledAt:  timestamppb.New(now),
			Etag:         row.ETag,
			LastModified: row.LastModified,
			Revisit:      true,
		}
		m, err := kafkaio.NewMessage(r.cfg.Topics.Fetch, []byte(row.Host), fr)
		if err != nil {
			h.mu.Unlock()
			return fmt.Errorf("encode revisit: %w", err)
		}
		msgs = append(msgs, m)
		l := *row
		l.NextVisit = now.Add(time.Duration(max(row.IntervalS, 1)) * time.Second)
		l.UpdatedAt = nextVersion(row.UpdatedAt, now)
		// The lease's version is taken now: an outcome folded while the
		// lease is produced gets a later one (Handle), so that the lease,
		// whenever it is inserted, never replaces it.
		row.UpdatedAt = l.UpdatedAt
		leased = append(leased, l)
	}
	h.mu.Unlock()
	if len(msgs) == 0 {
		return nil
	}
	// Not cut short by a revoke: revisits sent by a write that returned
	// the revoke's error would be leased again by the next owner.
	if err := kafkaio.WriteGraced(ctx, r.producer, msgs...); err != nil {
		return fmt.Errorf("produce revisits: %w", err)
	}
	h.mu.Lock()
	current := leased[:0]
	for _, l := range leased {
		// Unless an outcome rescheduled it meanwhile: its state is the
		// newer one, the lease is not persisted.
		if cur := h.sched[l.URLFP]; cur != nil && cur.Visits == l.Visits {
			cur.NextVisit = l.NextVisit
			current = append(current, l)
		}
	}
	h.mu.Unlock()
	r.m.scheduled.Add(float64(len(msgs)))
	if err := r.store.WriteRevisits(ctx, current...); err != nil {
		return fmt.Errorf("persist revisit leases: %w", err)
	}
	return nil
}

// nextVersion returns the version (updated_at, whole seconds in
// ClickHouse) of a URL's next revisits row: now, or the second after
// prev's when now is not later, so that each row the schedule writes for a
// URL replaces the ones it wrote before in ReplacingMergeTree whatever the
// order in which the rows are inserted (a lease produced while an outcome
// is folded is inserted after it). A URL gets at most an outcome and a
// lease per interval (at least 1s), so the version runs at most a few
// seconds ahead of the clock.
func nextVersion(prev, now time.Time) time.Time {
	if after := prev.Truncate(time.Second).Add(time.Second); now.Before(after) {
		return after
	}
	return now
}

// Close stops the pump and forgets the schedule (the next owner reloads
// it).
func (h *revisitHandler) Close(context.Context) error {
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	h.r.m.tracked.Sub(float64(len(h.sched)))
	h.sched = nil
	h.mu.Unlock()
	return nil
}

// Crawls is the table of followed crawl specifications
// (*crawlcontrol.Specs).
type Crawls interface {
	All() []*crawlv1.CrawlSpec
	Changed() <-chan struct{}
}

// WaitRevisiting returns once a crawl of crawls has a revisit policy (at
// once if one has), or ctx's error. The revisit group consumes every
// fetched page, bodies included, only to pick out the visits of revisiting
// crawls, and loads and scans every partition's schedule: a scheduler joins
// it only once there is something to revisit, and stays. Pages fetched
// before are not missed: the group starts from its committed offsets.
func WaitRevisiting(ctx context.Context, crawls Crawls) error {
	for {
		changed := crawls.Changed() // before the check: no change slips between
		for _, spec := range crawls.All() {
			if _, ok := revisit.FromSpec(spec.GetRevisit()); ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}
