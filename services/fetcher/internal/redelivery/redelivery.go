// Package redelivery tells which of the records a partition of the fetch
// topic delivers after an assignment a previous owner of the partition
// already handled, so that the fetcher acks them without a request: an
// attempt with a fetch-log row (Recorded), or one whose FetchedPage the
// previous owner published and whose row it did not write (Published).
// Only records below the partition's end offset at the first batch read
// can have been handled before (Lookup.FirstRead, Lookup.Suspect).
package redelivery

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
)

// Recorded finds fetch attempts that already have a fetch-log row
// (*chstore.Store). Safe for concurrent use; blocks on a query.
type Recorded interface {
	RecordedAttempts(ctx context.Context, crawlID string, hosts []string, fps []uint64) (map[rows.AttemptKey]time.Time, error)
}

// Published reads back the FetchedPages produced lately to a partition of
// the fetched topic (*published.Reader). Safe for concurrent use; blocks.
type Published interface {
	Recent(ctx context.Context, partition int) ([]published.Page, error)
}

// Options configures a Lookup.
type Options struct {
	// Partition is the partition whose records are looked up (of the
	// fetch topic, and the one of the fetched topic Published reads).
	Partition int
	// Recorded, optional, is asked about the records a partition delivers
	// after an assignment that a previous owner may have handled (offsets
	// below the partition's end at the first fetch: suspect): an attempt
	// with a fetch-log row at or after its scheduled_at was fetched and
	// its outcome published, so its record is acked without a request.
	// Nil: no record is suspect, nothing is looked up (only
	// partition.Attempts guards against repeats).
	Recorded Recorded
	// Published, optional, reads back the partition's FetchedPages, once
	// per assignment, when the first suspect records have no fetch-log
	// row: a FetchedPage of their attempt at or after their scheduled_at
	// means a previous owner fetched and published it and died before its
	// fetch-log row was inserted (rows follow their page by up to the
	// ClickHouse flush interval). The row is then written from the page
	// and the record acked without a request. Nil: such attempts are
	// fetched again.
	Published Published
	// Errors counts the failed queries of Recorded (retried).
	Errors prometheus.Counter
	Log    *zap.Logger
}

// Lookup tells which of the records delivered after an assignment a
// previous owner of the partition handled: an attempt with a fetch-log
// row (Options.Recorded), or one whose FetchedPage it published and whose
// row it did not write (Options.Published). One per assignment; not safe
// for concurrent use (the partition handler's Handle goroutine only).
type Lookup struct {
	o Options
	// below: records at lower offsets may have been handled by a previous
	// owner (the partition's end offset when the handler first read it);
	// known once it is set.
	below int64
	known bool
	// pages are the FetchedPages read back from the partition, by
	// attempt; read once, when first needed.
	pages     map[partition.AttemptID]published.Page
	pagesRead bool
}

// New returns the Lookup of an assignment of o.Partition.
func New(o Options) *Lookup {
	return &Lookup{o: o}
}

// FirstRead notes the partition's end offset at a batch: the first one
// bounds what a previous owner can have handled.
func (r *Lookup) FirstRead(highWaterMark int64) {
	if !r.known {
		r.below, r.known = highWaterMark, true
	}
}

// Suspect reports whether the record at offset may have been handled by
// a previous owner, and can be looked up (Options.Recorded).
func (r *Lookup) Suspect(offset int64) bool {
	return r.o.Recorded != nil && offset < r.below
}

