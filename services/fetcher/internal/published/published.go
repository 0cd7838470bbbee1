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

// ReadTimeout bounds one Recent call: the read back is an optimization
// that holds up a newly assigned partition, and a broker that stops
// answering (or a read that stops progressing) must cost its caller a
// redelivered attempt fetched again, not the partition.
const ReadTimeout = 30 * time.Second

// Reader reads the recent pages of a partition. Safe for concurrent use.
type Reader struct {
	cfg        kafkaio.Config
	topic      string
	window     time.Duration
	maxRecords int64
	timeout    time.Duration // ReadTimeout
}

// NewReader returns a Reader of topic (the fetched topic) that reads the
// records produced within window before a partition's last record, at most
// maxRecords of them (DefaultMaxRecords when not positive).
func NewReader(c kafkaio.Config, topic string, window time.Duration, maxRecords int) *Reader {
	if maxRecords <= 0 {
		maxRecords = DefaultMaxRecords
	}
	return &Reader{cfg: c, topic: topic, window: window, maxRecords: int64(maxRecords), timeout: ReadTimeout}
}

// Recent returns the pages produced to partition within the window before
// its last record, in offset order (undecodable records skipped). The
// window is measured back from the last record rather than from now: the
// previous owner may have died long before the partition came back, and
// nothing was produced to it in between. Without a window only the last
// record is read. It gives up after ReadTimeout.
func (r *Reader) Recent(ctx context.Context, partition int) ([]Page, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	o := kafkaio.ReadOptions{Partitions: []int{partition}, Window: r.window, MaxRecords: r.maxRecords}
	if r.window <= 0 {
		o.MaxRecords = 1
	}
	var out []Page
	err := kafkaio.ReadToEnd(ctx, r.cfg, r.topic, o, func(msg kafka.Message) {
		if p, ok := decode(msg); ok {
			out = append(out, p)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read back fetched pages: %w", err)
	}
	return out, nil
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
