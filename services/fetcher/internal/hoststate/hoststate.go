// Package hoststate persists the fetcher's per-host politeness state in the
// compacted host-state topic (keyed by politeness key, so partition p holds
// the hosts of partition p of the URL topics) and loads a partition's state
// when the partition is assigned.
package hoststate

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// Message returns the host-state record of host.
func Message(topic, host, instance string, st politeness.HostState, now time.Time) (kafka.Message, error) {
	m, err := kafkaio.NewMessage(topic, []byte(host), &crawlv1.HostPoliteness{
		Host:         host,
		NextAllowed:  timestamppb.New(st.Next),
		DelayMs:      st.Delay.Milliseconds(),
		BackoffLevel: uint32(max(st.BackoffLevel, 0)),
		UpdatedAt:    timestamppb.New(now),
		Fetcher:      instance,
	})
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode host state: %w", err)
	}
	return m, nil
}

// Loader reads host states from the broker.
type Loader struct {
	cfg   kafkaio.Config
	topic string
}

// NewLoader returns a Loader of topic.
func NewLoader(c kafkaio.Config, topic string) *Loader { return &Loader{cfg: c, topic: topic} }

// Load reads partition of the topic from its start up to the high
// watermark observed at the call (kafkaio.ReadToEnd) and returns the last
// state of every host (tombstones and undecodable records drop a host).
func (l *Loader) Load(ctx context.Context, partition int) (map[string]politeness.HostState, error) {
	out := map[string]politeness.HostState{}
	err := kafkaio.ReadToEnd(ctx, l.cfg, l.topic, kafkaio.ReadOptions{Partitions: []int{partition}}, func(msg kafka.Message) {
		apply(out, msg)
	})
	if err != nil {
		return nil, fmt.Errorf("load host states: %w", err)
	}
	return out, nil
}

func apply(out map[string]politeness.HostState, msg kafka.Message) {
	if msg.Value == nil {
		delete(out, string(msg.Key))
		return
	}
	hp := &crawlv1.HostPoliteness{}
	if err := kafkaio.Decode(msg, hp); err != nil || hp.GetHost() == "" {
		delete(out, string(msg.Key))
		return
	}
	out[hp.GetHost()] = politeness.HostState{
		Next:         hp.GetNextAllowed().AsTime(),
		Delay:        time.Duration(hp.GetDelayMs()) * time.Millisecond,
		BackoffLevel: int(hp.GetBackoffLevel()),
	}
}
