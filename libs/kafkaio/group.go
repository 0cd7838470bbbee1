package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Handler processes the records of one assigned partition. One Handler is
// created per assignment and is called from one goroutine at a time.
type Handler interface {
	// Handle receives a batch of consecutive records of the partition. It
	// may return before the work is done, but must eventually call ack
	// exactly once per record, when everything the record caused is durable
	// (produced with acks=all, inserted into ClickHouse). ack is safe for
	// concurrent use and reads only the record's partition and offset
	// (AckRefs keeps just those). The batch is the handler's while Handle
	// runs and the group reads only its offsets afterwards, so Handle may
	// drop the payloads (DropPayloads) once it has decoded them. A
	// returned error stops the partition without committing past the
	// record; the group run then fails. ctx is cancelled when the
	// partition is revoked or the group stops; Handle must then return
	// promptly (a rebalance waits for it).
	Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error
	// Close is called once when the partition is revoked or the group
	// stops. It must finish or abandon in-flight work before returning;
	// records never acked are redelivered to the next owner. ctx expires
	// after GroupConfig.CloseTimeout; a returned error fails the run.
	Close(ctx context.Context) error
}

// Releaser is a Handler whose records can leave the window before they
// are acked: a record whose work is done and whose outcome only waits to
// be made durable (a batched insert) is released, and no longer counts
// against GroupConfig.MaxInFlight, only against MaxSettling; it still
// holds the commit until it is acked. A fetcher whose acks wait for the
// fetch log's insert keeps reading new requests meanwhile, so its inserts
// can be large without its window idling. The group gives a Releaser its
// release function once, right after AssignFunc, when MaxSettling is set;
// release is safe for concurrent use, reads only the record's partition
// and offset, and ignores a record released or acked before.
type Releaser interface {
	SetRelease(release func(kafka.Message))
}

// AssignFunc creates the handler of a newly assigned partition (for
// example after loading the partition's state). An error fails the run.
type AssignFunc func(ctx context.Context, topic string, partition int) (Handler, error)

// GroupConfig configures one consumer group runner.
type GroupConfig struct {
	GroupID     string
	Topic       string
	MaxBatch    int           // records per Handle call (default 100)
	BatchWait   time.Duration // how long to wait to fill a batch (default 20ms)
	MaxInFlight int           // unacked records per partition before reading pauses (default 1000), released ones (Releaser) apart
	// MaxSettling is how many released records (Releaser) a partition may
	// hold unacked as well before reading pauses. 0 (the default): the
	// handler is not given a release function, and every unacked record
	// counts against MaxInFlight.
	MaxSettling    int
	CommitInterval time.Duration // how often acked offsets are committed (default 500ms)
	// CloseTimeout bounds Handler.Close: its ctx expires after this long
	// (default half of Config.RebalanceTimeout, so the final commit lands
	// before the coordinator gives the partition to another member).
	CloseTimeout time.Duration
	// Balancers are the member's group protocols in priority order
	// (default: a new StickyBalancer, then kafka.RangeGroupBalancer for
	// members that only speak range). A balancer with a
	// SetOwned(generation int32, topic string, partitions []int) method,
	// like StickyBalancer, is told the partitions of every generation. Give
	// every Group its own StickyBalancer: it holds that member's claims.
	Balancers []kafka.GroupBalancer
	// SettleAfterLapse, when positive, holds back the partitions of a
	// generation that starts within this long after the member's lease
	// lapsed (the coordinator silent for nearly a session timeout: a
	// broker outage, a cut link) until the generation has lasted this
	// long: after an outage the members rejoin one by one, and each
	// rejoin ends the generation before. A partition started at once
	// would do again the work its previous owner did during the outage
	// and has not made durable yet (its writes wait for the store to
	// come back), and again when the next rebalance moves it; held back,
	// it starts once the group has settled and the previous owners' late
	// writes have landed. For a handler that acts on the world (the
	// fetcher); 0 (the default) starts partitions at once.
	SettleAfterLapse time.Duration
	// OnFull, when set, is called each time reading a partition pauses
	// because MaxInFlight of its records are unacked, from that
	// partition's goroutine (it must not block). A handler whose acks
	// wait for batched writes flushes them there instead of at their
	// interval: the batches are then as large as the window allows, and
	// the window, not the interval, bounds the partition's rate.
	OnFull func()
	// OnClose, when set, is called once as a partition closes (revoked,
	// or the group stopping) with records still unacked, before
	// Handler.Close, from that partition's goroutine (it must not block).
	// A handler whose acks wait for batched writes flushes them there:
	// otherwise Close waits for their interval, which can outlast
	// CloseTimeout, and the records whose rows were about to land are
	// left unacked, read again by the next owner, which may not see their
	// rows yet (they land after it loaded its state).
	OnClose func()
}

