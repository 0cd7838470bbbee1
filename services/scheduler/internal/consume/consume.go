// Package consume is the scheduler's Kafka adapter: it owns, for every
// assigned partition of the Discovered topic, that partition's seen set,
// runs the admission policy over each batch, produces the fetch requests and
// persists the new fingerprints before acknowledging.
//
// Delivery order per batch: decide every record → produce the scope
// grants of seeds' redirect targets to the control topic → produce every
// FetchRequest (and every re-keyed DiscoveredURL and reprioritize
// request) with acks=all → add the
// new fingerprints to the in-memory seen set → insert them into url_seen
// (with the batch's drop events) in the background, the fingerprints of
// the URLs deferred to the frontier only after their frontier rows → ack.
// The next batch is decided while ClickHouse flushes. A crash after
// producing and before the insert redelivers the batch to the next owner,
// which requests those URLs a second time (bounded by the partition's
// in-flight window; the fetcher recognises an attempt it already fetched);
// no order of failures loses a URL: a fingerprint in url_seen always has
// its fetch request in the fetch topic or its row in the frontier.
package consume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/dedup"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/frontier"
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
	Write(ctx context.Context, rs ...rows.SeenRow) error
}

// EventWriter inserts url_events rows; *chstore.BatchWriter[chstore.URLEventRow].
// Write blocks until the rows are inserted or returns an error. Safe for
// concurrent use.
type EventWriter interface {
	Write(ctx context.Context, rs ...rows.URLEventRow) error
}

// SeenLoader streams a partition's stored fingerprints, leaving out the
// crawls in skip (or only crawl's, with LoadSeenCrawl); *chstore.Store.
// Safe for concurrent use.
type SeenLoader interface {
	LoadSeen(ctx context.Context, partition int, skip []string, fn func(crawlID string, fp uint64)) error
	LoadSeenCrawl(ctx context.Context, partition int, crawlID string, fn func(fp uint64)) error
}

