package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
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
	msgs, page, row, kind, err := h.s.outcome(h.partition, t, res)
	res.Release() // the page record holds its own copy of the body
	url := row.URL
	partition.Compact(t) // its outcome is encoded: thousands may wait for their writes
	if err != nil {
		h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(h.s.request(t).GetUrl()), zap.Error(err))
		return
	}
	h.recording.Add(1)
	h.p.Handed(t)
	h.s.rec.Record(ctx, recorder.Outcome{Msgs: msgs, Last: []kafka.Message{page}, Rows: []rows.FetchLogRow{row}, Robots: t.Robots, Done: func(err error) {
		defer h.recording.Done()
		if err != nil {
			h.p.Settle(t, false)
			if ctx.Err() == nil {
				h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(url), zap.Error(err))
			}
			return
		}
		h.s.count(res.Status, kind)
		h.p.Settle(t, true)
		h.ack(t)
	}})
}

// count updates the metrics of a recorded outcome.
func (s *Service) count(status int, kind failure.Kind) {
	s.m.fetches.WithLabelValues(statusClass(status), string(kind)).Inc()
	if status == 304 {
		s.m.unchanged.Inc()
	}
}

// outcome returns the records of one attempt of t.url (outcome.Of),
// encoded: the next attempt, redirect target, host state and proxy
// feedback; the FetchedPage, to be produced after them
// (recorder.Outcome.Last); the fetch-log row; and the attempt's final
// error kind (a redirect loop or a chain too long turns a redirect into a
// failure).
func (s *Service) outcome(part int, t *partition.Task, res *httpfetch.Response) (msgs []kafka.Message, page kafka.Message, row rows.FetchLogRow, kind failure.Kind, err error) {
	req := s.request(t)
	r := outcome.Of(s.outcomeOpts, outcome.Attempt{Req: req, Host: t.Host, Partition: part, RetryAfter: t.RetryAfterTime()}, res, s.opts.Now())
	// Where the answer is archived: on the page too, so that a row rebuilt
	// from it (read-back after a crash) points at the record as well.
	r.Page.WarcFile, r.Page.WarcOffset = t.WarcFile, uint64(t.WarcOffset)
	r.Row.WarcFile, r.Row.WarcOffset = t.WarcFile, uint64(t.WarcOffset)
	if r.Redirect != outcome.RedirectNone {
		s.m.redirects.WithLabelValues(string(r.Redirect)).Inc()
		if r.Redirect == outcome.RedirectInvalid {
			s.log.Debug("skipped uncrawlable redirect target", telemetry.URL(req.GetUrl()), zap.Error(r.RedirectErr))
		}
	}
	key := []byte(t.Host)
	if len(key) == 0 {
		key = []byte(req.GetUrl()) // invalid URL: any stable key
	}
	if r.Exhausted {
		s.m.retries.WithLabelValues("exhausted").Inc()
	}
	if r.Retry != nil {
		m, err := kafkaio.NewMessage(s.opts.Topics.Fetch, []byte(t.Host), r.Retry)
		if err != nil {
			s.log.Warn("skipped retry", telemetry.URL(req.GetUrl()), zap.Error(err))
			r.Page.WillRetry = false
		} else {
			s.m.retries.WithLabelValues("queued").Inc()
			msgs = append(msgs, m)
		}
	}
	if r.Target != nil {
		if m, ok := s.redirect(t, r.Target); ok {
			msgs = append(msgs, m)
		}
	}
	page, err = kafkaio.NewPooledMessage(s.opts.Topics.Fetched, key, r.Page)
	if err != nil {
		return nil, kafka.Message{}, rows.FetchLogRow{}, "", fmt.Errorf("encode fetched page: %w", err)
	}
	page.Headers = append(page.Headers, kafka.Header{Key: published.FetcherHeader, Value: []byte(s.opts.InstanceID)})
	if st := t.HostState; st != nil {
		if m, err := hoststate.Message(s.opts.Topics.HostState, t.Host, s.opts.InstanceID, *st, s.opts.Now()); err == nil {
			msgs = append(msgs, m)
		}
		t.HostState = nil
	}
	if r.Proxy != nil {
		s.m.proxyOutcomes.WithLabelValues(r.Proxy.GetOutcome()).Inc()
		if m, err := kafkaio.NewMessage(s.opts.Topics.ProxyFeedback, []byte(r.Proxy.GetProxyId()), r.Proxy); err == nil {
			msgs = append(msgs, m)
		}
	}
	return msgs, page, r.Row, failure.Kind(r.Page.GetErrorKind()), nil
}

