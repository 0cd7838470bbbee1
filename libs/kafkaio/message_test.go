package kafkaio_test

import (
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// TestHeader: a record's header by name, the first of two, and none; the
// schema header of an encoded record names its message.
func TestHeader(t *testing.T) {
	msg := kafka.Message{Headers: []kafka.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}, {Key: "empty"}}}
	if v, ok := kafkaio.Header(msg, "a"); !ok || v != "1" {
		t.Errorf("Header(a) = %q, %v, want the first, 1", v, ok)
	}
	if v, ok := kafkaio.Header(msg, "empty"); !ok || v != "" {
		t.Errorf("Header(empty) = %q, %v, want an empty value that is there", v, ok)
	}
	if _, ok := kafkaio.Header(msg, "b"); ok {
		t.Error("Header(b) found a header the record has not")
	}
	m, err := kafkaio.NewMessage("fetch", []byte("k"), &crawlv1.FetchRequest{Url: "http://a/"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kafkaio.Schema(m), crawlmsg.SchemaOf(&crawlv1.FetchRequest{}); got != want {
		t.Errorf("Schema = %q, want %q", got, want)
	}
	if kafkaio.Schema(msg) != "" {
		t.Error("Schema of a record without the header is not empty")
	}
}
