package consume

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
)

// Recorded finds fetch attempts that already have a fetch-log row
// (*chstore.Store). Safe for concurrent use; blocks on a query.
type Recorded interface {
	RecordedAttempts(ctx context.Context, crawlID string, hosts []string, fps []uint64) (map[rows.AttemptKey]time.Time, error)
}

// attemptID identifies one attempt of one URL within a crawl.
type attemptID struct {
	fp      uint64 // fingerprint.URL of the crawl and URL
	attempt uint32
}

// idOf derives the identity from the request's crawl and URL rather than
// trusting its url_fp field.
func idOf(req *crawlv1.FetchRequest) attemptID {
	return attemptID{fp: fingerprint.URL(req.GetCrawlId(), req.GetUrl()), attempt: req.GetAttempt()}
}

// attemptKey is what Attempts knows of a request: its attempt, when it was
// scheduled (Unix nanoseconds) and whether it is a revisit.
type attemptKey struct {
	id        attemptID
	scheduled int64
	revisit   bool
}

// keyOf is the attemptKey of req.
func keyOf(req *crawlv1.FetchRequest) attemptKey {
	return attemptKey{id: idOf(req), scheduled: req.GetScheduledAt().AsTime().UnixNano(), revisit: req.GetRevisit()}
}

// attemptState is what the fetcher remembers of an attempt it holds or
// finished.
type attemptState struct {
	scheduled int64 // FetchRequest.scheduled_at, Unix nanoseconds
	revisit   bool
	done      bool // its outcome is durable
}

// Attempts is the process-wide memory of the fetch attempts this fetcher
// holds (queued or in flight) or recently finished, so that no request of
// the same attempt is made twice however its record comes back: a record
// redelivered after a rebalance or a broker restart, the second copy of a
// deferred record whose first copy was redelivered, a URL admitted twice by
// a scheduler that crashed between producing it and persisting its
// fingerprint. Memory is bounded: two generations of at most limit entries
// each; the older is dropped when the newer fills (a forgotten attempt can
// cost a repeated request, never a lost one). Safe for concurrent use.
type Attempts struct {
	mu        sync.Mutex
	limit     int
	cur, prev map[attemptID]attemptState
}

// DefaultAttemptsLimit bounds each generation of Attempts: above the
// records a fetcher may hold unacknowledged (32 partitions × 1000).
const DefaultAttemptsLimit = 1 << 16

// AttemptsFor returns the generation size of Attempts for a fetcher that
// may hold inflight unacknowledged records in each of partitions: twice
// what it can hold, so that an attempt is remembered for at least two
// windows after it was claimed (a redelivered window, the copies of a
// window's deferrals), never less than 4096. An entry costs about 40
// bytes of map: 2 × 2 × 8 partitions × 1000 records = 32 000 entries, 1.3
// MB, where a fixed 65 536 per generation was 10 MB of a bench fetcher's
// live heap.
func AttemptsFor(partitions, inflight int) int {
	return max(2*partitions*inflight, 4096)
}

// NewAttempts returns an empty memory of at most 2 × limit attempts.
func NewAttempts(limit int) *Attempts {
	if limit <= 0 {
		limit = DefaultAttemptsLimit
	}
	return &Attempts{limit: limit, cur: make(map[attemptID]attemptState), prev: map[attemptID]attemptState{}}
}

// Claim records that the fetcher takes k's attempt, or reports false when
// it is a duplicate: the same request (same attempt and scheduled_at) is
// held or was finished, or k is the first attempt of a newly admitted URL
// (not a revisit) that was requested already.
func (a *Attempts) Claim(k attemptKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, ok := a.lookup(k.id); ok {
		if st.scheduled == k.scheduled || (k.id.attempt == 0 && !k.revisit) {
			return false
		}
	}
	a.put(k.id, attemptState{scheduled: k.scheduled, revisit: k.revisit})
	return true
}

// Finish marks k's attempt done: its outcome is durable.
func (a *Attempts) Finish(k attemptKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.put(k.id, attemptState{scheduled: k.scheduled, revisit: k.revisit, done: true})
}

// Release forgets k's attempt when it is held and not done: its record was
// handed back (abandoned at close, deferred durably) and may come back.
func (a *Attempts) Release(k attemptKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range []map[attemptID]attemptState{a.cur, a.prev} {
		if st, ok := m[k.id]; ok && !st.done && st.scheduled == k.scheduled {
			delete(m, k.id)
		}
	}
}

// Len returns the attempts remembered.
func (a *Attempts) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.cur) + len(a.prev)
}

func (a *Attempts) lookup(id attemptID) (attemptState, bool) {
	if st, ok := a.cur[id]; ok {
		return st, true
	}
	st, ok := a.prev[id]
	return st, ok
}

func (a *Attempts) put(id attemptID, st attemptState) {
	delete(a.prev, id)
	a.cur[id] = st
	if len(a.cur) >= a.limit {
		a.prev, a.cur = a.cur, make(map[attemptID]attemptState, a.limit)
	}
}

