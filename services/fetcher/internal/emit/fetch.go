package emit

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
)

// Requests put back on the fetch topic, and the headers of its records.

// deferredHeader marks a fetch request produced again by a deferral.
const deferredHeader = "trawl-deferred"

// Defer returns the record that puts t back on the fetch topic, due at
// notBefore, marked as deferred (WasDeferred). It is a copy of req, t's
// request (partition.Task.Request): t's priority and reason, raised or
// not.
func (e *Encoder) Defer(t *partition.Task, req *crawlv1.FetchRequest, notBefore time.Time) (kafka.Message, error) {
	m, err := e.again(t, req, notBefore)
	if err != nil {
		return kafka.Message{}, err
	}
	m.Headers = append(m.Headers, kafka.Header{Key: deferredHeader, Value: []byte("1")})
	return m, nil
}

// Hold returns the record that holds t of a paused crawl: the same
// request req due at at (decide.Limits.HoldUntil), without the deferral
// mark, so that it is checked again at intake.
func (e *Encoder) Hold(t *partition.Task, req *crawlv1.FetchRequest, at time.Time) (kafka.Message, error) {
	return e.again(t, req, at)
}

// again is the record of a copy of req due at notBefore, keyed by t's host.
func (e *Encoder) again(t *partition.Task, req *crawlv1.FetchRequest, notBefore time.Time) (kafka.Message, error) {
	req = proto.CloneOf(req)
	req.NotBefore = timestamppb.New(notBefore)
	m, err := kafkaio.NewMessage(e.o.Topics.Fetch, []byte(t.Host), req)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode fetch request: %w", err)
	}
	return m, nil
}

// WasDeferred reports whether msg, a record of the fetch topic, was
// produced by a deferral (Defer).
func WasDeferred(msg kafka.Message) bool {
	_, ok := kafkaio.Header(msg, deferredHeader)
	return ok
}
