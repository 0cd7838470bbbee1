package kafkaio

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReadOptions selects what ReadToEnd reads of each partition.
type ReadOptions struct {
	// Partitions to read, in this order; empty: every partition of the
	// topic, in id order.
	Partitions []int
	// Window, when positive, starts a partition at its first record
	// stamped at most Window before its last record, instead of its
	// first offset: "what was produced lately", measured from the last
	// record rather than from now (nothing may have been produced for a
	// long time).
	Window time.Duration
	// MaxRecords, when positive, reads at most the last MaxRecords
	// records of a partition.
	MaxRecords int64
}

// readToEndMaxWait is how long a fetch of ReadToEnd waits at the broker:
// the records up to the end exist, so it never waits for new ones.
const readToEndMaxWait = 100 * time.Millisecond

// ReadToEnd reads partitions of topic up to their end as observed at the
// call (the high watermark then), without a consumer group and without
// committing, and returns once every partition is read: the way to load a
// compacted state topic (the fetcher's host states: the last record of a
// key is its state, a tombstone its deletion) or the recent records of any
// topic. fn is called for every record in offset order, one partition
// after the other, tombstones (nil Value) included; it runs on the
// calling goroutine. Records produced after the call are not read. An
// empty partition calls fn for nothing. Errors are returned as they come
// (no retry): the caller decides what a failed load costs.
func ReadToEnd(ctx context.Context, c Config, topic string, o ReadOptions, fn func(kafka.Message)) error {
	client, closeClient, sec, err := newClient(c)
	if err != nil {
		return err
	}
	defer closeClient()
	ids := o.Partitions
	if len(ids) == 0 {
		if ids, err = partitionsOf(ctx, client, topic); err != nil {
			return sec.classify(err)
		}
	}
	for _, id := range ids {
		if err := readPartitionToEnd(ctx, c, sec, client, topic, id, o, fn); err != nil {
			return err
		}
	}
	return nil
}

func readPartitionToEnd(ctx context.Context, c Config, sec security, client *kafka.Client, topic string, partition int, o ReadOptions, fn func(kafka.Message)) error {
	first, end, err := partitionBounds(ctx, client, topic, partition)
	if err != nil {
		return err
	}
	if end <= first {
		return nil
	}
	rd := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   c.Brokers,
		Dialer:    sec.dialer(),
		Topic:     topic,
		Partition: partition,
		MinBytes:  1,
		MaxBytes:  c.MaxMessageBytes,
		MaxWait:   readToEndMaxWait,
	})
	defer func() { _ = rd.Close() }() // a reader of a finished read: nothing to flush
	fetchAt := func(offset int64) (kafka.Message, error) {
		if err := rd.SetOffset(offset); err != nil {
			return kafka.Message{}, fmt.Errorf("seek %s partition %d: %w", topic, partition, err)
		}
		msg, err := rd.FetchMessage(ctx)
		if err != nil {
			return kafka.Message{}, fmt.Errorf("read %s partition %d: %w", topic, partition, err)
		}
		return msg, nil
	}
	start := first
	var msg kafka.Message
	fetched := false // msg is the record at end-1
	if o.Window > 0 {
		if msg, err = fetchAt(end - 1); err != nil {
			return err
		}
		fetched, start = true, end-1
		at, err := offsetAtTime(ctx, client, topic, partition, msg.Time.Add(-o.Window))
		if err != nil {
			return err
		}
		if at >= 0 {
			start = min(at, start)
		}
	}
	if o.MaxRecords > 0 {
		start = max(start, end-o.MaxRecords)
	}
	start = max(start, first)
	if !fetched || start < end-1 {
		if msg, err = fetchAt(start); err != nil {
			return err
		}
	}
	for {
		fn(msg)
		if msg.Offset >= end-1 {
			return nil
		}
		if msg, err = rd.FetchMessage(ctx); err != nil {
			return fmt.Errorf("read %s partition %d: %w", topic, partition, err)
		}
	}
}

// partitionBounds returns the first and end offsets of partition.
func partitionBounds(ctx context.Context, client *kafka.Client, topic string, partition int) (first, end int64, err error) {
	p, err := listPartitionOffsets(ctx, client, topic, partition, kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition))
	if err != nil {
		return 0, 0, err
	}
	return p.FirstOffset, p.LastOffset, nil
}

// offsetAtTime returns the offset of the first record of partition stamped
// at or after t, -1 when there is none.
func offsetAtTime(ctx context.Context, client *kafka.Client, topic string, partition int, t time.Time) (int64, error) {
	p, err := listPartitionOffsets(ctx, client, topic, partition, kafka.TimeOffsetOf(partition, t))
	if err != nil {
		return 0, err
	}
	for off := range p.Offsets { // one entry, unless no record qualifies
		if off >= 0 {
			return off, nil
		}
	}
	return -1, nil
}

func listPartitionOffsets(ctx context.Context, client *kafka.Client, topic string, partition int, reqs ...kafka.OffsetRequest) (kafka.PartitionOffsets, error) {
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", topic, partition, err)
	}
	for _, p := range res.Topics[topic] {
		if p.Partition != partition {
			continue
		}
		if p.Error != nil {
			return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", topic, partition, p.Error)
		}
		return p, nil
	}
	return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", topic, partition, kafka.UnknownTopicOrPartition)
}