// GroupConfig defaults.
const (
	DefaultMaxBatch       = 100
	DefaultBatchWait      = 20 * time.Millisecond
	DefaultMaxInFlight    = 1000
	DefaultCommitInterval = 500 * time.Millisecond
)

func (gc GroupConfig) withDefaults(c Config) GroupConfig {
	if gc.MaxBatch == 0 {
		gc.MaxBatch = DefaultMaxBatch
	}
	if gc.BatchWait == 0 {
		gc.BatchWait = DefaultBatchWait
	}
	if gc.MaxInFlight == 0 {
		gc.MaxInFlight = DefaultMaxInFlight
	}
	if gc.CommitInterval == 0 {
		gc.CommitInterval = DefaultCommitInterval
	}
	if gc.CloseTimeout == 0 {
		gc.CloseTimeout = c.RebalanceTimeout / 2
	}
	if len(gc.Balancers) == 0 {
		gc.Balancers = []kafka.GroupBalancer{NewStickyBalancer(), kafka.RangeGroupBalancer{}}
	}
	return gc
}

func (gc GroupConfig) validate() error {
	var errs []error
	if gc.GroupID == "" {
		errs = append(errs, errors.New("group id: empty"))
	}
	if gc.Topic == "" {
		errs = append(errs, errors.New("topic: empty"))
	}
	if gc.MaxBatch < 1 {
		errs = append(errs, fmt.Errorf("max batch: %d must be positive", gc.MaxBatch))
	}
	if gc.BatchWait < 0 {
		errs = append(errs, fmt.Errorf("batch wait: %v must not be negative", gc.BatchWait))
	}
	if gc.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("max in flight: %d must be positive", gc.MaxInFlight))
	}
	if gc.MaxSettling < 0 {
		errs = append(errs, fmt.Errorf("max settling: %d must not be negative", gc.MaxSettling))
	}
	if gc.CommitInterval <= 0 {
		errs = append(errs, fmt.Errorf("commit interval: %v must be positive", gc.CommitInterval))
	}
	if gc.CloseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("close timeout: %v must be positive", gc.CloseTimeout))
	}
	if gc.SettleAfterLapse < 0 {
		errs = append(errs, fmt.Errorf("settle after lapse: %v must not be negative", gc.SettleAfterLapse))
	}
	return errors.Join(errs...)
}

// ErrClosed is returned by a Group after Run has returned.
var ErrClosed = errors.New("group closed")

// Group consumes one topic in a consumer group: for every assigned partition
// it reads records from the committed offset, hands them to that partition's
// Handler and commits the lowest unacked offset as acks arrive. Reading a
// partition pauses while MaxInFlight records are unacked (bounded memory).
//
// Run may be called once. Assigned is safe for concurrent use.
type Group struct {
	cfg     Config
	sec     security // TLS and SASL of the group's and its readers' connections
	gc      GroupConfig
	assign  AssignFunc
	log     *zap.Logger
	metrics *groupMetrics

	lease *lease // renewed by the coordinator's answers (LeaseOf)

	mu       sync.Mutex
	started  bool
	assigned map[int]int32 // partition -> generation id
}

type groupMetrics struct {
	consumed     prometheus.Counter
	commits      prometheus.Counter
	commitErrors prometheus.Counter
	inflight     prometheus.Gauge
	lag          prometheus.Gauge
	assigned     prometheus.Gauge
	rebalances   prometheus.Counter
	settles      prometheus.Counter
}

