// Package state keeps the proxy pool's own state on the compacted
// proxy-state topic (crawlv1.ProxyState keyed by proxy id), so that several
// pool instances hold one view and a restarted instance loses no score.
//
// The leading instance (internal/app) writes the State of every proxy it
// changed (Store.Flush, after a check round and after each batch of
// fetcher feedback, before that feedback is acked); every instance follows
// the topic (Store.Follow) and folds what the others wrote into its pool,
// and an instance that starts leading first reads the topic to its end
// (Store.Load). Records an instance wrote itself are skipped when read
// back: it applied them before writing. A forgotten proxy is a tombstone
// (its version in a header), a banned and evicted one a record with
// evicted set, so that no instance harvests it again.
package state

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// Record headers: who wrote a record, and a tombstone's version.
const (
	WriterHeader  = "writer"
	VersionHeader = "version"
)

var schema = crawlmsg.SchemaOf(&crawlv1.ProxyState{})

// Writer produces records; *kafkaio.Writer implements it. Write blocks until
// every record is acknowledged. Safe for concurrent use.
type Writer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// Metrics of the state topic.
type Metrics struct {
	written prometheus.Counter // state_records_written_total
	applied prometheus.Counter // state_records_applied_total
	bad     prometheus.Counter // state_records_undecodable_total
}

// NewMetrics registers the metrics on reg (prefixed crawler_proxypool_ by
// the caller).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "state_records_written_total", Help: "Proxy states written to the proxy-state topic."}),
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "state_records_applied_total", Help: "Proxy states of other instances (or previous runs) folded into the pool."}),
		bad:     prometheus.NewCounter(prometheus.CounterOpts{Name: "state_records_undecodable_total", Help: "Undecodable proxy-state records skipped."}),
	}
	for _, c := range []prometheus.Collector{m.written, m.applied, m.bad} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register proxy state metrics: %w", err)
		}
	}
	return m, nil
}

// Store writes a pool's changes to the state topic and folds the topic
// into the pool. Safe for concurrent use.
type Store struct {
	kafka    kafkaio.Config
	w        Writer
	topic    string
	pool     *pool.Pool
	instance string // this process: its records are skipped when read back
	m        *Metrics
	log      *zap.Logger
	// mu serializes Flush: a later version of a proxy must not reach
	// the topic before an earlier one (compaction keeps the last).
	mu sync.Mutex
}

// New returns a store of p on c's proxy-state topic, writing through w as
// instance (unique per process).
func New(c kafkaio.Config, w Writer, p *pool.Pool, instance string, m *Metrics, log *zap.Logger) *Store {
	return &Store{kafka: c, w: w, topic: c.Topics().ProxyState, pool: p, instance: instance, m: m, log: log}
}

// Flush writes the State of every proxy changed since the last Flush in
// one acknowledged batch (acks=all). On error the states are not retried:
// the caller stops (a new leader reloads the topic and the next change
// rewrites them).
func (s *Store) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	states := s.pool.TakeStates()
	if len(states) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, 0, len(states))
	for _, st := range states {
		m, err := Message(s.topic, st, s.instance)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	if err := s.w.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("write %d proxy states: %w", len(msgs), err)
	}
	s.m.written.Add(float64(len(msgs)))
	return nil
}

// Load reads the state topic to the end it has now and folds it into the
// pool; it returns how many records were applied. Bound it with ctx.
func (s *Store) Load(ctx context.Context) (int, error) {
	n := 0
	err := kafkaio.ReadToEnd(ctx, s.kafka, s.topic, kafkaio.ReadOptions{}, func(m kafka.Message) {
		if s.apply(m) {
			n++
		}
	})
	if err != nil {
		return n, fmt.Errorf("load proxy states: %w", err)
	}
	return n, nil
}

// Follow folds the state topic into the pool, from its start, until ctx is
// done (nil) or reading fails.
func (s *Store) Follow(ctx context.Context) error {
	if err := kafkaio.Follow(ctx, s.kafka, s.topic, func(m kafka.Message) { s.apply(m) }); err != nil {
		return fmt.Errorf("follow proxy states: %w", err)
	}
	return nil
}

