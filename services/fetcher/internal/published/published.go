// Package published reads back what fetchers published lately to one
// partition of the fetched topic, for a fetcher newly assigned the
// partition: an attempt whose FetchedPage is there was fetched and its
// whole outcome published (the recorder produces a FetchedPage only after
// the rest of its outcome), even when its fetcher died before the attempt's
// fetch-log row was inserted, up to the ClickHouse flush interval after the
// page. Without it, the new owner would fetch such an attempt again.
package published

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// FetcherHeader is the header of a FetchedPage record that names the
// fetcher instance that made the request.
const FetcherHeader = "trawl-fetcher"

// Page is one FetchedPage read back.
type Page struct {
	Page    *crawlv1.FetchedPage // without its body
	Host    string               // the record's key: the URL's politeness key
	Fetcher string               // FetcherHeader, "" when absent
}

// DefaultMaxRecords bounds the records one Recent call reads.
const DefaultMaxRecords = 50_000

// Reader reads the recent pages of a partition. Safe for concurrent use.
type Reader struct {
	cfg        kafkaio.Config
	topic      string
	window     time.Duration
	maxRecords int64
}

// NewReader returns a Reader of topic (the fetched topic) that reads the
// records produced within window before a partition's last record, at most
// maxRecords of them (DefaultMaxRecords when not positive).
func NewReader(c kafkaio.Config, topic string, window time.Duration, maxRecords int) *Reader {
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	return &Reader{cfg: c, topic: topic, window: window, maxRecords: int64(maxRecords)}
}

// Recent returns the pages produced to partition within the window before
// its last record, in offset order (undecodable records skipped). The
// window is measured back from the last record rather than from now: the
// previous owner may have died long before the partition came back, and
// nothing was produced to it in between.
func (r *Reader) Recent(ctx context.Context, partition int) ([]Page, error) {
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(r.cfg.Brokers...), Timeout: 10 * time.Second, Transport: tr}
	first, end, err := r.bounds(ctx, client, partition)
	if err != nil {
		return nil, err
	}
	if end <= first {
		return nil, nil
	}
	rd := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   r.cfg.Brokers,
		Topic:     r.topic,
		Partition: partition,
		MinBytes:  1,
		MaxBytes:  r.cfg.MaxMessageBytes,
		MaxWait:   100 * time.Millisecond,
	})
	defer rd.Close()
	last, err := r.fetchAt(ctx, rd, end-1)
	if err != nil {
		return nil, err
	}
	start := end - 1
	if r.window > 0 {
		at, err := r.offsetAt(ctx, client, partition, last.Time.Add(-r.window))
		if err != nil {
			return nil, err
		}
		if at >= 0 {
			start = min(at, start)
		}
	}
	start = max(start, first, end-r.maxRecords)
	out := make([]Page, 0, end-start)
	msg := last
	if start < end-1 {
		if msg, err = r.fetchAt(ctx, rd, start); err != nil {
			return nil, err
		}
	}
	for {
		if p, ok := decode(msg); ok {
			out = append(out, p)
		}
		if msg.Offset >= end-1 {
			return out, nil
		}
		if msg, err = rd.FetchMessage(ctx); err != nil {
			return nil, fmt.Errorf("read %s partition %d: %w", r.topic, partition, err)
		}
	}
}

// fetchAt reads the record at offset.
func (r *Reader) fetchAt(ctx context.Context, rd *kafka.Reader, offset int64) (kafka.Message, error) {
	if err := rd.SetOffset(offset); err != nil {
		return kafka.Message{}, fmt.Errorf("seek %s partition %d: %w", r.topic, rd.Config().Partition, err)
	}
	msg, err := rd.FetchMessage(ctx)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("read %s partition %d: %w", r.topic, rd.Config().Partition, err)
	}
	return msg, nil
}

// bounds returns the first and end offsets of partition.
func (r *Reader) bounds(ctx context.Context, client *kafka.Client, partition int) (first, end int64, err error) {
	p, err := r.list(ctx, client, partition, kafka.FirstOffsetOf(partition), kafka.LastOffsetOf(partition))
	if err != nil {
		return 0, 0, err
	}
	return p.FirstOffset, p.LastOffset, nil
}

// offsetAt returns the offset of the first record of partition stamped at
// or after t, -1 when there is none.
func (r *Reader) offsetAt(ctx context.Context, client *kafka.Client, partition int, t time.Time) (int64, error) {
	p, err := r.list(ctx, client, partition, kafka.TimeOffsetOf(partition, t))
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

func (r *Reader) list(ctx context.Context, client *kafka.Client, partition int, reqs ...kafka.OffsetRequest) (kafka.PartitionOffsets, error) {
	res, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{r.topic: reqs}})
	if err != nil {
		return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", r.topic, partition, err)
	}
	for _, p := range res.Topics[r.topic] {
		if p.Partition != partition {
			continue
		}
		if p.Error != nil {
			return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", r.topic, partition, p.Error)
		}
		return p, nil
	}
	return kafka.PartitionOffsets{}, fmt.Errorf("list offsets of %s partition %d: %w", r.topic, partition, kafka.UnknownTopicOrPartition)
}

// decode returns the page of msg without its body.
func decode(msg kafka.Message) (Page, bool) {
	pg := &crawlv1.FetchedPage{}
	if err := kafkaio.Decode(msg, pg); err != nil || pg.GetUrl() == "" {
		return Page{}, false
	}
	pg.Body, pg.Headers = nil, nil
	p := Page{Page: pg, Host: string(msg.Key)}
	for _, h := range msg.Headers {
		if h.Key == FetcherHeader {
			p.Fetcher = string(h.Value)
		}
	}
	return p, true
}