func newGroupMetrics(reg prometheus.Registerer, topic string) *groupMetrics {
	counter := func(name, help string) prometheus.Counter {
		return telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})).WithLabelValues(topic)
	}
	gauge := func(name, help string) prometheus.Gauge {
		return telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"topic"})).WithLabelValues(topic)
	}
	return &groupMetrics{
		consumed:     counter("kafka_consumed_total", "Records handed to handlers, by topic."),
		commits:      counter("kafka_commits_total", "Successful offset commits, by topic."),
		commitErrors: counter("kafka_commit_errors_total", "Failed offset commits (retried at the next interval), by topic."),
		inflight:     gauge("kafka_inflight", "Records handed to handlers and not yet acked, by topic."),
		lag:          gauge("kafka_lag", "Records on this member's partitions it has not read yet (high watermark minus the next offset at its last read), by topic: what autoscaling on consumer lag reads."),
		assigned:     gauge("kafka_assigned_partitions", "Partitions currently assigned to this member, by topic."),
		rebalances:   counter("kafka_rebalances_total", "Consumer group generations joined, by topic."),
		settles:      counter("kafka_settle_holds_total", "Generations whose partitions were held back after the member's group lease lapsed (GroupConfig.SettleAfterLapse), by topic."),
	}
}

// NewGroup returns a runner; reg receives the group's metrics
// (kafka_consumed_total, kafka_commits_total, kafka_commit_errors_total,
// kafka_inflight, kafka_lag, kafka_assigned_partitions, kafka_rebalances_total, all
// labelled by topic; nil leaves them unexported). Zero GroupConfig fields
// take their defaults.
func NewGroup(c Config, gc GroupConfig, assign AssignFunc, log *zap.Logger, reg prometheus.Registerer) (*Group, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("new group: %w", err)
	}
	gc = gc.withDefaults(c)
	if err := gc.validate(); err != nil {
		return nil, fmt.Errorf("new group: %w", err)
	}
	if assign == nil {
		return nil, errors.New("new group: nil assign func")
	}
	sec, err := c.loadSecurity()
	if err != nil {
		return nil, fmt.Errorf("new group: %w", err)
	}
	return &Group{
		cfg:      c,
		sec:      sec,
		gc:       gc,
		assign:   assign,
		log:      log.With(telemetry.Topic(gc.Topic), zap.String("group", gc.GroupID)),
		metrics:  newGroupMetrics(reg, gc.Topic),
		assigned: make(map[int]int32),
		lease:    newLease(c.SessionTimeout, heartbeatInterval(c.SessionTimeout)),
	}, nil
}

// heartbeatInterval keeps several heartbeats inside one session timeout so
// that members learn about a rebalance quickly.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(3*time.Second, max(session/5, 50*time.Millisecond))
}

// Run consumes until ctx is done, then closes every handler, commits what
// was acked and leaves the group. It returns nil after a clean stop, the
// first handler, assign or read error otherwise (after the same clean-up),
// and ErrClosed when called a second time.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.started {
		g.mu.Unlock()
		return ErrClosed
	}
	g.started = true
	g.mu.Unlock()

	kgLog := g.log.WithOptions(zap.AddCallerSkip(1))
	dialer := g.sec.dialer()
	dialer.DialFunc = g.lease.dialer(dialer.DialFunc)
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                g.gc.GroupID,
		Brokers:           g.cfg.Brokers,
		Dialer:            dialer,
		Topics:            []string{g.gc.Topic},
		SessionTimeout:    g.cfg.SessionTimeout,
		RebalanceTimeout:  g.cfg.RebalanceTimeout,
		HeartbeatInterval: heartbeatInterval(g.cfg.SessionTimeout),
		JoinGroupBackoff:  time.Second,
		StartOffset:       kafka.FirstOffset,
		GroupBalancers:    g.gc.Balancers,
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			kgLog.Debug("kafka-go consumer group", zap.String("detail", fmt.Sprintf(format, args...)))
		}),
	})
	if err != nil {
		return fmt.Errorf("run group %s: %w", g.gc.GroupID, err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		failOnce sync.Once
		failErr  error
	)
	fail := func(err error) {
		failOnce.Do(func() { failErr = err })
		cancel()
	}

	var wg sync.WaitGroup // every goroutine this run starts
	for {
		gen, err := cg.Next(runCtx)
		if err != nil {
			if runCtx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			if errors.Is(err, kafka.RebalanceInProgress) {
				// Normal while members join or leave; kafka-go rejoins.
				g.log.Debug("rebalance in progress, rejoining")
				continue
			}
			if err = g.sec.classify(err); errors.Is(err, ErrAuth) {
				// Wrong credentials stay wrong: stop instead of rejoining
				// every second.
				fail(fmt.Errorf("join consumer group: %w", err))
				break
			}
			// kafka-go backs off before the next attempt.
			g.log.Warn("join consumer group failed, retrying", zap.Error(err))
			continue
		}
		g.startGeneration(runCtx, fail, &wg, gen)
	}
	// Close ends the current generation, which waits for the partition
	// goroutines (handlers closed, final commit), then leaves the group.
	_ = cg.Close() // always nil
	wg.Wait()

	g.mu.Lock()
	clear(g.assigned)
	g.mu.Unlock()
	g.metrics.assigned.Set(0)

	if failErr != nil {
		return fmt.Errorf("run group %s: %w", g.gc.GroupID, failErr)
	}
	g.log.Info("consumer group stopped")
	return nil
}

