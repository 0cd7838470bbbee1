// Package app assembles the scheduler from its configuration: New opens
// ClickHouse (migrated), makes sure the topics exist, and builds the batch
// writers (sinks), the admission consumer and its group, the revisit
// consumer and its group, the page-budget tracker and the table of crawl
// specifications they all read. cmd/scheduler adds the parts to the
// service's run group; Close releases the clients once the group is done.
package app

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/consume"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit/schedule"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
)

// Name is the service's name: its metric prefix, its log field and the base
// of its consumer groups' ids.
const Name = "scheduler"

// Scheduler is the scheduler's parts, built from its configuration.
type Scheduler struct {
	// Writers are the ClickHouse batch writers: Flush components.
	Writers *sinks.Writers

	cfg      config.Config
	log      *zap.Logger
	store    *chstore.Store
	producer *kafkaio.Writer
	specs    *crawlcontrol.Specs
	tracker  *budget.Tracker
	group    *kafkaio.Group // discovered URLs → admission
	revisits *kafkaio.Group // fetched pages → revisit schedule
}

// New builds the scheduler: ClickHouse opened and migrated, the topics
// created, every part constructed but nothing running yet. On error, what
// was opened is closed again.
func New(ctx context.Context, cfg config.Config, log *zap.Logger, reg prometheus.Registerer) (_ *Scheduler, err error) {
	s := &Scheduler{cfg: cfg, log: log, specs: crawlcontrol.NewSpecs()}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// ClickHouse waited for while it is down, migrated; the topics created.
	if s.store, err = service.Bootstrap(ctx, cfg.ClickHouse, cfg.Kafka, log, reg); err != nil {
		return nil, err
	}
	s.producer = kafkaio.NewWriter(cfg.Kafka, log, reg)
	s.Writers = sinks.New(s.store, cfg.ClickHouse.Batch(), cfg.SeenBatch(), log, reg)
	s.tracker = budget.NewTracker(config.SpecPages(s.specs, cfg.Fleet(), cfg.BudgetAdmitFactor))
	if s.group, err = s.admission(reg); err != nil {
		return nil, err
	}
	if s.revisits, err = s.revisit(reg); err != nil {
		return nil, err
	}
	return s, nil
}

// admission builds the consumer of discovered URLs: the crawl
// specifications override the flags' depth, scope and page budgets.
func (s *Scheduler) admission(reg prometheus.Registerer) (*kafkaio.Group, error) {
	cfg, specs, store := s.cfg, s.specs, s.store
	topics := cfg.Kafka.Topics()
	sched, err := consume.New(consume.Config{
		Topics: topics, Partitions: cfg.Kafka.Partitions,
		Depth: config.SpecDepth(specs, cfg.Fleet()), Scope: config.SpecScope(specs, s.log), Priority: config.SpecPriority(specs, s.log),
		State: specs.State, Paused: config.PausedCrawls(specs), Retired: config.RetiredCrawls(specs), Changed: specs.Changed,
		SyncSpec: func(ctx context.Context, crawlID string) error { _, err := specs.GetSynced(ctx, crawlID); return err },
		SyncScope: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, crawlcontrol.SyncTimeout)
			defer cancel()
			return specs.Sync(ctx)
		},
		Granted:   specs.Grant,
		HostLimit: config.SpecHostPages(specs), HostCounts: sinks.CountHosts(store),
		HostQuota: cfg.HostQuota, QuotaWindow: cfg.QuotaWindow,
	}, s.producer, s.Writers.Seen, s.Writers.Events, sinks.Frontier{W: s.Writers.Frontier, Store: store}, store, s.tracker, time.Now, s.log, reg)
	if err != nil {
		return nil, err
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID: cfg.Kafka.GroupFor(Name), Topic: topics.Discovered, MaxBatch: cfg.MaxBatch, MaxInFlight: cfg.MaxInFlight,
		OnFull: s.Writers.Flush, OnClose: s.Writers.Flush,
	}, sched.Assign, s.log, reg)
	if err != nil {
		return nil, fmt.Errorf("create consumer group: %w", err)
	}
	return group, nil
}

// revisit builds the revisit consumer, in its own group on the fetched
// pages.
func (s *Scheduler) revisit(reg prometheus.Registerer) (*kafkaio.Group, error) {
	cfg, topics := s.cfg, s.cfg.Kafka.Topics()
	revisiter, err := schedule.New(schedule.Config{
		Topics: topics, Partitions: cfg.Kafka.Partitions, Policy: config.SpecRevisit(s.specs), State: s.specs.State, Tick: cfg.RevisitTick,
	}, s.producer, sinks.Revisits{Revisits: s.Writers.Revisits, Changes: s.Writers.Changes, Store: s.store}, time.Now, s.log, reg)
	if err != nil {
		return nil, err
	}
	group, err := kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID: cfg.Kafka.GroupFor(Name + "-revisit"), Topic: topics.Fetched, MaxBatch: cfg.MaxBatch, MaxInFlight: cfg.MaxInFlight,
		OnFull: s.Writers.Flush, OnClose: s.Writers.Flush,
	}, revisiter.Assign, s.log, reg)
	if err != nil {
		return nil, fmt.Errorf("create revisit consumer group: %w", err)
	}
	return group, nil
}

// Ping checks ClickHouse (the readiness check).
func (s *Scheduler) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

// KafkaCheck fails while the producer waits for the broker (readiness).
func (s *Scheduler) KafkaCheck(ctx context.Context) error { return s.producer.Check(ctx) }

// Admit runs the consumer group of discovered URLs until ctx is done.
func (s *Scheduler) Admit(ctx context.Context) error { return s.group.Run(ctx) }

// Revisit runs the revisit consumer group until ctx is done, from the
// moment a followed crawl revisits its pages (schedule.WaitRevisiting).
func (s *Scheduler) Revisit(ctx context.Context) error {
	if err := schedule.WaitRevisiting(ctx, s.specs); err != nil {
		return nil // stopping before any crawl revisited
	}
	s.log.Info("a followed crawl revisits its pages, revisit consumer starting")
	return s.revisits.Run(ctx)
}

// FollowSpecs reads the control topic into the crawl specifications until
// ctx is done.
func (s *Scheduler) FollowSpecs(ctx context.Context) error {
	return crawlcontrol.Follow(ctx, s.cfg.Kafka, s.specs, func(err error) { s.log.Warn("crawl spec skipped", zap.Error(err)) })
}

// RefreshBudgets refreshes the page budgets' counts from ClickHouse every
// --budget-refresh until ctx is done.
func (s *Scheduler) RefreshBudgets(ctx context.Context) error {
	return s.tracker.Run(ctx, s.cfg.BudgetRefresh, sinks.CountSeen(s.store), func(err error) {
		s.log.Warn("budget refresh failed, keeping previous counts", zap.Error(err))
	})
}

// Close closes the Kafka writer and ClickHouse; call it once every part
// has stopped.
func (s *Scheduler) Close() {
	if s.producer != nil {
		_ = s.producer.Close()
	}
	if s.store != nil {
		_ = s.store.Close()
	}
}
