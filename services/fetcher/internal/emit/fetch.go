package emit

import (
	"fmt"
	"strconv"
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

// dueHeader, on a deferred copy whose not_before only estimates when its
// host's full queue drains, is the request's own not_before (Unix
// nanoseconds in decimal, 0 for none): read again, the copy is due by
// decide.Redue, never before it.
const dueHeader = "trawl-due"

// Defer returns the record that puts t back on the fetch topic, due at
// notBefore, marked as deferred (WasDeferred). It is a copy of req, t's
// request (partition.Task.Request): t's priority and reason, raised or
// not.
//
// With estimated, notBefore only estimates when the host's full queue
// drains (partition.Deferral.Estimated), and the record carries t's own
// not_before beside it (Due).
func (e *Encoder) Defer(t *partition.Task, req *crawlv1.FetchRequest, notBefore time.Time, estimated bool) (kafka.Message, error) {
	m, err := e.again(t, req, notBefore)
	if err != nil {
		return kafka.Message{}, err
	}
	m.Headers = append(m.Headers, kafka.Header{Key: deferredHeader, Value: []byte("1")})
	if estimated {
		m.Headers = append(m.Headers, kafka.Header{Key: dueHeader, Value: strconv.AppendInt(nil, t.OwnNotBefore(), 10)})
	}
	return m, nil
}

// Due reports the own not_before (Unix nanoseconds, 0 for none) of a
// deferred copy whose not_before is an estimate, and whether msg is one.
// A value that does not parse counts as no estimate: the not_before is
// then kept as the request's own, as before the header existed.
func Due(msg kafka.Message) (int64, bool) {
	v, ok := kafkaio.Header(msg, dueHeader)
	if !ok {
		return 0, false
	}
	own, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || own < 0 {
		return 0, false
	}
	return own, true
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