// Assigned reports the partitions currently assigned (for readiness and
// tests), sorted.
func (g *Group) Assigned() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]int, 0, len(g.assigned))
	for p := range g.assigned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// startGeneration starts one goroutine per assigned partition plus the
// generation's committer, all under gen.Start (kafka-go waits for them
// before joining the next generation) and wg (Run waits for them).
func (g *Group) startGeneration(runCtx context.Context, fail func(error), wg *sync.WaitGroup, gen *kafka.Generation) {
	g.metrics.rebalances.Inc()
	g.lease.newGeneration(time.Now())
	assignments := gen.Assignments[g.gc.Topic]
	parts := make([]*partitionRun, len(assignments))
	ids := make([]int, len(assignments))
	for i, pa := range assignments {
		parts[i] = newPartitionRun(pa, g.metrics.inflight, g.metrics.lag)
		ids[i] = pa.ID
	}
	g.mu.Lock()
	clear(g.assigned)
	for _, id := range ids {
		g.assigned[id] = gen.ID
	}
	g.mu.Unlock()
	// The sticky balancer's claim for the next join: the partitions this
	// member works on. A generation held back (settle) claims its
	// partitions only once they start: after an outage the members
	// rejoin one by one, and the first one's passing generation (every
	// partition, none started) would otherwise outrank, as the newer
	// claim, what each member held before the outage, and the group
	// would settle with partitions moved away from the member whose
	// recorder still holds their outage-time work.
	var claim sync.Once
	own := func() {
		claim.Do(func() {
			for _, b := range g.gc.Balancers {
				if o, ok := b.(ownershipRecorder); ok {
					o.SetOwned(gen.ID, g.gc.Topic, ids)
				}
			}
		})
	}
	g.metrics.assigned.Set(float64(len(ids)))
	g.log.Info("partitions assigned", zap.Int32("generation", gen.ID), zap.Ints("partitions", ids))

	settle := g.settle(time.Now())
	if settle > 0 {
		g.metrics.settles.Inc()
		g.log.Info("partitions held back until the group settles after the coordinator's silence",
			zap.Int32("generation", gen.ID), zap.Duration("for", settle))
	} else {
		own()
	}
	var partsWG sync.WaitGroup
	partsWG.Add(len(parts))
	for i, pr := range parts {
		wg.Add(1)
		// The holds of every member end at once: the partitions start
		// spread over a quarter of the settle time, not in one burst
		// of every site of the group at the same instant.
		hold := settle
		if settle > 0 {
			hold += time.Duration(i) * settle / 4 / time.Duration(len(parts))
		}
		gen.Start(func(genCtx context.Context) {
			defer wg.Done()
			defer partsWG.Done()
			defer g.unassign(pr.partition, gen.ID)
			if !waitSettled(runCtx, genCtx, hold) {
				return // the generation or the run ended first: nothing was read
			}
			own()
			g.consumePartition(runCtx, genCtx, fail, pr)
		})
	}
	wg.Add(1)
	gen.Start(func(genCtx context.Context) {
		defer wg.Done()
		g.commitLoop(runCtx, genCtx, gen, parts, &partsWG)
	})
}

// settle returns how long the partitions of a generation starting at
// start are held back (GroupConfig.SettleAfterLapse): the whole settle
// time when the lease lapsed within it before start, otherwise 0.
func (g *Group) settle(start time.Time) time.Duration {
	d := g.gc.SettleAfterLapse
	if d <= 0 {
		return 0
	}
	back := g.lease.lapseEnded()
	if back.IsZero() || start.Sub(back) > d {
		return 0
	}
	return d
}

