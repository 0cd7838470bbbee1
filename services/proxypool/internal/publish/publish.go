// Package publish writes pool changes to the compacted proxies topic: a
// crawlv1.Proxy record keyed by proxy id for a live proxy, a tombstone (nil
// value) for a removed one.
package publish

import (
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
)

// Writer produces records; *kafkaio.Writer implements it. Write blocks until
// every record is acknowledged. Safe for concurrent use.
type Writer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// proxySchema is the schema header of both records and tombstones, so a
// follower can tell a Proxy tombstone from a foreign record.
var proxySchema = crawlmsg.SchemaOf(&crawlv1.Proxy{})

// Publisher publishes pool changes to one topic.
type Publisher struct {
	w     Writer
	topic string
}

// New returns a publisher writing to topic through w.
func New(w Writer, topic string) *Publisher { return &Publisher{w: w, topic: topic} }

// Publish writes changes in one acknowledged batch.
func (p *Publisher) Publish(ctx context.Context, changes []pool.Change) error {
	if len(changes) == 0 {
		return nil
	}
	msgs := make([]kafka.Message, 0, len(changes))
	for _, c := range changes {
		m, err := p.message(c)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	if err := p.w.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d proxy records: %w", len(msgs), err)
	}
	return nil
}

func (p *Publisher) message(c pool.Change) (kafka.Message, error) {
	key := []byte(c.ID)
	if c.Delete {
		return kafka.Message{
			Topic:   p.topic,
			Key:     key,
			Value:   nil,
			Headers: []kafka.Header{{Key: crawlmsg.SchemaHeader, Value: []byte(proxySchema)}},
		}, nil
	}
	st := c.Status
	m, err := kafkaio.NewMessage(p.topic, key, &crawlv1.Proxy{
		Id:        c.ID,
		Url:       st.Entry.URL(),
		CheckedAt: timestamppb.New(st.CheckedAt),
		LatencyUs: st.Latency.Microseconds(),
		Score:     st.Score,
	})
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode proxy %s: %w", c.ID, err)
	}
	return m, nil
}
