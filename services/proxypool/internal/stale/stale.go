// Package stale finds the proxies a previous run left live on the compacted
// proxies topic: it reads the topic from its start to the end it has when
// reading begins and returns the ids whose latest record is not a
// tombstone. The refresh loop tombstones those it does not track.
package stale

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// ErrIncomplete is returned when ctx ends before the topic was read to its
// end.
var ErrIncomplete = errors.New("proxies topic not read to its end")

// LiveIDs reads topic (compacted, keyed by proxy id) up to the end offsets
// it has at the call and returns, sorted, the ids whose latest record has a
// value. Bound it with ctx.
func LiveIDs(ctx context.Context, c kafkaio.Config, topic string) ([]string, error) {
	parts, err := kafkaio.GroupOffsets(ctx, c, c.GroupFor("proxypool"), topic)
	if err != nil {
		return nil, fmt.Errorf("read proxies topic offsets: %w", err)
	}
	pending := make(map[int]int64, len(parts))
	for _, p := range parts {
		if p.End > p.First {
			pending[p.Partition] = p.End
		}
	}
	live := make(map[string]bool)
	if len(pending) > 0 {
		fctx, cancel := context.WithCancel(ctx)
		defer cancel()
		err = kafkaio.Follow(fctx, c, topic, func(m kafka.Message) {
			// Calls are serialized by kafkaio.Follow.
			end, ok := pending[m.Partition]
			if !ok || m.Offset >= end {
				return // beyond the end this read is about
			}
			if m.Value == nil {
				delete(live, string(m.Key))
			} else {
				live[string(m.Key)] = true
			}
			if m.Offset+1 >= end || (m.HighWaterMark > 0 && m.Offset+1 >= m.HighWaterMark) {
				delete(pending, m.Partition)
				if len(pending) == 0 {
					cancel()
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("read proxies topic: %w", err)
		}
		if len(pending) > 0 {
			return nil, fmt.Errorf("read proxies topic: %w", ErrIncomplete)
		}
	}
	ids := make([]string, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}
