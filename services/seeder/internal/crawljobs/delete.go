package crawljobs

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// Deletion is how far a deleted crawl's rows are removed from ClickHouse.
type Deletion struct {
	// Done: no table holds a row of the crawl. Rows the pipeline had in
	// flight when the crawl was deleted may still land afterwards (a
	// fetcher recording the crawl's queued requests as cancelled); the
	// server's sweep (SweepDeleted) removes them too.
	Done bool `json:"done"`
	// RowsLeft is, per table still holding rows of the crawl, how many;
	// ClickHouse removes them in the background (mutations).
	RowsLeft map[string]uint64 `json:"rows_left,omitempty"`
	// Error says why ClickHouse could not be asked or told; the sweep
	// tries again.
	Error string `json:"error,omitempty"`
}

// deletion is the Deletion of rows left per table (as Stats.CrawlRows
// returns them), or of the error that kept them from being counted.
func deletion(left map[string]uint64, err error) *Deletion {
	if err != nil {
		return &Deletion{Error: "clickhouse: " + err.Error()}
	}
	d := &Deletion{Done: true}
	for t, n := range left {
		if n > 0 {
			if d.RowsLeft == nil {
				d.RowsLeft = make(map[string]uint64)
			}
			d.RowsLeft[t], d.Done = n, false
		}
	}
	return d
}

// Delete deletes a crawl: it publishes the crawl's next revision,
// cancelled for good and marked deleted (jobs.Delete; every service stops
// the crawl as it does on a cancel, and the schedulers drop its seen
// sets), then starts the removal of its rows from every ClickHouse table
// that holds some (Stats.Purge) and returns the crawl with its Deletion.
// Deleting a deleted crawl publishes nothing and starts the removal of
// what is left (rows that landed since, or whose removal failed). The
// specification stays on the control topic: a crawl id without one would
// run on every service's defaults. A refusal (an invalid id: Invalid, no
// such crawl: NotFound) or a publishing failure (Unavailable) is an
// *Error; a ClickHouse failure is in the Deletion, as the sweep
// (SweepDeleted) tries again.
func (s *Service) Delete(ctx context.Context, id string) (CrawlView, error) {
	if !jobs.ValidCrawlID(id) {
		return CrawlView{}, &Error{Kind: Invalid, Msg: "invalid crawl id",
			Fields: jobs.FieldErrors{{Field: "id", Message: fmt.Sprintf("%q: want 1-%d letters, digits, '.', '_' or '-'", id, jobs.MaxCrawlID)}}}
	}
	spec, err := s.markDeleted(ctx, id)
	if err != nil {
		return CrawlView{}, err
	}
	v := view(spec, true)
	left, err := s.stats.Purge(ctx, id)
	if err != nil {
		s.log.Warn("rows of a deleted crawl not removed yet, the sweep retries", telemetry.Crawl(id), zap.Error(err))
	}
	v.Deletion = deletion(left, err)
	return v, nil
}

// markDeleted publishes the deleting revision of a crawl unless it is
// deleted already, and returns the crawl's specification.
func (s *Service) markDeleted(ctx context.Context, id string) (*crawlv1.CrawlSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return nil, &Error{Kind: NotFound, Msg: fmt.Sprintf("no crawl %q", id)}
	case crawlcontrol.Deleted(spec):
		return spec, nil
	}
	next := jobs.Delete(spec, s.now())
	if err := s.control.Publish(ctx, next); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return nil, &Error{Kind: Unavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	s.log.Info("crawl deleted", telemetry.Crawl(id), zap.Uint64("revision", next.GetRevision()))
	return next, nil
}

// SweepDeleted removes, every interval until ctx is done, the rows of
// deleted crawls that are still in ClickHouse (Stats.Purge): rows the
// pipeline had in flight when the crawl was deleted land after its
// mutations were created, and a mutation applies only to the rows that
// were there. A crawl is swept until a pass finds none of its rows once
// settle has passed since its deletion (the time its in-flight records
// take to drain), then no more by this process; a restarted server checks
// every deleted crawl once again. Each pass costs one count query per
// deleted crawl not settled, and a mutation only where rows are left and
// none is pending. Several API servers may sweep: a pending mutation is
// not repeated.
func (s *Service) SweepDeleted(ctx context.Context, interval, settle time.Duration) error {
	settled := make(map[string]bool)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sweep(ctx, settled, settle)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep is one pass of SweepDeleted.
func (s *Service) sweep(ctx context.Context, settled map[string]bool, settle time.Duration) {
	for _, spec := range s.control.All() {
		id := spec.GetCrawlId()
		if !crawlcontrol.Deleted(spec) || settled[id] || ctx.Err() != nil {
			continue
		}
		left, err := s.stats.Purge(ctx, id)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("rows of a deleted crawl not removed, retried at the next sweep", telemetry.Crawl(id), zap.Error(err))
			}
		case len(left) > 0:
			s.log.Info("removing rows of a deleted crawl", telemetry.Crawl(id), zap.Any("rows_left", left))
		case s.now().Sub(spec.GetDeletedAt().AsTime()) >= settle:
			settled[id] = true
		}
	}
}