// Recorded returns which of the suspect tasks (redelivered records: a
// previous owner may have fetched them) already have a fetch-log row of
// their attempt at or after their scheduled_at: their outcome was published
// and recorded, so they are acked without a request. A failing query is
// retried with back-off until ctx is done (the partition stalls, as it
// does when ClickHouse is down for writes).
func (r *Lookup) Recorded(ctx context.Context, suspect []*partition.Task) (map[*partition.Task]bool, error) {
	type crawlQuery struct {
		hosts map[string]bool
		fps   []uint64
	}
	byCrawl := make(map[string]*crawlQuery)
	for _, t := range suspect {
		q := byCrawl[t.Crawl]
		if q == nil {
			q = &crawlQuery{hosts: make(map[string]bool)}
			byCrawl[t.Crawl] = q
		}
		q.hosts[t.Host] = true
		q.fps = append(q.fps, t.URLFP)
	}
	found := make(map[string]map[rows.AttemptKey]time.Time, len(byCrawl))
	for crawl, q := range byCrawl {
		hosts := make([]string, 0, len(q.hosts))
		for host := range q.hosts {
			hosts = append(hosts, host)
		}
		retry := backoff.New(100*time.Millisecond, 5*time.Second)
		for {
			rec, err := r.o.Recorded.RecordedAttempts(ctx, crawl, hosts, q.fps)
			if err == nil {
				found[crawl] = rec
				break
			}
			r.o.Errors.Inc()
			if retry.Wait(ctx) != nil {
				return nil, fmt.Errorf("look up redelivered attempts: %w", err)
			}
		}
	}
	done := make(map[*partition.Task]bool)
	for _, t := range suspect {
		at, ok := found[t.Crawl][rows.AttemptKey{Host: t.Host, URLFP: t.URLFP, Attempt: uint16(min(t.ID.Attempt, 65535))}]
		if ok && decide.FetchedBefore(at, time.Unix(0, t.Scheduled)) {
			done[t] = true
		}
	}
	return done, nil
}

// Published returns, for the suspect tasks without a fetch-log row
// (Recorded), the row of those whose attempt has a FetchedPage in the
// partition at or after their scheduled_at (Options.Published): their
// fetcher published the outcome and died before inserting the row. The
// pages are read once per assignment; a read that keeps failing costs
// repeated requests, never a lost one, so it is given up after a few
// tries.
func (r *Lookup) Published(ctx context.Context, suspect []*partition.Task, recorded map[*partition.Task]bool) map[*partition.Task]rows.FetchLogRow {
	if r.o.Published == nil {
		return nil
	}
	var out map[*partition.Task]rows.FetchLogRow
	for _, t := range suspect {
		if recorded[t] {
			continue
		}
		if !r.pagesRead {
			r.pages = r.readPages(ctx)
			r.pagesRead = true
		}
		p, ok := r.pages[t.ID]
		if !ok || !decide.FetchedBefore(p.Page.GetFetchedAt().AsTime(), time.Unix(0, t.Scheduled)) {
			continue
		}
		if out == nil {
			out = make(map[*partition.Task]rows.FetchLogRow)
		}
		row := outcome.FetchLogRow(p.Page, p.Host, p.Fetcher)
		// The page carries no priority: the request's, as the row
		// written with the page had it (outcome.Of).
		pr, signals := t.Priority()
		row.Priority, row.PriorityReason = pr, signals.String()
		out[t] = row
	}
	return out
}

// readPages reads the partition's recent FetchedPages, the latest of
// each attempt.
func (r *Lookup) readPages(ctx context.Context) map[partition.AttemptID]published.Page {
	var (
		pages []published.Page
		err   error
	)
	retry := backoff.New(200*time.Millisecond, time.Second)
	for try := 0; ; try++ {
		if pages, err = r.o.Published.Recent(ctx, r.o.Partition); err == nil {
			break
		}
		if try == 2 {
			r.o.Log.Warn("read back no published pages, redelivered attempts without a fetch-log row are fetched again", zap.Error(err))
			return nil
		}
		if retry.Wait(ctx) != nil {
			return nil
		}
	}
	out := make(map[partition.AttemptID]published.Page, len(pages))
	for _, p := range pages {
		id := partition.AttemptID{FP: fingerprint.URL(p.Page.GetCrawlId(), p.Page.GetUrl()), Attempt: p.Page.GetAttempt()}
		if q, ok := out[id]; !ok || !p.Page.GetFetchedAt().AsTime().Before(q.Page.GetFetchedAt().AsTime()) {
			out[id] = p
		}
	}
	r.o.Log.Debug("read back published pages", zap.Int("pages", len(pages)))
	return out
}
