package kafkaio

import (
	"fmt"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/bufpool"
	"github.com/trawl-crawler/trawl/libs/crawlmsg"
)

// NewMessage encodes m into a record for topic with the given key and the
// crawlmsg schema header.
func NewMessage(topic string, key []byte, m proto.Message) (kafka.Message, error) {
	value, schema, err := crawlmsg.Marshal(m)
	return record(topic, key, value, schema, err)
}

// record is the record of an encoded message, or the encoding's error.
func record(topic string, key, value []byte, schema string, err error) (kafka.Message, error) {
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

// NewPooledMessage is NewMessage with the value encoded into a bufpool
// buffer, for records carrying pages: once the record is produced the
// buffer goes back to the pool with Recycle, and the next page's record
// is encoded into it instead of a new allocation.
func NewPooledMessage(topic string, key []byte, m proto.Message) (kafka.Message, error) {
	value, schema, err := crawlmsg.MarshalAppend(bufpool.Get(proto.Size(m)), m)
	return record(topic, key, value, schema, err)
}

// Recycle gives the values of msgs back to the buffer pool. Call it only
// once Writer.Write returned nil for them (a write abandoned with its
// context may still be reading them), and hold no other reference to the
// values: the next NewPooledMessage may overwrite them.
func Recycle(msgs []kafka.Message) {
	for i := range msgs {
		bufpool.Put(msgs[i].Value)
		msgs[i].Value = nil
	}
}

// Decode decodes the record value into m, checking the schema header (a
// record without the header is accepted, see crawlmsg.Unmarshal). A header
// naming another type wraps crawlmsg.ErrSchemaMismatch.
func Decode(msg kafka.Message, m proto.Message) error {
	if err := crawlmsg.Unmarshal(msg.Value, Schema(msg), m); err != nil {
		return fmt.Errorf("decode record %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	return nil
}

// DecodeAliasing is Decode leaving the bytes field numbered field of m in
// the record's value (crawlmsg.UnmarshalAliasing): a page's body is not
// copied out of its record. The value must not change while m is in use.
func DecodeAliasing(msg kafka.Message, m proto.Message, field protowire.Number) error {
	if err := crawlmsg.UnmarshalAliasing(msg.Value, Schema(msg), m, field); err != nil {
		return fmt.Errorf("decode record %s/%d@%d: %w", msg.Topic, msg.Partition, msg.Offset, err)
	}
	return nil
}

// Schema is the record's schema header (crawlmsg.SchemaHeader), "" when
// it has none.
func Schema(msg kafka.Message) string {
	v, _ := Header(msg, crawlmsg.SchemaHeader)
	return v
}

// Header returns the value of the record's first header named key, and
// whether it has one.
func Header(msg kafka.Message, key string) (string, bool) {
	for _, h := range msg.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// DropPayloads clears the batch's keys, values and headers in place,
// leaving the topic, partition and offset that acking needs: a handler
// calls it once it has decoded what it needs and before it waits on I/O,
// so that the records (pages of up to megabytes, or what a decoded page's
// body still refers into) are not held meanwhile. The batch then serves as
// its own AckRefs.
func DropPayloads(batch []kafka.Message) {
	for i := range batch {
		batch[i].Key, batch[i].Value, batch[i].Headers = nil, nil, nil
	}
}

// AckRefs returns what acking the batch's records needs (their topic,
// partition and offset), without their keys, values and headers: a
// handler that acks a batch after its work is durable keeps these, so the
// records' payloads (pages of up to megabytes) are not held meanwhile.
func AckRefs(batch []kafka.Message) []kafka.Message {
	out := make([]kafka.Message, len(batch))
	for i, m := range batch {
		out[i] = AckRef(m)
	}
	return out
}

// AckRef is AckRefs for one record: its topic, partition and offset.
func AckRef(m kafka.Message) kafka.Message {
	return kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}
}