// Config is the scheduler's consuming configuration.
type Config struct {
	Topics     kafkaio.Topics
	Partitions int // partition count of every URL topic
	// Depth is a crawl's deepest link depth admitted (seeds are 0),
	// resolved: see admit.Policy.Depth.
	Depth func(crawlID string) uint32
	// Scope, optional, returns a crawl's compiled scope rules; see
	// admit.Policy.Scope (redirect targets and sitemaps' URLs are judged
	// by them).
	Scope func(crawlID string) (*scope.Rules, bool)
	// Priority, optional, returns a crawl's compiled priority rules; see
	// admit.Policy.Priority (nil: the default signals, sitemaps and
	// in-links).
	Priority func(crawlID string) *priority.Rules
	// LoadRetry is the first delay before retrying a failed seen-set load,
	// doubled up to 5s (default 200ms). A partition whose set cannot be
	// loaded stalls; it is never served without its set.
	LoadRetry time.Duration
	// HostQuota is the number of fetch requests a partition releases per
	// host per QuotaWindow (0 = unlimited). Admitted URLs over quota wait
	// in the frontier table and the partition's pump releases them, best
	// first (highest priority, then shallowest), as the quota allows.
	HostQuota   int
	QuotaWindow time.Duration // default 10s; also the pump's interval
	// State, optional, returns a crawl's operator state (CrawlSpec.state;
	// RUNNING without a spec). A CANCELLED crawl's URLs are dropped as
	// cancelled; a PAUSED crawl's admitted URLs are parked in the frontier
	// and released by the pump once it runs again.
	State func(crawlID string) crawlv1.CrawlState
	// Paused, optional, lists the crawls whose frontier rows the pump must
	// leave pending (the PAUSED ones).
	Paused func() []string
	// Retired, optional, lists the crawls whose URLs are no longer admitted
	// (the CANCELLED ones, by State): their fingerprints are neither
	// loaded when a partition is assigned nor kept once a crawl retires,
	// so a scheduler's memory holds the crawls that run, not every crawl
	// ever run.
	Retired func() []string
	// Changed, optional, returns a channel closed at the next change of
	// the crawl specifications (crawlcontrol.Specs.Changed): the pumps
	// then run at once, so a resumed crawl's held URLs go out without
	// waiting for the next window.
	Changed func() <-chan struct{}
	// HostLimit, optional, returns a crawl's page budget per host
	// (CrawlSpec.limits.max_pages_per_host), 0 = unlimited. A host lives
	// on one partition, so its count is exact in the partition's owner;
	// HostCounts loads it (per crawl, on first need) from url_seen.
	HostLimit  func(crawlID string) int64
	HostCounts func(ctx context.Context, partition int, crawlID string) (map[string]int64, error)
	// SyncSpec, optional, waits for a crawl's specification that may be on
	// its way (crawlcontrol.Specs.GetSynced): the seeder publishes it just
	// before the seeds, and a seed admitted before its crawl's limits and
	// state are known would be admitted on the defaults.
	SyncSpec func(ctx context.Context, crawlID string) error
	// SyncScope, optional, waits until the scheduler knows every record
	// the control topic holds now (crawlcontrol.Specs.Sync): asked at most
	// once per batch, before deciding a redirect target or a sitemap's URL
	// whose parent is off its crawl's known sites (a scope grant this
	// scheduler has not read yet). An error other than ctx's is logged
	// and the batch is decided on what is known.
	SyncScope func(ctx context.Context) error
	// Granted, optional, records a scope grant this scheduler wrote
	// (crawlcontrol.Specs.Grant) so that its next decisions see it before
	// its control follower reads it back; it reports whether the grant was
	// new. Grants go to Topics.Control.
	Granted func(*crawlv1.ScopeGrant) bool
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	var errs []error
	if c.Topics.Discovered == "" || c.Topics.Fetch == "" || c.Topics.Control == "" {
		errs = append(errs, errors.New("topics: discovered, fetch and control must be named"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d must be positive", c.Partitions))
	}
	if c.HostQuota < 0 {
		errs = append(errs, fmt.Errorf("host quota: %d must not be negative", c.HostQuota))
	}
	if c.QuotaWindow < 0 {
		errs = append(errs, fmt.Errorf("quota window: %v must not be negative", c.QuotaWindow))
	}
	if c.HostLimit != nil && c.HostCounts == nil {
		errs = append(errs, errors.New("host limit: needs host counts"))
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
	events   EventWriter
	frontier frontier.Store
	loader   SeenLoader
	budget   *budget.Tracker
	policy   admit.Policy
	now      func() time.Time
	log      *zap.Logger
	metrics  *metrics
}

// New returns a scheduler. b is shared by every partition (per-crawl page
// budget); now is the clock stamped on fetch requests and seen rows; ev
// receives the terminal state of every URL not admitted (see dropState); fr
// holds the URLs deferred by the host quota (nil only when
// cfg.HostQuota is 0).
func New(cfg Config, p Producer, w SeenWriter, ev EventWriter, fr frontier.Store, l SeenLoader, b *budget.Tracker, now func() time.Time, log *zap.Logger, reg prometheus.Registerer) (*Scheduler, error) {
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
	if cfg.QuotaWindow == 0 {
		cfg.QuotaWindow = 10 * time.Second
	}
	if ev == nil {
		return nil, errors.New("new scheduler: nil event writer")
	}
	if fr == nil && cfg.HostQuota > 0 {
		return nil, errors.New("new scheduler: host quota without a frontier")
	}
	s := &Scheduler{cfg: cfg, producer: p, seenW: w, events: ev, frontier: fr, loader: l, budget: b, now: now, log: log, metrics: m}
	s.policy = admit.Policy{Depth: cfg.Depth, State: cfg.State, Scope: cfg.Scope, Priority: cfg.Priority, Partition: s.partitionOf, Now: now}
	return s, nil
}

// pumpConfig is the configuration of every partition's frontier pump.
func (s *Scheduler) pumpConfig() frontier.PumpConfig {
	return frontier.PumpConfig{
		Topic: s.cfg.Topics.Fetch, PerHost: s.cfg.HostQuota, Window: s.cfg.QuotaWindow,
		Paused: s.cfg.Paused, Changed: s.cfg.Changed, State: s.cfg.State, Now: s.now,
		Key: func(canonical string) ([]byte, error) {
			key, _, err := s.partitionOf(canonical)
			return key, err
		},
		Released: s.metrics.released, Cancelled: s.metrics.dropped.WithLabelValues(string(admit.Cancelled)),
	}
}

// partitionOf is the pipeline's one partition function applied to a
// canonical URL.
func (s *Scheduler) partitionOf(canonical string) ([]byte, int, error) {
	k, err := urlcanon.CanonicalKey(canonical)
	if err != nil {
		return nil, 0, fmt.Errorf("key url: %w", err)
	}
	key := []byte(k)
	return key, kafkaio.PartitionFor(key, s.cfg.Partitions), nil
}

// Assign loads the partition's seen sets from ClickHouse (one per crawl
// that is not retired), retrying until it succeeds or ctx is done, and
// returns the partition's handler. It is a kafkaio.AssignFunc.
func (s *Scheduler) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	log := s.log.With(telemetry.Topic(topic), telemetry.Partition(partition))
	var skip []string
	if s.cfg.Retired != nil {
		skip = s.cfg.Retired()
	}
	var sets map[string]*dedup.Set
	counts := make(map[string]int64)
	err := s.retryLoad(ctx, log, func() error {
		sets, counts = make(map[string]*dedup.Set), make(map[string]int64)
		start := time.Now()
		err := s.loader.LoadSeen(ctx, partition, skip, func(crawlID string, fp uint64) {
			set := sets[crawlID]
			if set == nil {
				set = dedup.New(0)
				sets[crawlID] = set
			}
			if set.Add(fp) { // a row not yet merged by ClickHouse may repeat
				counts[crawlID]++
			}
		})
		if err == nil {
			s.metrics.seenLoad.Observe(time.Since(start).Seconds())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	urls, bytes := 0, 0
	for _, set := range sets {
		urls, bytes = urls+set.Len(), bytes+set.Bytes()
	}
	s.metrics.seenSize.Add(float64(urls))
	s.budget.Hold(partition, counts)
	log.Info("loaded seen set", zap.Int("urls", urls), zap.Int("crawls", len(sets)), zap.Int("retired_crawls", len(skip)),
		zap.Int("bytes", bytes))
	h := &handler{s: s, partition: partition, seen: sets, skipped: make(map[string]bool), batch: dedup.New(0), log: log,
		quota: frontier.NewQuota(s.cfg.HostQuota, s.cfg.QuotaWindow, s.now)}
	for _, id := range skip {
		h.skipped[id] = true
	}
	if s.cfg.HostLimit != nil {
		h.hosts = budget.NewHosts(partition, s.cfg.HostLimit, s.cfg.HostCounts)
	}
	h.persists = kafkaio.NewLater(ctx, log)
	if s.frontier != nil {
		// Also without a quota: it releases the URLs of paused
		// crawls once they run again.
		h.pump = frontier.StartPump(s.pumpConfig(), partition, h.quota, s.frontier, s.producer, s.events, log)
	}
	return h, nil
}

// retryLoad runs load until it succeeds or ctx is done, waiting
// cfg.LoadRetry after the first failure, doubled up to 5s: a partition
// whose seen set cannot be loaded stalls, it is never served without it.
func (s *Scheduler) retryLoad(ctx context.Context, log *zap.Logger, load func() error) error {
	retry := backoff.New(s.cfg.LoadRetry, 5*time.Second)
	for {
		err := load()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("load seen set: %w", ctx.Err())
		}
		log.Warn("load seen set failed, retrying", zap.Error(err), zap.Duration("retry_in", retry.Next()))
		if retry.Wait(ctx) != nil {
			return fmt.Errorf("load seen set: %w", ctx.Err())
		}
	}
}

// handler serves one assigned partition; called from one goroutine at a
// time (kafkaio.Handler).
type handler struct {
	s         *Scheduler
	partition int
	// seen holds the persisted fingerprints of the partition, a set per
	// crawl that is not retired; skipped are the crawls whose
	// fingerprints were left out (retired), loaded should one run again.
	seen    map[string]*dedup.Set
	skipped map[string]bool
	batch   *dedup.Set // fingerprints admitted in the current batch
	quota   *frontier.Quota
	pump    *frontier.Pump // nil without a frontier
	log     *zap.Logger
	// hosts is the partition's per-host page budgets (nil without
	// Config.HostLimit).
	hosts *budget.Hosts

	// Batches whose requests are produced and whose rows are being
	// persisted: their records are acked when the rows are in.
	persists *kafkaio.Later
}

// hostTaken is one per-host budget unit taken in the current batch.
type hostTaken struct{ crawl, host string }

// seenView is a crawl's seen set in the partition plus the batch admitted
// so far (every crawl's: fingerprints are of the crawl and the URL).
type seenView struct{ seen, batch *dedup.Set }

func (v seenView) Contains(fp uint64) bool { return v.seen.Contains(fp) || v.batch.Contains(fp) }

// setOf returns crawl's seen set in the partition, creating it (empty for
// a crawl new to the partition, loaded from ClickHouse for one whose
// fingerprints were left out when it was retired).
func (h *handler) setOf(ctx context.Context, crawl string) (*dedup.Set, error) {
	if set, ok := h.seen[crawl]; ok {
		return set, nil
	}
	if h.skipped[crawl] && h.s.cfg.State != nil && h.s.cfg.State(crawl) == crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		// Still retired: its URLs are dropped as cancelled before the seen
		// set is asked, so its fingerprints are not loaded again for the
		// outlinks still on their way (a crawl past its time limit has
		// many): an empty set, kept nowhere.
		return dedup.New(0), nil
	}
	set := dedup.New(0)
	if h.skipped[crawl] {
		err := h.s.retryLoad(ctx, h.log, func() error {
			set = dedup.New(0)
			return h.s.loader.LoadSeenCrawl(ctx, h.partition, crawl, func(fp uint64) { set.Add(fp) })
		})
		if err != nil {
			return nil, err
		}
		delete(h.skipped, crawl)
		h.s.metrics.seenSize.Add(float64(set.Len()))
		h.log.Info("loaded seen set of a crawl running again", telemetry.Crawl(crawl), zap.Int("urls", set.Len()))
	}
	h.seen[crawl] = set
	return set, nil
}

// firstDuplicate reports whether a duplicate of fp is the first this
// handler has seen, marking it (dedup.Set.Mark) in the crawl's seen set,
// or in the batch's set for a URL admitted earlier in the same batch (that
// mark is not carried into the seen set: such a URL may get a second row).
// A new owner of the partition starts without marks, so a URL gets at most
// one duplicate row per owner or two.
func firstDuplicate(seen, batch *dedup.Set, fp uint64) bool {
	if in, first := seen.Mark(fp); in {
		return first
	}
	_, first := batch.Mark(fp)
	return first
}

// retire drops the seen sets of the crawls retired since the last batch
// (Config.Retired): their URLs are no longer admitted, and their
// fingerprints stay in ClickHouse.
func (h *handler) retire() {
	if h.s.cfg.Retired == nil {
		return
	}
	for _, id := range h.s.cfg.Retired() {
		set, ok := h.seen[id]
		if !ok {
			continue
		}
		delete(h.seen, id)
		h.skipped[id] = true
		h.s.metrics.seenSize.Sub(float64(set.Len()))
		h.log.Info("released seen set of a retired crawl", telemetry.Crawl(id), zap.Int("urls", set.Len()))
	}
}

// Handle decides every record and produces the fetch requests, then
// returns: the batch's rows (fingerprints, deferred URLs, drop events) are
// inserted in the background and the records that caused them acked once
// they are in, so the next batch is decided while ClickHouse flushes
// (every --clickhouse-flush-interval); a record that caused no row is
// acked once the batch's records are produced. The admitted fingerprints join the
// in-memory seen set at once, so later batches see them. A failed insert
// leaves its records unacked (redelivered to the next owner, whose seen set
// lacks them: their URLs are requested twice, never lost) and fails the
// next Handle, or Close.
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	if err := h.persists.Err(); err != nil {
		return err
	}
	s := h.s
	start := time.Now()
	h.batch.Reset()
	h.retire()
	var (
		out      []kafka.Message // fetch requests and re-keyed discoveries
		seenRows []rows.SeenRow  // of the URLs produced
		heldRows []rows.SeenRow  // of the URLs deferred to the frontier
		events   []rows.URLEventRow
		deferred []rows.FrontierRow
		reserved = make(map[string]int64)
		hostsNow []hostTaken
		dropped  = make(map[admit.Reason]int)
		// reprioritized counts the reprioritize requests of the batch.
		reprioritized int
		hosts         admit.HostBudget // nil, not a nil *budget.Hosts
	)
	if h.hosts != nil {
		hosts = h.hosts
	}
	undo := func() {
		h.unreserve(reserved)
		for _, x := range hostsNow {
			h.hosts.Give(x.crawl, x.host)
		}
	}
	now := s.now()
	var synced []string
	scopeSynced := false
	// The scope grants of the batch's seed redirects, by record key: the
	// seeds of one batch may redirect to one site.
	var grants []kafka.Message
	var granted []*crawlv1.ScopeGrant
	// A record whose decision left no row to insert (a repeat of a
	// duplicate already recorded, a record re-keyed to its partition, an
	// undecodable one) is acked as soon as what it produced is durable; the
	// others once their rows are in. Most discovered links are such
	// repeats, and holding them until the next flush filled the in-flight
	// window with records that wait for nothing: the partition then read
	// 1 000 records per flush interval.
	var ackNow, ackLater []kafka.Message
	for _, msg := range batch {
		rowsBefore := len(seenRows) + len(heldRows) + len(events)
		var u crawlv1.DiscoveredURL
		if err := kafkaio.Decode(msg, &u); err != nil {
			dropped[Malformed]++
			h.log.Warn("undecodable record skipped", telemetry.Offset(msg.Offset), zap.Error(err))
			ackNow = append(ackNow, kafkaio.AckRef(msg))
			continue
		}
		if s.cfg.SyncSpec != nil && !slices.Contains(synced, u.GetCrawlId()) {
			synced = append(synced, u.GetCrawlId())
			if err := s.cfg.SyncSpec(ctx, u.GetCrawlId()); err != nil {
				undo()
				return fmt.Errorf("wait for the specification of crawl %s: %w", u.GetCrawlId(), err)
			}
		}
		if s.cfg.SyncScope != nil && !scopeSynced && s.policy.ParentOffSites(&u) {
			scopeSynced = true
			if err := s.cfg.SyncScope(ctx); err != nil {
				if ctx.Err() != nil {
					undo()
					return fmt.Errorf("catch up with the control topic: %w", err)
				}
				h.log.Warn("control topic not caught up, deciding on the scope known", telemetry.Crawl(u.GetCrawlId()), zap.Error(err))
			}
		}
		set, err := h.setOf(ctx, u.GetCrawlId())
		if err != nil {
			undo()
			return err
		}
		d, err := s.policy.Decide(ctx, &u, h.partition, seenView{seen: set, batch: h.batch}, s.budget, hosts)
		if err != nil {
			undo()
			return err
		}
		if d.Admit && hosts != nil {
			hostsNow = append(hostsNow, hostTaken{u.GetCrawlId(), string(d.Key)})
		}
		if d.Grant != nil {
			m, err := crawlcontrol.ScopeGrantMessage(s.cfg.Topics.Control, d.Grant)
			if err != nil {
				undo()
				return fmt.Errorf("encode scope grant: %w", err)
			}
			if !slices.ContainsFunc(grants, func(g kafka.Message) bool { return string(g.Key) == string(m.Key) }) {
				grants = append(grants, m)
				granted = append(granted, d.Grant)
			}
		}
		switch {
		case d.Admit:
			h.batch.Add(d.FP)
			reserved[u.GetCrawlId()]++
			row := rows.SeenRow{
				CrawlID:   u.GetCrawlId(),
				Partition: uint16(h.partition),
				FP:        d.FP,
				URL:       d.Canonical,
				Depth:     uint16(min(u.GetDepth(), 65535)),
				FirstSeen: now,
			}
			if !d.Hold && h.quota.Admit(string(d.Key), priority.Rank(d.Fetch.GetPriority(), d.Fetch.GetDepth())) {
				m, err := kafkaio.NewMessage(s.cfg.Topics.Fetch, d.Key, d.Fetch)
				if err != nil {
					undo()
					return fmt.Errorf("encode fetch request: %w", err)
				}
				out = append(out, m)
				seenRows = append(seenRows, row)
			} else {
				if s.frontier == nil {
					undo()
					return errors.New("hold url of paused crawl: no frontier")
				}
				deferred = append(deferred, frontier.PendingRow(h.partition, string(d.Key), d.Fetch, now))
				heldRows = append(heldRows, row)
			}
		case d.Reason == admit.WrongPartition:
			// Hand the record to the partition that owns its host, so
			// that only one seen set ever holds the URL.
			m, err := kafkaio.NewMessage(s.cfg.Topics.Discovered, d.Key, &u)
			if err != nil {
				undo()
				return fmt.Errorf("encode discovered url: %w", err)
			}
			out = append(out, m)
			dropped[d.Reason]++
			h.log.Debug("discovered url re-keyed to its partition", telemetry.URL(d.Canonical),
				telemetry.Offset(msg.Offset), zap.Int("owner", d.Partition))
		default:
			dropped[d.Reason]++
			if d.Reprioritize != nil {
				// The URL's queued request, if the fetcher holds one,
				// rises: under the URL's key, after its request.
				m, err := kafkaio.NewMessage(s.cfg.Topics.Fetch, d.Key, d.Reprioritize)
				if err != nil {
					undo()
					return fmt.Errorf("encode reprioritize request: %w", err)
				}
				out = append(out, m)
				reprioritized++
			}
			if d.Reason == admit.Duplicate && u.GetInLinks() > 1 {
				// A link published again for its in-links (the parser's
				// count doubled) is no new discovery: the URL is admitted
				// already, and a row for it would cost an insert per
				// multiply-linked URL of the crawl.
				break
			}
			if d.Reason == admit.Duplicate && !firstDuplicate(set, h.batch, d.FP) {
				// Its duplicate row is written already: the rows of one
				// URL collapse into one, and a page linked from a
				// thousand pages costs one insert, not a thousand.
				break
			}
			if ev, ok := dropEvent(&u, s.policy.Prioritized(&u, d), h.partition, now); ok {
				events = append(events, ev)
			}
		}
		if len(seenRows)+len(heldRows)+len(events) > rowsBefore {
			ackLater = append(ackLater, kafkaio.AckRef(msg))
		} else {
			ackNow = append(ackNow, kafkaio.AckRef(msg))
		}
	}
	// A revoke does not cut the produce short (kafkaio.WriteGraced): a
	// write cancelled half way may have sent its requests, and this batch
	// would keep no trace of them (no seen row, no ack), so the next owner
	// would request its URLs again.
	if len(grants) > 0 {
		// Before the targets' fetch requests (and frontier rows): a
		// service that reads the control topic up to its end after
		// seeing anything of a granted site knows the grant.
		if err := kafkaio.WriteGraced(ctx, s.producer, grants...); err != nil {
			undo()
			return fmt.Errorf("produce scope grants: %w", err)
		}
		h.granted(granted)
	}
	if len(out) > 0 {
		if err := kafkaio.WriteGraced(ctx, s.producer, out...); err != nil {
			undo()
			return fmt.Errorf("produce fetch requests: %w", err)
		}
	}
	for _, msg := range ackNow {
		ack(msg)
	}
	// The requests are out: from here on a failure redelivers the batch
	// and its URLs are fetched twice, never lost.
	for _, r := range seenRows {
		h.seen[r.CrawlID].Add(r.FP)
	}
	for _, r := range heldRows {
		h.seen[r.CrawlID].Add(r.FP)
	}
	admitted := len(seenRows) + len(heldRows)
	s.metrics.received.Add(float64(len(batch)))
	s.metrics.admitted.Add(float64(admitted))
	s.metrics.deferred.Add(float64(len(deferred)))
	s.metrics.reprioritized.Add(float64(reprioritized))
	for r, n := range dropped {
		s.metrics.dropped.WithLabelValues(string(r)).Add(float64(n))
	}
	s.metrics.seenSize.Add(float64(admitted))
	if len(ackLater) == 0 {
		s.metrics.batchTime.Observe(time.Since(start).Seconds())
		return nil
	}
	h.persists.Go(func(ctx context.Context) error {
		if err := h.persist(ctx, seenRows, deferred, heldRows, events); err != nil {
			return err
		}
		if len(deferred) > 0 && h.pump != nil {
			h.pump.MarkDeferred(len(deferred))
		}
		for _, msg := range ackLater {
			ack(msg)
		}
		s.metrics.batchTime.Observe(time.Since(start).Seconds())
		return nil
	})
	return nil
}

// granted records the scope grants the batch wrote, counts and logs the
// new ones.
func (h *handler) granted(grants []*crawlv1.ScopeGrant) {
	for _, g := range grants {
		if h.s.cfg.Granted != nil && !h.s.cfg.Granted(g) {
			continue // granted already (a redelivered batch)
		}
		h.s.metrics.grants.Inc()
		h.log.Info("scope widened by a seed's redirect", telemetry.Crawl(g.GetCrawlId()),
			zap.String("site", g.GetHost()+g.GetDomain()), zap.String("redirected_from", g.GetRedirectedFrom()),
			telemetry.URL(g.GetTargetUrl()), zap.Uint32("redirect_hops", g.GetRedirectHops()))
	}
}

// persist inserts a batch's fingerprints, deferred URLs and drop events,
// concurrently, except that the fingerprints of the deferred URLs (held)
// are inserted after their frontier rows: a fingerprint in url_seen
// without its frontier row would make the next owner of the partition drop
// the redelivered URL as a duplicate, and nothing would ever request it
// (the url_seen and frontier writers flush on clocks of their own, so a
// crash can fall between the two inserts). The other way round, a frontier
// row without its fingerprint is re-admitted and deferred again, and the
// pump releases one of the two.
func (h *handler) persist(ctx context.Context, seenRows []rows.SeenRow, deferred []rows.FrontierRow, held []rows.SeenRow, events []rows.URLEventRow) error {
	s := h.s
	var g errgroup.Group
	if len(seenRows) > 0 {
		g.Go(func() error {
			if err := s.seenW.Write(ctx, seenRows...); err != nil {
				return fmt.Errorf("persist seen urls: %w", err)
			}
			return nil
		})
	}
	if len(deferred) > 0 {
		g.Go(func() error {
			if err := s.frontier.Write(ctx, deferred...); err != nil {
				return fmt.Errorf("persist deferred urls: %w", err)
			}
			if err := s.seenW.Write(ctx, held...); err != nil {
				return fmt.Errorf("persist seen urls: %w", err)
			}
			return nil
		})
	}
	if len(events) > 0 {
		g.Go(func() error {
			if err := s.events.Write(ctx, events...); err != nil {
				return fmt.Errorf("persist url events: %w", err)
			}
			return nil
		})
	}
	return g.Wait()
}

// dropEvent is the url_events row of a URL decided but not admitted. A URL
// that does not canonicalize is recorded as received, fingerprinted raw.
func dropEvent(u *crawlv1.DiscoveredURL, d admit.Decision, partition int, now time.Time) (rows.URLEventRow, bool) {
	state, ok := admit.StateOf(d.Reason)
	if !ok {
		return rows.URLEventRow{}, false
	}
	ev := rows.URLEventRow{
		CrawlID:   u.GetCrawlId(),
		URL:       d.Canonical,
		URLFP:     d.FP,
		Host:      string(d.Key),
		Partition: uint16(partition),
		State:     state,
		Reason:    string(d.Reason),
		Depth:     uint16(min(u.GetDepth(), 65535)),
		EventTime: now,
		// Computed for every URL decided on its partition: what it would
		// have been fetched at.
		Priority:       d.Priority,
		PriorityReason: d.PriorityReason,
	}
	if ev.URL == "" {
		ev.URL = u.GetUrl()
		ev.URLFP = fingerprint.URL(u.GetCrawlId(), u.GetUrl())
	}
	return ev, true
}

// unreserve gives back the budget of a batch that produced nothing.
func (h *handler) unreserve(reserved map[string]int64) {
	for id, n := range reserved {
		h.s.budget.Unreserve(h.partition, id, n)
	}
}

// Close waits for the batches being persisted (until ctx is done, then
// abandons them unacked), drops the partition's seen set and its share of
// the budget; the next owner reloads it from ClickHouse. It returns the
// error of a failed persist.
func (h *handler) Close(ctx context.Context) error {
	err := h.persists.Close(ctx)
	if h.pump != nil {
		h.pump.Stop()
	}
	urls := 0
	for _, set := range h.seen {
		urls += set.Len()
	}
	h.s.metrics.seenSize.Sub(float64(urls))
	h.s.budget.Release(h.partition)
	h.log.Info("released seen set", zap.Int("urls", urls))
	h.seen, h.batch = nil, nil
	return err
}