// waitSettled waits d, and reports false when the run or the generation
// ends first.
func waitSettled(runCtx, genCtx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-runCtx.Done():
		return false
	case <-genCtx.Done():
		return false
	}
}

// ownershipRecorder is a balancer that reports the member's partitions in
// its JoinGroup user data (StickyBalancer).
type ownershipRecorder interface {
	SetOwned(generation int32, topic string, partitions []int)
}

func (g *Group) unassign(partition int, genID int32) {
	g.mu.Lock()
	if g.assigned[partition] == genID {
		delete(g.assigned, partition)
	}
	n := len(g.assigned)
	g.mu.Unlock()
	g.metrics.assigned.Set(float64(n))
}

// commitLoop commits the partitions' committable offsets every
// CommitInterval until the generation or the run ends, then waits for the
// partition goroutines (their handlers are closed by then) and commits once
// more. The generation's coordinator connection stays open until every
// function started on it returned, so the final commit still counts.
func (g *Group) commitLoop(runCtx, genCtx context.Context, gen *kafka.Generation, parts []*partitionRun, partsWG *sync.WaitGroup) {
	t := time.NewTicker(g.gc.CommitInterval)
	defer t.Stop()
loop:
	for {
		select {
		case <-genCtx.Done():
			break loop
		case <-runCtx.Done():
			break loop
		case <-t.C:
			g.commit(gen, parts)
		}
	}
	// The generation ended now (kafka-go joins the next one once every
	// function of this one returned, so before any JoinGroup): whether
	// in a silence is judged now, before the partitions take their time
	// to close.
	g.lease.endGeneration(time.Now())
	partsWG.Wait()
	g.commit(gen, parts)
}

// commit sends one OffsetCommit for every partition whose committable
// offset advanced. A failure is counted and logged; the next interval
// retries (a fenced generation ends soon after, and the partition's next
// owner resumes from the last successful commit).
func (g *Group) commit(gen *kafka.Generation, parts []*partitionRun) {
	offsets := make(map[int]int64)
	for _, pr := range parts {
		if off, ok := pr.toCommit(); ok {
			offsets[pr.partition] = off
		}
	}
	if len(offsets) == 0 {
		return
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{g.gc.Topic: offsets}); err != nil {
		g.metrics.commitErrors.Inc()
		g.log.Warn("commit offsets failed, will retry", zap.Int32("generation", gen.ID), zap.Error(err))
		return
	}
	g.metrics.commits.Inc()
	for _, pr := range parts {
		if off, ok := offsets[pr.partition]; ok {
			pr.committed(off)
		}
	}
}

// consumePartition runs one assigned partition: creates its handler, reads
// until the generation or the run ends, then closes the reader and the
// handler. It reports handler, assign and read errors through fail.
func (g *Group) consumePartition(runCtx, genCtx context.Context, fail func(error), pr *partitionRun) {
	ctx, cancel := context.WithCancel(runCtx)
	defer cancel()
	stop := context.AfterFunc(genCtx, cancel)
	defer stop()

	log := g.log.With(telemetry.Partition(pr.partition))
	h, err := g.assign(context.WithValue(ctx, leaseKey{}, g.lease), g.gc.Topic, pr.partition)
	if err != nil {
		if ctx.Err() == nil {
			fail(fmt.Errorf("assign partition %d: %w", pr.partition, err))
		}
		return
	}
	if r, ok := h.(Releaser); ok && g.gc.MaxSettling > 0 {
		r.SetRelease(pr.release)
	}
	log.Debug("partition started", telemetry.Offset(pr.start))

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   g.cfg.Brokers,
		Dialer:    g.sec.dialer(),
		Topic:     g.gc.Topic,
		Partition: pr.partition,
		MinBytes:  g.cfg.fetchMinBytes(),
		MaxBytes:  g.cfg.fetchMaxBytes(),
		MaxWait:   fetchMaxWait,
		// Records read ahead per partition: a few, not kafka-go's 100 (32
		// partitions of 100 fetched pages were 74 MB of the parser's
		// heap). The reader streams a fetch response into this queue as
		// the batch loop drains it, so a short queue costs no round trip.
		QueueCapacity: min(g.gc.MaxBatch, readAhead),
		// Report an out-of-range start (retention deleted the committed
		// offset, or the topic was recreated) instead of stalling; the
		// read loop resets to the first offset.
		OffsetOutOfRangeError: true,
	})
	var readErr error
	if err := reader.SetOffset(pr.start); err != nil {
		readErr = fmt.Errorf("seek partition %d to %d: %w", pr.partition, pr.start, err)
	} else {
		readErr = g.readLoop(ctx, reader, h, pr)
	}
	if err := reader.Close(); err != nil {
		log.Warn("close partition reader failed, ignored", zap.Error(err))
	}

	if g.gc.OnClose != nil && pr.unacked() > 0 {
		g.gc.OnClose()
	}
	closeCtx, closeCancel := context.WithTimeout(context.WithoutCancel(runCtx), g.gc.CloseTimeout)
	closeErr := h.Close(closeCtx)
	closeCancel()
	pr.close()

	switch {
	case readErr != nil:
		fail(readErr)
	case closeErr != nil:
		fail(fmt.Errorf("close handler of partition %d: %w", pr.partition, closeErr))
	}
	log.Debug("partition stopped")
}

