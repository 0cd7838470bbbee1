package consume

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// Intake: a batch read from the fetch topic becomes tasks, each decided
// by decide.Intake and decide.Place and carried out here.

// Handle queues the batch; records are acked later, when their outcome is
// durable. Undecodable records are logged, counted and acked (poison never
// blocks the partition). A record of a host whose queue is full, or whose
// not_before lies beyond the hold horizon, is deferred: produced again to
// the fetch topic and acked, so memory stays bounded and one giant or
// backed-off host does not stop the partition from reading the others.
// A reprioritize record is not a request: it raises a queued request
// (reprioritize) and is acked at once.
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	now := h.s.opts.Now()
	if len(batch) > 0 {
		h.redelivered.FirstRead(batch[0].HighWaterMark)
	}
	if h.acker == nil {
		// The group's ack is the same for every batch of an assignment;
		// set before any task is queued, so that turns read it after.
		h.acker = ack
	}
	tasks := make([]*partition.Task, 0, len(batch))
	var suspect []*partition.Task
	var raises []raise
	for _, msg := range batch {
		req := &crawlv1.FetchRequest{}
		if err := kafkaio.Decode(msg, req); err != nil {
			h.s.m.poison.Inc()
			h.log.Warn("skipped undecodable fetch request", telemetry.Offset(msg.Offset), zap.Error(err))
			ack(msg)
			continue
		}
		if req.GetReprioritize() {
			// Applied once the batch's requests are queued: a request
			// read in the same batch is raised too.
			raises = append(raises, raise{msg: msg, req: req})
			continue
		}
		hostKey, kerr := kafkaio.Key(req.GetUrl())
		_, oerr := robots.Origin(req.GetUrl())
		t := h.newTask(msg, req, string(hostKey), now)
		if kerr != nil || oerr != nil {
			// The scheduler only admits canonical URLs; record and ack
			// anything else inline (rare).
			t.Req = req
			err := errors.Join(kerr, oerr)
			h.finish(ctx, t, &httpfetch.Response{Start: now, Kind: failure.InvalidURL, Err: err})
			continue
		}
		tasks = append(tasks, t)
		if h.redelivered.Suspect(msg.Offset) {
			suspect = append(suspect, t)
		}
	}
	var recorded map[*partition.Task]bool
	var rebuilt map[*partition.Task]rows.FetchLogRow
	if len(suspect) > 0 {
		var err error
		if recorded, err = h.redelivered.Recorded(ctx, suspect); err != nil {
			return err
		}
		rebuilt = h.redelivered.Published(ctx, suspect, recorded)
	}
	reads := make([]partition.Read, 0, len(tasks))
	noted := "" // the crawl whose robots.txt agent was noted last
	for _, t := range tasks {
		if t.Crawl != noted {
			// robots.txt fetched from now on is compiled for the
			// crawl's product token too: one fetch per origin serves
			// every crawl that reads it (robots.Cache.NoteAgent).
			noted = t.Crawl
			if agent := h.s.settings(t.Crawl).Identity.Agent; agent != "" {
				h.s.robots.NoteAgent(agent)
			}
		}
		_, published := rebuilt[t]
		reads = append(reads, partition.Read{Task: t, Recorded: recorded[t], Published: published,
			State: h.s.crawlState(t.Crawl), Spent: func() bool { return h.s.spent(ctx, t) }})
	}
	ready := h.p.Intake(reads, now)
	for _, t := range ready.Skipped {
		// A previous owner fetched it and recorded the outcome.
		h.s.m.repeatsSkipped.WithLabelValues(skipRecorded).Inc()
		h.ack(t)
	}
	for _, t := range ready.Repeats {
		h.repeat(t)
	}
	for _, r := range raises {
		h.reprioritize(r.msg, r.req)
		ack(r.msg)
	}
	if len(ready.Cancelled) > 0 {
		h.recordCancelled(ctx, ready.Cancelled)
	}
	if len(ready.Spent) > 0 {
		h.recordSpent(ctx, ready.Spent)
	}
	if len(ready.Rebuilt) > 0 {
		h.recordPublished(ctx, ready.Rebuilt, rebuilt)
	}
	h.deferAll(ctx, ready.Deferred)
	h.disp.Notify()
	if ready.Redeferred == len(batch) && len(batch) > 0 {
		// Everything read was our own deferred work, deferred again: the
		// partition holds nothing else; do not spin through the topic.
		t := time.NewTimer(h.s.opts.DeferPause)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-h.disp.Stopping():
		case <-t.C:
		}
	}
	return nil
}