func (s *Store) apply(m kafka.Message) bool {
	if header(m, WriterHeader) == s.instance {
		return false // applied before it was written
	}
	st, err := Decode(m)
	if err != nil {
		s.m.bad.Inc()
		s.log.Warn("undecodable proxy state skipped", telemetry.Partition(m.Partition), telemetry.Offset(m.Offset), zap.Error(err))
		return false
	}
	if !s.pool.ApplyState(st) {
		return false
	}
	s.m.applied.Inc()
	return true
}

// Message encodes st as a record of topic written by instance.
func Message(topic string, st pool.State, instance string) (kafka.Message, error) {
	headers := []kafka.Header{
		{Key: crawlmsg.SchemaHeader, Value: []byte(schema)},
		{Key: WriterHeader, Value: []byte(instance)},
		{Key: VersionHeader, Value: []byte(strconv.FormatUint(st.Version, 10))},
	}
	if st.Gone && !st.Banned {
		return kafka.Message{Topic: topic, Key: []byte(st.ID), Headers: headers}, nil
	}
	ps := &crawlv1.ProxyState{Id: st.ID, Version: st.Version, Writer: instance}
	if st.Gone {
		ps.Banned, ps.Evicted = true, true
	} else {
		s := st.Status
		ps.Url = s.Entry.URL()
		ps.Harvested = st.Harvested
		ps.Checked, ps.Alive, ps.Outcome, ps.Error = s.Checked, s.Alive, s.Outcome, s.Error
		ps.LatencyUs, ps.LatencyEwmaS = s.Latency.Microseconds(), st.LatencyEWMA
		if !s.CheckedAt.IsZero() {
			ps.CheckedAt = timestamppb.New(s.CheckedAt)
		}
		ps.Score, ps.Success, ps.Failures, ps.Banned = s.Score, s.Success, int32(s.Failures), s.Banned
		ps.BlockedHosts, ps.Feedback, ps.Anonymity = st.BlockedHosts, int64(s.Feedback), s.Anonymity
	}
	value, _, err := crawlmsg.Marshal(ps)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode proxy state %s: %w", st.ID, err)
	}
	return kafka.Message{Topic: topic, Key: []byte(st.ID), Value: value, Headers: headers}, nil
}

// ErrBadState reports a record that is no usable proxy state.
var ErrBadState = errors.New("bad proxy state")

// Decode decodes a record of the state topic.
func Decode(m kafka.Message) (pool.State, error) {
	id := string(m.Key)
	if m.Value == nil {
		v, err := strconv.ParseUint(header(m, VersionHeader), 10, 64)
		if err != nil {
			return pool.State{}, fmt.Errorf("proxy state tombstone %s: version: %w", id, ErrBadState)
		}
		return pool.State{ID: id, Version: v, Gone: true}, nil
	}
	var ps crawlv1.ProxyState
	if err := kafkaio.Decode(m, &ps); err != nil {
		return pool.State{}, err
	}
	if ps.GetId() != id {
		return pool.State{}, fmt.Errorf("proxy state keyed %s holds %s: %w", id, ps.GetId(), ErrBadState)
	}
	if ps.GetEvicted() {
		return pool.State{ID: id, Version: ps.GetVersion(), Gone: true, Banned: true}, nil
	}
	e, ok, err := proxylist.ParseLine(ps.GetUrl())
	if err != nil || !ok || e.ID() != id {
		return pool.State{}, fmt.Errorf("proxy state %s: url does not match its id: %w", id, ErrBadState)
	}
	hosts := ps.GetBlockedHosts()
	if len(hosts) > 1000 {
		hosts = hosts[:1000]
	}
	sort.Strings(hosts)
	st := pool.State{
		ID: id, Version: ps.GetVersion(), Harvested: ps.GetHarvested(),
		LatencyEWMA: ps.GetLatencyEwmaS(), BlockedHosts: hosts,
		Status: pool.Status{
			Entry: e, Alive: ps.GetAlive(), Checked: ps.GetChecked(), Outcome: ps.GetOutcome(), Error: ps.GetError(),
			Latency: microseconds(ps.GetLatencyUs()), Score: ps.GetScore(), Success: ps.GetSuccess(),
			Failures: int(ps.GetFailures()), Banned: ps.GetBanned(), BlockedHosts: len(hosts),
			Feedback: int(ps.GetFeedback()), Anonymity: ps.GetAnonymity(),
		},
	}
	if ps.GetCheckedAt() != nil {
		st.Status.CheckedAt = ps.GetCheckedAt().AsTime()
	}
	return st, nil
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func microseconds(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
