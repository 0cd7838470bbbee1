package consume

import (
	"context"
	"errors"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
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
	if !h.suspectKnown && len(batch) > 0 {
		// The end of the partition at the first fetch bounds what a
		// previous owner can have handled.
		h.suspectBelow, h.suspectKnown = batch[0].HighWaterMark, true
	}
	if h.acker == nil {
		// The group's ack is the same for every batch of an assignment;
		// set before any task is queued, so that turns read it after.
		h.acker = ack
	}
	tasks := make([]*task, 0, len(batch))
	var suspect []*task
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
			t.req = req
			err := errors.Join(kerr, oerr)
			h.finish(ctx, t, &httpfetch.Response{Start: now, Kind: failure.InvalidURL, Err: err})
			continue
		}
		tasks = append(tasks, t)
		if h.s.opts.Recorded != nil && msg.Offset < h.suspectBelow {
			suspect = append(suspect, t)
		}
	}
	var recorded map[*task]bool
	var rebuilt map[*task]rows.FetchLogRow
	if len(suspect) > 0 {
		var err error
		if recorded, err = h.recordedBefore(ctx, suspect); err != nil {
			return err
		}
		rebuilt = h.publishedBefore(ctx, suspect, recorded)
	}
	var deferred, cancelled, spent, completed []*task
	var deferMsgs []kafka.Message
	redeferred := 0 // records deferred before and again now
	noted := ""     // the crawl whose robots.txt agent was noted last
	for _, t := range tasks {
		if t.crawl != noted {
			// robots.txt fetched from now on is compiled for the
			// crawl's product token too: one fetch per origin serves
			// every crawl that reads it (robots.Cache.NoteAgent).
			noted = t.crawl
			if id := h.s.identityOf(t.crawl); id.agent != "" {
				h.s.robots.NoteAgent(id.agent)
			}
		}
		_, published := rebuilt[t]
		notBefore := t.notBeforeTime()
		verdict := decide.Intake(decide.Record{
			Recorded: recorded[t], Published: published,
			State: h.crawlState(t.crawl), NotBefore: notBefore,
			Spent: func() bool { return h.spent(ctx, t) },
		}, now)
		switch verdict {
		case decide.Skip:
			// A previous owner fetched it and recorded the outcome.
			h.s.opts.Attempts.Finish(t.key())
			h.s.m.repeatsSkipped.WithLabelValues(skipRecorded).Inc()
			h.ack(t)
			continue
		case decide.Rebuild:
			// A previous owner fetched and published it; its row is
			// written now.
			if h.claim(t) {
				completed = append(completed, t)
			}
			continue
		case decide.Cancel:
			cancelled = append(cancelled, t)
			continue
		case decide.Spent:
			spent = append(spent, t)
			continue
		case decide.Hold:
			if m, ok := h.pauseDeferral(t, now); ok {
				deferred = append(deferred, t)
				deferMsgs = append(deferMsgs, m)
				h.s.m.pausedHeld.Inc()
				continue
			}
			// not encodable (not seen): it waits in its queue
		}
		switch p := h.s.limits.Place(h.hostOf(t.host, now), notBefore, now); p.Action {
		case decide.Evict:
			if ev, m, ok := h.evict(t, p.At); ok {
				// A deeper request of the host leaves the full queue instead.
				deferred = append(deferred, ev)
				deferMsgs = append(deferMsgs, m)
				h.push(t, notBefore)
				continue
			}
			p.At = decide.Later(p.At, notBefore) // nothing deeper: t goes
			fallthrough
		case decide.Defer:
			if m, ok := h.deferMessage(t, p.At); ok {
				deferred = append(deferred, t)
				deferMsgs = append(deferMsgs, m)
				if t.redefer {
					redeferred++
				}
				continue
			}
		}
		h.push(t, notBefore)
	}
	for _, r := range raises {
		h.reprioritize(r.msg, r.req)
		ack(r.msg)
	}
	if len(cancelled) > 0 {
		h.recordCancelled(ctx, cancelled)
	}
	if len(spent) > 0 {
		h.recordSpent(ctx, spent)
	}
	if len(completed) > 0 {
		h.recordPublished(ctx, completed, rebuilt)
	}
	if len(deferred) > 0 {
		if err := h.s.prod.Write(ctx, deferMsgs...); err != nil {
			// Could not defer: hold them instead (bounded by the group's
			// in-flight limit); nothing is lost.
			h.log.Warn("held requests that could not be deferred", zap.Int("count", len(deferred)), zap.Error(err))
			for _, t := range deferred {
				h.push(t, t.notBeforeTime())
			}
		} else {
			for _, t := range deferred {
				h.ack(t)
			}
			h.s.m.deferred.Add(float64(len(deferred)))
		}
	}
	h.notify()
	if redeferred == len(batch) && len(batch) > 0 {
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

// hostOf is the state of host's queue that decide.Place reads.
func (h *handler) hostOf(host string, now time.Time) decide.Host {
	queued, wait := h.engine.Backlog(host, now)
	_, delay, next := h.engine.HostQueue(host)
	return decide.Host{Queued: queued, Wait: wait, Delay: delay, Next: next, OpenHosts: h.engine.OpenHosts()}
}

// evict keeps a host's full queue best-first (decide.Evict): the
// worst-ranked request of t's host ranked below t (the lowest priority,
// then the deepest), the latest pushed, is taken out and its deferral
// record, due at at or its own not_before, returned, so that t can be
// queued in its place. The evicted request's claim is released before its
// copy is produced (see hold). ok is false when the queue holds nothing
// ranked below t (or the copy cannot be encoded: the request stays, one
// over the bound).
func (h *handler) evict(t *task, at time.Time) (evicted *task, m kafka.Message, ok bool) {
	ev, ok := h.engine.EvictAbove(t.host, rankOf(t))
	if !ok {
		return nil, kafka.Message{}, false
	}
	h.pending(ev, false)
	h.settle(ev, false)
	at = decide.Later(at, ev.notBeforeTime())
	if m, ok = h.deferMessage(ev, at); !ok {
		h.push(ev, at)
		return nil, kafka.Message{}, false
	}
	h.s.m.evicted.Inc()
	return ev, m, true
}

// deferMessage returns the record that puts t back on the fetch topic,
// due at notBefore. It carries t's priority and reason (request), raised
// or not.
func (h *handler) deferMessage(t *task, notBefore time.Time) (kafka.Message, bool) {
	o := h.s.opts
	req := proto.CloneOf(h.request(t))
	compact(t)
	req.NotBefore = timestamppb.New(notBefore)
	m, err := kafkaio.NewMessage(o.Topics.Fetch, []byte(t.host), req)
	if err != nil {
		return kafka.Message{}, false
	}
	m.Headers = append(m.Headers, kafka.Header{Key: deferredHeader, Value: []byte("1")})
	return m, true
}

// push queues t in its host's queue unless its attempt is held or was
// finished already (see claim).
func (h *handler) push(t *task, notBefore time.Time) {
	if h.claim(t) {
		h.pending(t, true)
		h.engine.Push(t.host, t, notBefore)
	}
}

// claim takes t's attempt (Options.Attempts) until settle, or reports
// false when it is held or was finished already: then the record is a
// repeat and is acked without a request.
func (h *handler) claim(t *task) bool {
	if !h.s.opts.Attempts.Claim(t.key()) {
		h.s.m.repeatsSkipped.WithLabelValues(skipHeld).Inc()
		h.ack(t)
		return false
	}
	h.claimMu.Lock()
	h.claimed[t] = struct{}{}
	h.claimMu.Unlock()
	return true
}

// toRecorder hands t's claim over to its outcome: the request was made,
// so Close does not release the attempt, which the outcome's Done settles
// (finished once durable, released if it could not be made so). A
// partition closed while the store is away (a broker or ClickHouse
// outage ends the generation) thus keeps the attempts whose outcomes wait
// in the recorder, and when the partition comes back to this fetcher (the
// sticky assignor gives it back) their redelivered records are repeats,
// not requests.
func (h *handler) toRecorder(t *task) {
	h.claimMu.Lock()
	delete(h.claimed, t)
	h.claimMu.Unlock()
}

// settle ends t's claim: done when its outcome is durable, otherwise
// released (its record was handed back and may come again).
func (h *handler) settle(t *task, done bool) {
	h.claimMu.Lock()
	delete(h.claimed, t)
	h.claimMu.Unlock()
	if done {
		h.s.opts.Attempts.Finish(t.key())
	} else {
		h.s.opts.Attempts.Release(t.key())
	}
}

// task is one FetchRequest record in a host queue. A queued request is
// held compactly: the record's value (the encoded request, one allocation
// without pointers, about 200 bytes on the bench web) and the fields that
// its queue, the repeat check and the page budget read (232 bytes of
// struct, TestTaskIsCompact), plus its host's name and its 48-byte entry
// in the host queue: about 500 bytes, where the decoded message and the
// record it came from were 1.2 KB in a dozen allocations that the
// collector scanned on every cycle. The request is decoded again for its
// turn and for its outcome (request), and that copy is dropped when the
// task goes back to its queue (compact). Every field but req, waited,
// yields and the turn's own fields is set when the record is read and
// never changes.
type task struct {
	offset int64                 // the record's offset (the partition is the handler's): what acking reads
	value  []byte                // the record's value, the encoded FetchRequest
	schema string                // the record's schema header (crawlmsg), shared
	req    *crawlv1.FetchRequest // decoded for a turn or an outcome (request); nil while queued
	host   string                // politeness key
	crawl  string                // crawl id, shared by the handler's tasks of the crawl

	id        attemptID // the attempt (Options.Attempts)
	urlFP     uint64    // the request's url_fp
	scheduled int64     // scheduled_at, Unix nanoseconds
	notBefore int64     // not_before, Unix nanoseconds; 0 for none
	enqueued  int64     // when the record was read, Unix nanoseconds
	depth     uint32
	// priority and signals are the request's priority and the signals of
	// its priority_reason (libs/priority), raised by a reprioritize
	// record while queued; changed only under the engine's lock and
	// unchargedMu (reprioritize).
	priority int32
	signals  priority.Signals
	revisit  bool
	charged  bool  // charged to its crawl's page budget (decide.Charged)
	redefer  bool  // the record was produced by a deferral
	waited   bool  // politeness wait observed (a robots turn re-queues it)
	yields   uint8 // turns given up to better-ranked requests (yieldToBetter)

	// A turn's own fields, set while it runs and read by its outcome.
	state      []kafka.Message  // host-state record of the last request, published with its outcome
	retryAfter int64            // earliest useful retry (a Retry-After), Unix nanoseconds; 0 for none
	robots     []rows.RobotsRow // robots.txt its turn fetched, recorded with its outcome
	warcFile   string           // WARC file and offset of the archived answer (Options.Archive)
	warcOffset int64
}

// key is what Options.Attempts knows of t's request.
func (t *task) key() attemptKey {
	return attemptKey{id: t.id, scheduled: t.scheduled, revisit: t.revisit}
}

// notBeforeTime is t's not_before (zero for none).
func (t *task) notBeforeTime() time.Time { return unixTime(t.notBefore) }

// retryAfterTime is the earliest useful retry of t's turn (zero for none).
func (t *task) retryAfterTime() time.Time { return unixTime(t.retryAfter) }

// unixTime is the time of a task's Unix nanoseconds, zero for 0 (none).
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// request returns t's FetchRequest, decoding the record's value when it
// is not decoded yet. The value decoded when the record was read
// (newTask), so it decodes again; should it not, the request is t's
// fields alone, and its fetch fails as an invalid URL rather than panic.
// Its priority is t's: a request raised while queued (reprioritize) is
// fetched, logged, retried and deferred with the raised priority and the
// signals that raised it.
func (h *handler) request(t *task) *crawlv1.FetchRequest {
	if t.req != nil {
		return t.req
	}
	req := &crawlv1.FetchRequest{}
	if err := crawlmsg.Unmarshal(t.value, t.schema, req); err != nil {
		h.log.Error("decode a fetch request read before failed", telemetry.Offset(t.offset), zap.Error(err))
		req = &crawlv1.FetchRequest{CrawlId: t.crawl, Attempt: t.id.attempt, Depth: t.depth}
	}
	if req.GetPriority() != t.priority {
		req.Priority, req.PriorityReason = t.priority, t.signals.String()
	}
	t.req = req
	return req
}

// compact drops t's decoded request before t goes back to its queue; call
// it before handing t to the engine (another turn may take it at once).
func compact(t *task) { t.req = nil }

// newTask returns the task of a record whose request decoded as req, with
// its host and crawl shared through h's tables.
func (h *handler) newTask(msg kafka.Message, req *crawlv1.FetchRequest, host string, now time.Time) *task {
	t := &task{
		offset: msg.Offset, value: msg.Value, schema: h.intern(schemaOf(msg)), host: host, crawl: h.intern(req.GetCrawlId()),
		id: idOf(req), urlFP: req.GetUrlFp(), depth: req.GetDepth(), revisit: req.GetRevisit(),
		priority: req.GetPriority(), signals: priority.ParseSignals(req.GetPriorityReason()),
		redefer: wasDeferred(msg), enqueued: now.UnixNano(),
	}
	t.charged = decide.Charged(h.s.opts.Budget != nil, t.id.attempt, t.revisit)
	if sa := req.GetScheduledAt(); sa != nil {
		t.scheduled = sa.AsTime().UnixNano()
	}
	if nb := req.GetNotBefore(); nb != nil {
		t.notBefore = nb.AsTime().UnixNano()
	}
	return t
}

// intern returns the handler's copy of s (crawl ids, schema names): a
// queue of thousands holds one string per crawl. Handle's goroutine only;
// the table is cleared when it exceeds maxInterned.
func (h *handler) intern(s string) string {
	if v, ok := h.interned[s]; ok {
		return v
	}
	if h.interned == nil || len(h.interned) >= maxInterned {
		h.interned = make(map[string]string)
	}
	h.interned[s] = s
	return s
}

// maxInterned bounds the strings a handler shares (crawls running at once
// are far fewer).
const maxInterned = 1024

// schemaOf is the record's schema header (crawlmsg.SchemaHeader), "" when
// it has none.
func schemaOf(msg kafka.Message) string {
	for _, hd := range msg.Headers {
		if hd.Key == crawlmsg.SchemaHeader {
			return string(hd.Value)
		}
	}
	return ""
}

// ack acknowledges t's record.
func (h *handler) ack(t *task) {
	h.acker(kafka.Message{Topic: h.topic, Partition: h.partition, Offset: t.offset})
}

// rankOf ranks a request in its host's queue (see politeness.NewRanked):
// the highest priority first, then the lowest depth (priority.Rank), so
// that a crawl stopped by its budget, a cancel or a rebalance has its
// best pages; with no priority signal, its shallowest (breadth-first).
func rankOf(t *task) uint32 { return priority.Rank(t.priority, t.depth) }

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
	crawl, fp := req.GetCrawlId(), req.GetUrlFp()
	p, signals := req.GetPriority(), priority.ParseSignals(req.GetPriorityReason())
	res := h.engine.Raise(host, func(t *task) (uint32, bool) {
		if t.urlFP != fp || t.crawl != crawl {
			return 0, false
		}
		return priority.Rank(p, t.depth), true
	}, func(t *task) {
		// yieldToBetter reads the priority of queued requests under
		// unchargedMu.
		h.unchargedMu.Lock()
		t.priority, t.signals = p, signals
		h.unchargedMu.Unlock()
	})
	h.s.m.reprioritized.WithLabelValues(res.String()).Inc()
}

// deferredHeader marks a fetch request produced again by a deferral.
const deferredHeader = "trawl-deferred"

func wasDeferred(msg kafka.Message) bool {
	for _, hd := range msg.Headers {
		if hd.Key == deferredHeader {
			return true
		}
	}
	return false
}
