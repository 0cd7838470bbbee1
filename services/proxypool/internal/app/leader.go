package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/feedback"
)

// One view with several instances. Every instance follows the
// proxy-state topic into its pool (the API shows it), and one instance
// leads: the member of the consumer group <prefix>proxypool.leader that
// holds the state topic's only partition. Only the leader checks,
// harvests, applies the fetchers' feedback (it alone runs the feedback
// group), writes the state topic and publishes the proxies topic, so the
// fetchers see one pool. A leader that stops or dies loses the partition
// (at the latest after the session timeout) and another instance leads:
// it reads the state topic to its end first, so it goes on with every
// score, ban and eviction of its predecessor.

// stateLoadTimeout bounds reading the state topic when a term starts.
const stateLoadTimeout = time.Minute

type leaderMetrics struct {
	leading prometheus.Gauge   // leader
	terms   prometheus.Counter // leader_terms_total
}

func newLeaderMetrics(reg prometheus.Registerer) (*leaderMetrics, error) {
	m := &leaderMetrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "leader", Help: "1 while this instance leads the pool (checks, harvests, applies feedback, publishes)."}),
		terms:   prometheus.NewCounter(prometheus.CounterOpts{Name: "leader_terms_total", Help: "Times this instance started leading the pool."}),
	}
	for _, c := range []prometheus.Collector{m.leading, m.terms} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register leader metrics: %w", err)
		}
	}
	return m, nil
}

// follow folds the state topic into the pool and competes for the lead
// until ctx is done or a part fails.
func (k *keeper) follow(ctx context.Context) error {
	k.log.Info("following proxy states, competing for the lead",
		zap.Int("proxies", k.proxies), zap.Int("sources", k.sources), zap.Duration("interval", k.interval),
		telemetry.Topic(k.kafka.Topics().ProxyState))
	termErr := make(chan error, 1)
	lead, err := kafkaio.NewGroup(k.kafka, kafkaio.GroupConfig{
		GroupID: k.kafka.GroupFor("proxypool.leader"), Topic: k.kafka.Topics().ProxyState,
	}, func(ctx context.Context, _ string, _ int) (kafkaio.Handler, error) {
		return k.startTerm(ctx, termErr), nil
	}, k.log, k.reg)
	if err != nil {
		return fmt.Errorf("create leader group: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return k.store.Follow(gctx) })
	g.Go(func() error { return lead.Run(gctx) })
	g.Go(func() error {
		select {
		case err := <-termErr:
			return err
		case <-gctx.Done():
			return nil
		}
	})
	return g.Wait()
}

// term is the leader group's handler of the state partition: while it is
// assigned this instance leads. The partition's records are the state the
// follower applies already: they are only acked.
type term struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (t *term) Handle(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	for _, m := range batch {
		ack(m)
	}
	return nil
}

// Close ends the term: the loop and the feedback group stop (a check in
// flight is abandoned, the feedback group commits what was applied and
// made durable).
func (t *term) Close(ctx context.Context) error {
	t.cancel()
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("end leader term: %w", ctx.Err())
	}
}

// startTerm starts leading until ctx (the partition's) is done or Close;
// a failure goes to termErr and stops the instance.
func (k *keeper) startTerm(ctx context.Context, termErr chan<- error) *term {
	ctx, cancel := context.WithCancel(ctx)
	t := &term{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		if err := k.lead(ctx); err != nil && ctx.Err() == nil {
			select {
			case termErr <- err:
			default: // another failure is already reported
			}
		}
	}()
	return t
}

// lead is one term: load the state, take over the operator's list,
// republish everything, then check, harvest and apply feedback until ctx
// is done.
func (k *keeper) lead(ctx context.Context) error {
	k.leading.Store(true)
	k.leaderMetrics.leading.Set(1)
	k.leaderMetrics.terms.Inc()
	defer func() {
		k.leading.Store(false)
		k.leaderMetrics.leading.Set(0)
	}()
	lctx, cancel := context.WithTimeout(ctx, stateLoadTimeout)
	n, err := k.store.Load(lctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// Another instance may have published since this one last led, and a
	// line may have left the file meanwhile.
	k.pool.ForgetPublished()
	k.pool.KeepListed(k.entries)
	k.log.Info("leading the proxy pool", zap.Int("states_loaded", n), zap.Int("proxies", len(k.pool.Snapshot())))
	// Proxies left live on the proxies topic that the pool does not
	// track are tombstoned after the first round. Best effort.
	ids, err := k.staleIDs(ctx)
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		k.log.Warn("previous proxies unknown", zap.Error(err))
	default:
		k.loop.WithStale(ids)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return k.loop.Run(gctx) })
	if k.feedbackMetrics != nil {
		group, err := feedback.NewGroup(k.kafka, k.pool, k.store, k.feedbackMetrics, k.log, k.reg)
		if err != nil {
			return err
		}
		g.Go(func() error { return group.Run(gctx) })
	}
	err = g.Wait()
	k.log.Info("no longer leading the proxy pool")
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
