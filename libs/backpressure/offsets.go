package backpressure

import (
	"context"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// GroupReader reads a consumer group's offsets on a topic
// (*kafkaio.OffsetReader). Safe for concurrent use; blocks on the broker.
type GroupReader interface {
	GroupOffsets(ctx context.Context, groupID, topic string) ([]kafkaio.PartitionOffsets, error)
}

// GroupOffsets returns the Offsets of consumer group groupID on topic,
// read through r: the records produced to topic and those the group
// committed, summed over the partitions (Progress).
func GroupOffsets(r GroupReader, groupID, topic string) Offsets {
	return func(ctx context.Context) (produced, taken int64, err error) {
		parts, err := r.GroupOffsets(ctx, groupID, topic)
		if err != nil {
			return 0, 0, err
		}
		produced, taken = Progress(parts)
		return produced, taken, nil
	}
}

// Progress sums the records produced to a topic's partitions and those
// its group committed. A group that never committed anything is no next
// stage (a fleet of fetchers alone, archiving to WARC) or one that has not
// finished its first batch yet: it holds nothing back (taken is produced),
// and its lag counts once it commits.
func Progress(parts []kafkaio.PartitionOffsets) (produced, taken int64) {
	committed := false
	for _, p := range parts {
		produced += p.End
		taken += max(p.Committed, p.First)
		committed = committed || p.Committed >= 0
	}
	if !committed {
		return produced, produced
	}
	return produced, taken
}