// recordedBefore returns which of the suspect tasks (redelivered records: a
// previous owner may have fetched them) already have a fetch-log row of
// their attempt at or after their scheduled_at: their outcome was published
// and recorded, so they are acked without a request. A failing query is
// retried with back-off until ctx is done (the partition stalls, as it
// does when ClickHouse is down for writes).
func (h *handler) recordedBefore(ctx context.Context, suspect []*task) (map[*task]bool, error) {
	type crawlQuery struct {
		hosts map[string]bool
		fps   []uint64
	}
	byCrawl := make(map[string]*crawlQuery)
	for _, t := range suspect {
		q := byCrawl[t.crawl]
		if q == nil {
			q = &crawlQuery{hosts: make(map[string]bool)}
			byCrawl[t.crawl] = q
		}
		q.hosts[t.host] = true
		q.fps = append(q.fps, t.urlFP)
	}
	found := make(map[string]map[rows.AttemptKey]time.Time, len(byCrawl))
	for crawl, q := range byCrawl {
		hosts := make([]string, 0, len(q.hosts))
		for host := range q.hosts {
			hosts = append(hosts, host)
		}
		retry := backoff.New(100*time.Millisecond, 5*time.Second)
		for {
			rec, err := h.s.opts.Recorded.RecordedAttempts(ctx, crawl, hosts, q.fps)
			if err == nil {
				found[crawl] = rec
				break
			}
			h.s.m.recordedErrors.Inc()
			if retry.Wait(ctx) != nil {
				return nil, fmt.Errorf("look up redelivered attempts: %w", err)
			}
		}
	}
	done := make(map[*task]bool)
	for _, t := range suspect {
		at, ok := found[t.crawl][rows.AttemptKey{Host: t.host, URLFP: t.urlFP, Attempt: uint16(min(t.id.attempt, 65535))}]
		if ok && decide.FetchedBefore(at, time.Unix(0, t.scheduled)) {
			done[t] = true
		}
	}
	return done, nil
}

// publishedBefore returns, for the suspect tasks without a fetch-log row
// (recorded), the row of those whose attempt has a FetchedPage in the
// partition at or after their scheduled_at (Options.Published): their
// fetcher published the outcome and died before inserting the row. The
// pages are read once per assignment; a read that keeps failing costs
// repeated requests, never a lost one, so it is given up after a few
// tries.
func (h *handler) publishedBefore(ctx context.Context, suspect []*task, recorded map[*task]bool) map[*task]rows.FetchLogRow {
	if h.s.opts.Published == nil {
		return nil
	}
	var out map[*task]rows.FetchLogRow
	for _, t := range suspect {
		if recorded[t] {
			continue
		}
		if !h.pagesRead {
			h.pages = h.readPages(ctx)
			h.pagesRead = true
		}
		p, ok := h.pages[t.id]
		if !ok || !decide.FetchedBefore(p.Page.GetFetchedAt().AsTime(), time.Unix(0, t.scheduled)) {
			continue
		}
		if out == nil {
			out = make(map[*task]rows.FetchLogRow)
		}
		row := outcome.FetchLogRow(p.Page, p.Host, p.Fetcher)
		// The page carries no priority: the request's, as the row
		// written with the page had it (outcome.Of).
		row.Priority, row.PriorityReason = t.priority, t.signals.String()
		out[t] = row
	}
	return out
}

// readPages reads the partition's recent FetchedPages, the latest of
// each attempt.
func (h *handler) readPages(ctx context.Context) map[attemptID]published.Page {
	var (
		pages []published.Page
		err   error
	)
	retry := backoff.New(200*time.Millisecond, time.Second)
	for try := 0; ; try++ {
		if pages, err = h.s.opts.Published.Recent(ctx, h.partition); err == nil {
			break
		}
		if try == 2 {
			h.log.Warn("read back no published pages, redelivered attempts without a fetch-log row are fetched again", zap.Error(err))
			return nil
		}
		if retry.Wait(ctx) != nil {
			return nil
		}
	}
	out := make(map[attemptID]published.Page, len(pages))
	for _, p := range pages {
		id := attemptID{fp: fingerprint.URL(p.Page.GetCrawlId(), p.Page.GetUrl()), attempt: p.Page.GetAttempt()}
		if q, ok := out[id]; !ok || !p.Page.GetFetchedAt().AsTime().Before(q.Page.GetFetchedAt().AsTime()) {
			out[id] = p
		}
	}
	h.log.Debug("read back published pages", zap.Int("pages", len(pages)))
	return out
}

// recordPublished writes the fetch-log rows of attempts a previous owner
// published without recording them (rebuilt from their FetchedPages) and
// acks their records once the rows are inserted: no request is made.
func (h *handler) recordPublished(ctx context.Context, ts []*task, rebuilt map[*task]rows.FetchLogRow) {
	out := make([]rows.FetchLogRow, 0, len(ts))
	for _, t := range ts {
		out = append(out, rebuilt[t])
	}
	h.recording.Add(1)
	h.s.rec.Record(ctx, recorder.Outcome{Rows: out, Done: func(err error) {
		defer h.recording.Done()
		if err != nil {
			for _, t := range ts {
				h.settle(t, false)
			}
			if ctx.Err() == nil {
				h.log.Warn("left published attempts unacked, redelivered later", zap.Int("count", len(ts)), zap.Error(err))
			}
			return
		}
		for _, t := range ts {
			h.s.m.repeatsSkipped.WithLabelValues(skipPublished).Inc()
			h.settle(t, true)
			h.ack(t)
		}
	}})
}