// readLoop reads batches and hands them to h until ctx is done (nil) or
// reading or handling fails (the error).
// readAhead is how many records a partition's reader decodes ahead of
// the batch loop.
const readAhead = 8

func (g *Group) readLoop(ctx context.Context, reader *kafka.Reader, h Handler, pr *partitionRun) error {
	// A batch is read into scratch and handed over as a copy of just its
	// records: most of a busy fetcher's batches are a record or two, read
	// as acks make room, and a slice of 64 records for each of them was a
	// fifth of the fetcher's allocated bytes.
	scratch := make([]kafka.Message, 0, min(g.gc.MaxBatch, 64))
	for {
		if err := pr.waitCapacity(ctx, g.gc.MaxInFlight, g.gc.MaxSettling, g.gc.OnFull); err != nil {
			return nil
		}
		// The first record of a batch may wait indefinitely.
		msg, err := reader.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, kafka.OffsetOutOfRange) && pr.fresh() {
				// Like auto.offset.reset=earliest: the records below the
				// log start are gone, the ones above are all still read.
				g.log.Warn("committed offset out of range, reset to first offset",
					telemetry.Partition(pr.partition), telemetry.Offset(pr.start))
				if err := reader.SetOffset(kafka.FirstOffset); err != nil {
					return fmt.Errorf("seek partition %d to first offset: %w", pr.partition, err)
				}
				pr.resetCommitted()
				continue
			}
			return fmt.Errorf("read partition %d: %w", pr.partition, err)
		}
		batch := scratch[:0]
		pr.read(msg)
		if pr.add(msg.Offset) {
			batch = append(batch, msg)
		}
		// Fill the batch for at most BatchWait, never beyond MaxInFlight
		// held records or MaxSettling released ones.
		if g.gc.BatchWait > 0 {
			bctx, bcancel := context.WithTimeout(ctx, g.gc.BatchWait)
			for len(batch) < g.gc.MaxBatch && !pr.full(g.gc.MaxInFlight, g.gc.MaxSettling) {
				msg, err := reader.FetchMessage(bctx)
				if err != nil {
					if ctx.Err() != nil {
						bcancel()
						return nil
					}
					if bctx.Err() != nil {
						break
					}
					bcancel()
					return fmt.Errorf("read partition %d: %w", pr.partition, err)
				}
				pr.read(msg)
				if pr.add(msg.Offset) {
					batch = append(batch, msg)
				}
			}
			bcancel()
		}
		if len(batch) == 0 {
			continue
		}
		scratch = batch             // the larger array if it grew
		batch = slices.Clone(batch) // the handler's, for good
		clear(scratch)              // no payload kept alive here
		g.metrics.consumed.Add(float64(len(batch)))
		if err := h.Handle(ctx, batch, pr.ack); err != nil {
			if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				return nil // revoked or stopping while handling
			}
			return fmt.Errorf("handle partition %d at offset %d: %w", pr.partition, batch[0].Offset, err)
		}
	}
}

