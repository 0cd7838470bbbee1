// Package feedback consumes the fetchers' per-proxy reports
// (crawlv1.ProxyFeedback on the proxy-feedback topic) and applies them to
// the pool: successes raise a proxy's success rate, timeouts and errors
// lower it, blocks count the blocking host, and the pool bans a proxy past
// its thresholds (a tombstone at the next round).
package feedback

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Pool receives feedback (*pool.Pool). Safe for concurrent use.
type Pool interface {
	Feedback(proxyID, host, outcome string) bool
}

// Outcomes a fetcher reports; anything else counts as "error".
var outcomes = map[string]bool{"success": true, "timeout": true, "blocked": true, "error": true}

// Metrics of the consumer.
type Metrics struct {
	records *prometheus.CounterVec // feedback_total{outcome}
	unknown prometheus.Counter     // feedback_unknown_proxy_total
	bad     prometheus.Counter     // feedback_undecodable_total
}

// NewMetrics registers the consumer's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "feedback_total", Help: "Fetcher proxy feedback applied, by outcome."}, []string{"outcome"}),
		unknown: prometheus.NewCounter(prometheus.CounterOpts{Name: "feedback_unknown_proxy_total", Help: "Feedback on proxies the pool does not track."}),
		bad:     prometheus.NewCounter(prometheus.CounterOpts{Name: "feedback_undecodable_total", Help: "Undecodable feedback records skipped."}),
	}
	for _, c := range []prometheus.Collector{m.records, m.unknown, m.bad} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register feedback metrics: %w", err)
		}
	}
	return m, nil
}

// Apply decodes one record and applies it; undecodable records are counted
// and skipped (one bad record must not stop the consumer).
func Apply(p Pool, m kafka.Message, met *Metrics, log *zap.Logger) {
	var fb crawlv1.ProxyFeedback
	if err := kafkaio.Decode(m, &fb); err != nil {
		met.bad.Inc()
		log.Warn("undecodable proxy feedback skipped", telemetry.Partition(m.Partition), telemetry.Offset(m.Offset), zap.Error(err))
		return
	}
	outcome := fb.GetOutcome()
	if !outcomes[outcome] {
		outcome = "error"
	}
	if !p.Feedback(fb.GetProxyId(), fb.GetHost(), outcome) {
		met.unknown.Inc()
		return
	}
	met.records.WithLabelValues(outcome).Inc()
}

// Flusher makes the pool's changes durable (*state.Store: the proxy-state
// topic); it blocks until they are acknowledged.
type Flusher interface {
	Flush(ctx context.Context) error
}

// handler applies a batch of a partition's records, makes the pool's
// changes durable (the proxy-state topic), then acks the batch: a crash
// before the flush redelivers the batch to the next leader, which loaded
// the state without it.
type handler struct {
	pool  Pool
	state Flusher // nil: the state is in memory only and records are done when applied
	m     *Metrics
	log   *zap.Logger
}

func (h handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	for _, msg := range batch {
		Apply(h.pool, msg, h.m, h.log)
	}
	if h.state != nil {
		if err := h.state.Flush(ctx); err != nil {
			return fmt.Errorf("apply proxy feedback: %w", err)
		}
	}
	for _, msg := range batch {
		ack(msg)
	}
	return nil
}

func (handler) Close(context.Context) error { return nil }

// NewGroup returns the consumer group (group <prefix>proxypool) over the
// proxy-feedback topic; run it with Run. st, when not nil, makes each
// batch's effect durable before the batch is acked.
func NewGroup(c kafkaio.Config, p Pool, st Flusher, m *Metrics, log *zap.Logger, reg prometheus.Registerer) (*kafkaio.Group, error) {
	gc := kafkaio.GroupConfig{GroupID: c.GroupFor("proxypool"), Topic: c.Topics().ProxyFeedback}
	g, err := kafkaio.NewGroup(c, gc, func(context.Context, string, int) (kafkaio.Handler, error) {
		return handler{pool: p, state: st, m: m, log: log}, nil
	}, log, reg)
	if err != nil {
		return nil, fmt.Errorf("create feedback group: %w", err)
	}
	return g, nil
}
