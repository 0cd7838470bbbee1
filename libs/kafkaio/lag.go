package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/backoff"
)

// partitionsOf returns the partition ids of topic.
func partitionsOf(ctx context.Context, client *kafka.Client, topic string) ([]int, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("read metadata of %s: %w", topic, err)
	}
	for _, t := range meta.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("read metadata of %s: %w", topic, t.Error)
		}
		ids := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			ids[i] = p.ID
		}
		return ids, nil
	}
	return nil, fmt.Errorf("read metadata of %s: %w", topic, kafka.UnknownTopicOrPartition)
}

// PartitionOffsets is the position of a consumer group in one partition.
type PartitionOffsets struct {
	Partition int
	First     int64 // log start offset
	End       int64 // high watermark: offset of the next record produced
	Committed int64 // the group's committed offset, -1 when none
}

// Lag is the records the group still has to consume: End minus the
// committed offset, or minus First when nothing was committed.
func (p PartitionOffsets) Lag() int64 {
	from := p.Committed
	if from < p.First {
		from = p.First
	}
	return max(p.End-from, 0)
}

// GroupOffsets returns, for every partition of topic, its first and end
// offsets and the committed offset of group groupID.
func GroupOffsets(ctx context.Context, c Config, groupID, topic string) ([]PartitionOffsets, error) {
	r, err := NewOffsetReader(c)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.GroupOffsets(ctx, groupID, topic)
}

// OffsetReader reads groups' offsets over connections it keeps open
// between reads: a monitor that polls three groups every second would
// otherwise dial three connections a second (GroupOffsets opens and
// closes its own). Safe for concurrent use; Close releases the
// connections.
type OffsetReader struct {
	client *kafka.Client
	close  func()
	sec    security
}

// NewOffsetReader returns a reader of c's cluster. It connects on first
// use.
func NewOffsetReader(c Config) (*OffsetReader, error) {
	client, closeClient, sec, err := newClient(c)
	if err != nil {
		return nil, err
	}
	return &OffsetReader{client: client, close: closeClient, sec: sec}, nil
}

// Close closes the reader's idle connections.
func (r *OffsetReader) Close() { r.close() }

// Lag is the package's Lag over the reader's connections.
func (r *OffsetReader) Lag(ctx context.Context, groupID, topic string) (int64, error) {
	parts, err := r.GroupOffsets(ctx, groupID, topic)
	if err != nil {
		return 0, fmt.Errorf("measure lag: %w", err)
	}
	var lag int64
	for _, p := range parts {
		lag += p.Lag()
	}
	return lag, nil
}

// GroupOffsets is the package's GroupOffsets over the reader's
// connections.
func (r *OffsetReader) GroupOffsets(ctx context.Context, groupID, topic string) ([]PartitionOffsets, error) {
	client, sec := r.client, r.sec
	ids, err := partitionsOf(ctx, client, topic)
	if err != nil {
		return nil, sec.classify(err)
	}
	fetched, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: groupID, Topics: map[string][]int{topic: ids}})
	if err != nil {
		return nil, fmt.Errorf("fetch offsets of group %s: %w", groupID, err)
	}
	committed := make(map[int]int64, len(ids))
	switch {
	case errors.Is(fetched.Error, kafka.GroupIdNotFound):
		// Some brokers (kfake) answer so for a group that never
		// committed; Kafka answers -1 offsets. Both mean no commits.
		fetched.Topics = nil
	case fetched.Error != nil:
		return nil, fmt.Errorf("fetch offsets of group %s: %w", groupID, fetched.Error)
	}
	for _, p := range fetched.Topics[topic] {
		if errors.Is(p.Error, kafka.GroupIdNotFound) {
			continue
		}
		if p.Error != nil {
			return nil, fmt.Errorf("fetch offset of group %s partition %d: %w", groupID, p.Partition, p.Error)
		}
		committed[p.Partition] = p.CommittedOffset
	}

	reqs := make([]kafka.OffsetRequest, 0, 2*len(ids))
	for _, id := range ids {
		reqs = append(reqs, kafka.FirstOffsetOf(id), kafka.LastOffsetOf(id))
	}
	listed, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	bounds := make(map[int]kafka.PartitionOffsets, len(ids))
	for _, p := range listed.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("list offsets of %s partition %d: %w", topic, p.Partition, p.Error)
		}
		bounds[p.Partition] = p
	}

	out := make([]PartitionOffsets, 0, len(ids))
	for _, id := range ids {
		b, ok := bounds[id]
		if !ok {
			return nil, fmt.Errorf("list offsets of %s: partition %d missing", topic, id)
		}
		com, ok := committed[id]
		if !ok {
			com = -1
		}
		out = append(out, PartitionOffsets{Partition: id, First: b.FirstOffset, End: b.LastOffset, Committed: com})
	}
	return out, nil
}

// Lag returns, for group groupID, the sum over the topic's partitions of
// (high watermark - committed offset); a partition without a commit counts
// from its first offset. Used by the launcher to detect a drained crawl.
func Lag(ctx context.Context, c Config, groupID, topic string) (int64, error) {
	r, err := NewOffsetReader(c)
	if err != nil {
		return 0, fmt.Errorf("measure lag: %w", err)
	}
	defer r.Close()
	return r.Lag(ctx, groupID, topic)
}

// Follow reads every partition of topic from the first offset and keeps
// following it without a consumer group (for compacted state topics such as
// Proxies): fn is called for every record in partition order, tombstones
// (nil Value) included. Calls of fn are serialized (one at a time, across
// partitions), so fn needs no locking of its own. It returns nil when ctx is
// done, or the first read error that retrying cannot cure: a broker that
// is down or restarting, a dropped connection, a leader election are
// waited out (the partition's reader reconnects and resumes at its
// offset), so that a service following a state topic in its run group
// does not exit when the broker restarts.
func Follow(ctx context.Context, c Config, topic string, fn func(kafka.Message)) error {
	client, closeClient, sec, err := newClient(c)
	if err != nil {
		return fmt.Errorf("follow %s: %w", topic, err)
	}
	ids, err := partitionsOf(ctx, client, topic)
	closeClient()
	err = sec.classify(err)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("follow %s: %w", topic, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		fnMu    sync.Mutex
		wg      sync.WaitGroup
		errOnce sync.Once
		readErr error
	)
	for _, id := range ids {
		reader := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   c.Brokers,
			Dialer:    sec.dialer(),
			Topic:     topic,
			Partition: id,
			MinBytes:  1,
			MaxBytes:  c.MaxMessageBytes,
			MaxWait:   fetchMaxWait,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A reader outside a group only reads: nothing to commit or flush.
			defer func() { _ = reader.Close() }()
			if err := reader.SetOffset(kafka.FirstOffset); err != nil {
				errOnce.Do(func() { readErr = fmt.Errorf("follow %s partition %d: %w", topic, id, err) })
				cancel()
				return
			}
			var retry *backoff.Backoff // since the last record read
			for {
				msg, err := reader.FetchMessage(ctx)
				if err != nil && ctx.Err() == nil && isRetryable(err) {
					if retry == nil {
						retry = backoff.New(100*time.Millisecond, 2*time.Second)
					}
					if retry.Wait(ctx) != nil {
						return
					}
					continue
				}
				if err != nil {
					if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
						errOnce.Do(func() { readErr = fmt.Errorf("follow %s partition %d: %w", topic, id, err) })
						cancel()
					}
					return
				}
				retry = nil
				fnMu.Lock()
				fn(msg)
				fnMu.Unlock()
			}
		}()
	}
	wg.Wait()
	return readErr
}
