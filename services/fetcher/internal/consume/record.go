package consume

import (
	"context"
	"errors"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
)

// Outcomes: what a turn leaves behind (outcome.Of), encoded, handed to the
// recorder and acked once durable; cancelled and paused requests.

// finish hands the outcome of t's request (its FetchedPage with the next
// attempt of a transient failure or the target of a redirect, the host
// state, the fetch-log row) to the recorder and returns at once; t is
// acked when the outcome is durable. Until then it counts as in flight, so
// Close waits for it.
func (h *handler) finish(ctx context.Context, t *partition.Task, res *httpfetch.Response) {
	o, err := h.s.encode(h.partition, t, res)
	res.Release() // the page record holds its own copy of the body
	url := o.Row.URL
	partition.Compact(t) // its outcome is encoded: thousands may wait for their writes
	if err != nil {
		h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(h.s.request(t).GetUrl()), zap.Error(err))
		return
	}
	t.Value = nil // it waits outside the window (release): its offset and attempt are all that is read
	h.handOver(1)
	h.p.Handed(t)
	h.release(t)
	// Done keeps what it reads, not o and res: o holds the page's record
	// and res its answer, and thousands of outcomes wait for their rows.
	status, kind := res.Status, o.Kind
	h.s.rec.Record(ctx, recorder.Outcome{Msgs: o.Msgs, Last: []kafka.Message{o.Page}, Rows: []rows.FetchLogRow{o.Row}, Robots: t.Robots, Done: func(err error) {
		defer h.settled(1)
		if err != nil {
			h.p.Settle(t, false)
			if ctx.Err() == nil {
				h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(url), zap.Error(err))
			}
			return
		}
		h.s.count(status, kind)
		h.p.Settle(t, true)
		h.ack(t)
	}})
}

// handOver counts an outcome of n requests handed to the recorder, and
// settled one made durable (or failed). While the requests of the
// partition waiting for their writes are Options.FlushAt or more, every
// change asks the writes to go as soon as that many of the partition's
// rows are buffered (Options.Flush; some are still being produced): the
// partition's window (its unacked records) is then mostly requests
// already made, and waiting out the fetch log's interval would idle it.
// Asking on every change, not only when the count reaches the mark: an
// insert that settles some of them can leave the mark met by rows that
// came meanwhile, and with no request left to read (the window full, or
// the topic's end) nothing else would ask for theirs. The partition's
// rows, not any rows: the insert under way holds some of the requests it
// counts, and every other busy partition's rows would otherwise meet the
// mark long before its own, for inserts of a few hundred rows every
// second (fetch_log merged 10.5 times per row at 1.5 M pages).
func (h *handler) handOver(n int) {
	h.recording.Add(1)
	w := h.writing.Add(int64(n))
	if h.flushing(w) && w-int64(n) < int64(h.s.opts.FlushAt) {
		h.s.m.writesFlushed.Inc() // the mark reached (not each ask)
	}
}

// release takes t's record out of the partition's window (SetRelease):
// its outcome is with the recorder, and it only waits to be acked.
func (h *handler) release(t *partition.Task) {
	if h.releaser != nil {
		h.releaser(h.record(t))
	}
}

func (h *handler) settled(n int) {
	h.flushing(h.writing.Add(-int64(n)))
	h.recording.Done()
}

// flushing asks for the writes (Options.Flush) when waiting requests are
// at the mark, and reports whether it did.
func (h *handler) flushing(waiting int64) bool {
	at := h.s.opts.FlushAt
	if at <= 0 || h.s.opts.Flush == nil || waiting < int64(at) {
		return false
	}
	h.s.opts.Flush(h.partition, at)
	return true
}

// count updates the metrics of a recorded outcome.
func (s *Service) count(status int, kind failure.Kind) {
	s.m.fetches.WithLabelValues(httpfetch.StatusClass(status), string(kind)).Inc()
	if status == 304 {
		s.m.unchanged.Inc()
	}
}

// encode returns the records of one attempt of t's request answered by
// res (emit.Encoder.Outcome) and counts and logs what became of its
// redirect, its retry and its proxy.
func (s *Service) encode(part int, t *partition.Task, res *httpfetch.Response) (emit.Outcome, error) {
	req := s.request(t)
	o, err := s.enc.Outcome(part, t, req, res)
	if o.Redirect != outcome.RedirectNone {
		s.m.redirects.WithLabelValues(string(o.Redirect)).Inc()
		if o.Redirect == outcome.RedirectInvalid {
			s.log.Debug("skipped uncrawlable redirect target", telemetry.URL(req.GetUrl()), zap.Error(o.RedirectErr))
		}
	}
	if o.Exhausted {
		s.m.retries.WithLabelValues("exhausted").Inc()
	}
	if o.RetryErr != nil {
		s.log.Warn("skipped retry", telemetry.URL(req.GetUrl()), zap.Error(o.RetryErr))
	}
	if o.Retried {
		s.m.retries.WithLabelValues("queued").Inc()
	}
	if o.TargetKeyErr != nil {
		s.log.Debug("skipped unfollowable redirect", telemetry.URL(req.GetUrl()), zap.Error(o.TargetKeyErr))
	}
	if o.TargetErr != nil {
		s.log.Warn("skipped redirect target", telemetry.URL(o.Target), zap.Error(o.TargetErr))
	}
	if o.Proxy != "" {
		s.m.proxyOutcomes.WithLabelValues(o.Proxy).Inc()
	}
	return o, err
}