// deferAll produces the deferred copies of requests (partition.Ready's
// Deferred) and acks their records. A copy that does not encode (not
// seen), or copies that cannot be produced (the broker away), leave their
// requests queued instead, over the bounds (the group's in-flight limit
// bounds them): nothing is lost.
func (h *handler) deferAll(ctx context.Context, ds []partition.Deferral) {
	if len(ds) == 0 {
		return
	}
	msgs := make([]kafka.Message, 0, len(ds))
	deferred := make([]*partition.Task, 0, len(ds))
	held := 0
	for _, d := range ds {
		var m kafka.Message
		var err error
		if d.Held {
			m, err = h.s.enc.Hold(d.Task, h.s.request(d.Task), d.At)
		} else {
			m, err = h.s.enc.Defer(d.Task, h.s.request(d.Task), d.At, d.Estimated)
			partition.Compact(d.Task)
		}
		if err != nil {
			h.push(d.Task, d.Task.NotBeforeTime())
			continue
		}
		if d.Held {
			held++
		}
		if d.Evicted {
			h.s.m.evicted.Inc()
		}
		msgs = append(msgs, m)
		deferred = append(deferred, d.Task)
	}
	if len(msgs) == 0 {
		return
	}
	if err := h.s.prod.Write(ctx, msgs...); err != nil {
		h.log.Warn("held requests that could not be deferred", zap.Int("count", len(deferred)), zap.Error(err))
		for _, t := range deferred {
			h.push(t, t.NotBeforeTime())
		}
		return
	}
	for _, t := range deferred {
		h.ack(t)
	}
	h.s.m.pausedHeld.Add(float64(held))
	h.s.m.deferred.Add(float64(len(deferred)))
}

// push queues t in its host's queue unless its attempt is held or was
// finished already (partition.Partition.Push): then its record is acked
// as a repeat.
func (h *handler) push(t *partition.Task, notBefore time.Time) {
	if !h.p.Push(t, notBefore) {
		h.repeat(t)
	}
}

// repeat acks the record of a request whose attempt is held or was
// finished already.
func (h *handler) repeat(t *partition.Task) {
	h.s.m.repeatsSkipped.WithLabelValues(skipHeld).Inc()
	h.ack(t)
}

// request returns t's FetchRequest (partition.Task.Request), decoded
// when it is not yet; a record that no longer decodes is logged, and its
// request is t's fields alone.
func (s *Service) request(t *partition.Task) *crawlv1.FetchRequest {
	req, err := t.Request()
	if err != nil {
		s.log.Error("decode a fetch request read before failed", telemetry.Offset(t.Offset), zap.Error(err))
	}
	return req
}

// newTask returns the task of a record whose request decoded as req, with
// its host and crawl shared through h's tables.
func (h *handler) newTask(msg kafka.Message, req *crawlv1.FetchRequest, host string, now time.Time) *partition.Task {
	due, estimated := emit.Due(msg)
	return partition.NewTask(req, partition.TaskOf{
		Offset: msg.Offset, Value: msg.Value, Schema: h.strs.Intern(kafkaio.Schema(msg)), Host: host, Crawl: h.strs.Intern(req.GetCrawlId()),
		Redefer: emit.WasDeferred(msg), Estimated: estimated, Due: due, Budgets: h.s.opts.Budget != nil,
	}, now)
}

// ack acknowledges t's record.
func (h *handler) ack(t *partition.Task) {
	h.acker(h.record(t))
}

// record is t's record as the group's ack and release read it: its
// topic, partition and offset.
func (h *handler) record(t *partition.Task) kafka.Message {
	return kafka.Message{Topic: h.topic, Partition: h.partition, Offset: t.Offset}
}

// raise is a reprioritize record of a batch.
type raise struct {
	msg kafka.Message
	req *crawlv1.FetchRequest
}

// reprioritize applies a reprioritize record (FetchRequest.reprioritize):
// the queued request of its crawl and url_fp in its host's queue takes the
// record's priority and reason when that ranks it better, and its place by
// it. Nothing is fetched, charged or logged; a request in flight or not
// held by this partition is left alone.
func (h *handler) reprioritize(msg kafka.Message, req *crawlv1.FetchRequest) {
	host := string(msg.Key)
	if k, err := kafkaio.Key(req.GetUrl()); err == nil {
		host = string(k)
	}
	res := h.p.Raise(host, req.GetCrawlId(), req.GetUrlFp(), req.GetPriority(), priority.ParseSignals(req.GetPriorityReason()))
	h.s.m.reprioritized.WithLabelValues(res.String()).Inc()
}