// partitionRun is the state of one assigned partition in one generation,
// shared by its reading goroutine, the handler's ack calls and the
// generation's committer.
type partitionRun struct {
	partition int
	start     int64 // assignment offset (absolute, or kafka.FirstOffset)
	inflight  prometheus.Gauge
	lagGauge  prometheus.Gauge
	space     chan struct{} // signalled by ack: capacity may be available

	mu            sync.Mutex
	tracker       *offsetTracker
	lastCommitted int64 // -1 before the first commit of this generation
	closed        bool  // handler closed: acks no longer move the gauge
	lag           int64 // this partition's share of lagGauge
}

func newPartitionRun(pa kafka.PartitionAssignment, inflight, lag prometheus.Gauge) *partitionRun {
	last := int64(-1)
	if pa.Offset >= 0 {
		last = pa.Offset
	}
	return &partitionRun{
		partition:     pa.ID,
		start:         pa.Offset,
		inflight:      inflight,
		lagGauge:      lag,
		space:         make(chan struct{}, 1),
		tracker:       newOffsetTracker(),
		lastCommitted: last,
	}
}

// read records the partition's lag after reading msg: the records
// between it and the high watermark the broker reported with it.
func (pr *partitionRun) read(msg kafka.Message) {
	lag := max(msg.HighWaterMark-msg.Offset-1, 0)
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.closed {
		pr.lagGauge.Add(float64(lag - pr.lag))
		pr.lag = lag
	}
}

func (pr *partitionRun) add(offset int64) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.tracker.Add(offset) {
		return false // a record already seen: never hand it out twice
	}
	pr.inflight.Inc()
	return true
}

// ack is the handler's ack callback. Safe for concurrent use; acks of
// records of another partition, unknown or repeated acks are ignored.
func (pr *partitionRun) ack(msg kafka.Message) {
	if msg.Partition != pr.partition {
		return
	}
	pr.mu.Lock()
	ok := pr.tracker.Ack(msg.Offset)
	if ok && !pr.closed {
		pr.inflight.Dec()
	}
	pr.mu.Unlock()
	if ok {
		pr.roomMade()
	}
}

// roomMade wakes waitCapacity: an ack or a release may have made room.
func (pr *partitionRun) roomMade() {
	select {
	case pr.space <- struct{}{}:
	default:
	}
}

// release is the Releaser's release function. Safe for concurrent use;
// records of another partition, unknown, acked or released ones are
// ignored.
func (pr *partitionRun) release(msg kafka.Message) {
	if msg.Partition != pr.partition {
		return
	}
	pr.mu.Lock()
	ok := pr.tracker.Release(msg.Offset)
	pr.mu.Unlock()
	if ok {
		pr.roomMade()
	}
}

// fresh reports whether no record was read yet.
func (pr *partitionRun) fresh() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	_, read := pr.tracker.Committable()
	return !read
}

func (pr *partitionRun) unacked() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.tracker.Unacked()
}

// full reports whether limit records are held, or settling released ones
// (when settling is positive).
func (pr *partitionRun) full(limit, settling int) bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.tracker.Held() >= limit || settling > 0 && pr.tracker.Released() >= settling
}

// waitCapacity blocks while limit records are held or settling are
// released (full), calling onFull (when not nil) once before it waits.
func (pr *partitionRun) waitCapacity(ctx context.Context, limit, settling int, onFull func()) error {
	for i := 0; pr.full(limit, settling); i++ {
		if i == 0 && onFull != nil {
			onFull()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pr.space:
		}
	}
	return nil
}

// toCommit returns the committable offset when it advanced past the last
// commit.
func (pr *partitionRun) toCommit() (int64, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	off, ok := pr.tracker.Committable()
	if !ok || off <= pr.lastCommitted {
		return 0, false
	}
	return off, true
}

// resetCommitted lets the next commit go below the assignment offset
// (after a reset to the first offset).
func (pr *partitionRun) resetCommitted() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.lastCommitted = -1
}

func (pr *partitionRun) committed(off int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if off > pr.lastCommitted {
		pr.lastCommitted = off
	}
}

// close marks the handler closed and removes its unacked records from the
// in-flight gauge.
func (pr *partitionRun) close() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if !pr.closed {
		pr.closed = true
		pr.inflight.Sub(float64(pr.tracker.Unacked()))
		pr.lagGauge.Sub(float64(pr.lag))
		pr.lag = 0
	}
}