// recordCancelled records the requests of a cancelled crawl without
// fetching them (FetchedPage and fetch-log row of kind failure.Cancelled,
// one outcome for all of them) and acks them once that is durable.
func (h *handler) recordCancelled(ctx context.Context, ts []*partition.Task) {
	h.recordUnrequested(ctx, ts, failure.Cancelled, "crawl cancelled")
}

// recordSpent records the first attempts of a crawl whose page budget is
// spent without fetching them (kind failure.BudgetExhausted, final: the
// URL's terminal state), like recordCancelled.
func (h *handler) recordSpent(ctx context.Context, ts []*partition.Task) {
	for _, t := range ts {
		if crawl := t.Crawl; h.s.spentLogged.First(crawl, "") {
			h.log.Info("page budget spent, recording first attempts without a request", telemetry.Crawl(crawl))
		}
	}
	h.recordUnrequested(ctx, ts, failure.BudgetExhausted, "page budget spent")
}

// recordUnrequested records requests settled without a request, with
// error kind kind, one outcome for all of them, and acks them once that
// is durable.
func (h *handler) recordUnrequested(ctx context.Context, ts []*partition.Task, kind failure.Kind, reason string) {
	var msgs, pages []kafka.Message
	var robotsRows []rows.RobotsRow
	logRows := make([]rows.FetchLogRow, 0, len(ts))
	kinds := make([]failure.Kind, 0, len(ts))
	done := make([]*partition.Task, 0, len(ts)) // encoded: acked with the outcome
	for _, t := range ts {
		res := &httpfetch.Response{Start: h.s.opts.Now(), Kind: kind, Err: errors.New(reason)}
		o, err := h.s.encode(h.partition, t, res)
		partition.Compact(t)
		if err != nil {
			h.log.Warn("left unrequested request unacked, redelivered later", telemetry.URL(h.s.request(t).GetUrl()), telemetry.ErrorKind(string(kind)), zap.Error(err))
			continue
		}
		robotsRows = append(robotsRows, t.Robots...)
		msgs = append(msgs, o.Msgs...)
		pages = append(pages, o.Page)
		logRows = append(logRows, o.Row)
		kinds = append(kinds, o.Kind)
		done = append(done, t)
	}
	h.handOver(len(done))
	h.s.rec.Record(ctx, recorder.Outcome{Msgs: msgs, Last: pages, Rows: logRows, Robots: robotsRows, Done: func(err error) {
		defer h.settled(len(done))
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("left unrequested requests unacked, redelivered later", zap.Int("count", len(done)), telemetry.ErrorKind(string(kind)), zap.Error(err))
			}
			return
		}
		for i, t := range done {
			h.s.count(0, kinds[i])
			h.p.Settle(t, true)
			h.ack(t)
		}
	}})
}

// recordPublished writes the fetch-log rows of attempts a previous owner
// published without recording them (rebuilt from their FetchedPages) and
// acks their records once the rows are inserted: no request is made.
func (h *handler) recordPublished(ctx context.Context, ts []*partition.Task, rebuilt map[*partition.Task]rows.FetchLogRow) {
	out := make([]rows.FetchLogRow, 0, len(ts))
	for _, t := range ts {
		out = append(out, rebuilt[t])
	}
	h.handOver(len(ts))
	h.s.rec.Record(ctx, recorder.Outcome{Rows: out, Done: func(err error) {
		defer h.settled(len(ts))
		if err != nil {
			for _, t := range ts {
				h.p.Settle(t, false)
			}
			if ctx.Err() == nil {
				h.log.Warn("left published attempts unacked, redelivered later", zap.Int("count", len(ts)), zap.Error(err))
			}
			return
		}
		for _, t := range ts {
			h.s.m.repeatsSkipped.WithLabelValues(skipPublished).Inc()
			h.p.Settle(t, true)
			h.ack(t)
		}
	}})
}

// hold defers a due request of a paused crawl durably and acks it; if
// that fails it waits in its queue for the next check.
//
// Its attempt's claim is released before the copy is produced: the copy is
// the request from then on, and this partition may read it back before
// Write returns (a late acknowledgement); a claim still held then makes the
// copy a repeat of itself, acked without a request, and the URL is lost.
func (h *handler) hold(ctx context.Context, t *partition.Task) {
	recheck := h.s.opts.Limits.HoldUntil(h.s.opts.Now())
	m, err := h.s.enc.Hold(t, h.s.request(t), recheck)
	partition.Compact(t)
	if err != nil {
		h.p.Engine().Push(t.Host, t, recheck) // still claimed
		return
	}
	h.p.Settle(t, false)
	h.p.Pending(t, false) // the copy is the request now (push adds t back)
	if err = h.s.prod.Write(ctx, m); err == nil {
		h.s.m.pausedHeld.Inc()
		h.ack(t)
		return
	}
	if ctx.Err() != nil {
		return // abandoned at close: unacked, and no longer claimed
	}
	// Claimed again, it waits in its queue; if the copy was written after
	// all and read back meanwhile, t is the copy's repeat and push acks it.
	h.push(t, recheck)
}