// redirect encodes the DiscoveredURL of a redirect target: it goes back
// through the scheduler's dedup to whichever partition owns its host.
func (s *Service) redirect(t *partition.Task, d *crawlv1.DiscoveredURL) (kafka.Message, bool) {
	key, err := kafkaio.Key(d.GetUrl())
	if err != nil {
		s.log.Debug("skipped unfollowable redirect", telemetry.URL(t.Req.GetUrl()), zap.Error(err))
		return kafka.Message{}, false
	}
	msg, err := kafkaio.NewMessage(s.opts.Topics.Discovered, key, d)
	if err != nil {
		s.log.Warn("skipped redirect target", telemetry.URL(d.GetUrl()), zap.Error(err))
		return kafka.Message{}, false
	}
	return msg, true
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
		if crawl := t.Crawl; h.s.spentLogged.first(crawl, "") {
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
		m, page, row, k, err := h.s.outcome(h.partition, t, res)
		partition.Compact(t)
		if err != nil {
			h.log.Warn("left unrequested request unacked, redelivered later", telemetry.URL(h.s.request(t).GetUrl()), telemetry.ErrorKind(string(kind)), zap.Error(err))
			continue
		}
		robotsRows = append(robotsRows, t.Robots...)
		msgs = append(msgs, m...)
		pages = append(pages, page)
		logRows = append(logRows, row)
		kinds = append(kinds, k)
		done = append(done, t)
	}
	h.recording.Add(1)
	h.s.rec.Record(ctx, recorder.Outcome{Msgs: msgs, Last: pages, Rows: logRows, Robots: robotsRows, Done: func(err error) {
		defer h.recording.Done()
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
	h.recording.Add(1)
	h.s.rec.Record(ctx, recorder.Outcome{Rows: out, Done: func(err error) {
		defer h.recording.Done()
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

// pauseDeferral returns the record that holds t of a paused crawl: the
// same request due at at (decide.Limits.HoldUntil), without the deferral
// mark, so that it is checked again at intake.
func (s *Service) pauseDeferral(t *partition.Task, at time.Time) (kafka.Message, bool) {
	req := proto.CloneOf(s.request(t))
	req.NotBefore = timestamppb.New(at)
	m, err := kafkaio.NewMessage(s.opts.Topics.Fetch, []byte(t.Host), req)
	if err != nil {
		return kafka.Message{}, false
	}
	return m, true
}

// hold defers a due request of a paused crawl durably and acks it; if
// that fails it waits in its queue for the next check.
//
// Its attempt's claim is released before the copy is produced: the copy is
// the request from then on, and this partition may read it back before
// Write returns (a late acknowledgement); a claim still held then makes the
// copy a repeat of itself, acked without a request, and the URL is lost.
func (h *handler) hold(ctx context.Context, t *partition.Task) {
	recheck := h.s.limits.HoldUntil(h.s.opts.Now())
	m, ok := h.s.pauseDeferral(t, recheck)
	partition.Compact(t)
	if !ok {
		h.p.Engine().Push(t.Host, t, recheck) // still claimed
		return
	}
	h.p.Settle(t, false)
	h.p.Pending(t, false) // the copy is the request now (push adds t back)
	if err := h.s.prod.Write(ctx, m); err == nil {
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
