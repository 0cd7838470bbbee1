package kafkaio

import (
	"fmt"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
)

// NewMessage encodes m into a record for topic with the given key and the
// crawlmsg schema header.
func NewMessage(topic string, key []byte, m proto.Message) (kafka.Message, error) {
	value, schema, err := crawlmsg.Marshal(m)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("new message: %w", err)
	}
	return kafka.Message{
		Topic:   topic,
		Key:     key,
		Value:   value,
		Headers: []kafka.Header{{Key: crawlmsg.SchemaHeader, Value: []byte(schema)}},
	}, nil
}

// Decode decodes the record value into m, checking the schema header (a
// record without the header is accepted, see crawlmsg.Unmarshal). A header
// naming another type wraps crawlmsg.ErrSchemaMismatch.
func Decode(msg kafka.Message, m proto.Message) error {
	var schema string
	for _, h := range msg.Headers {
		if h.Key == crawlmsg.SchemaHeader {
			schema = string(h.Value)
			break
		}
	}
	if err := crawlmsg.Unmarshal(msg.Value, schema, m); err != nil {
		return fmt.Errorf("decode record %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	return nil
}

// AckRefs returns what acking the batch's records needs (their topic,
// partition and offset), without their keys, values and headers: a
// handler that acks a batch after its work is durable keeps these, so the
// records' payloads (pages of up to megabytes) are not held meanwhile.
func AckRefs(batch []kafka.Message) []kafka.Message {
	out := make([]kafka.Message, len(batch))
	for i, m := range batch {
		out[i] = kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
	}
	return out
}
