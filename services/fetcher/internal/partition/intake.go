package partition

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
)

// Read is a record read from the fetch topic, as a task, with what the
// adapter found of it.
type Read struct {
	Task *Task
	// Recorded: a previous owner of the partition recorded its attempt
	// (a fetch-log row at or after its scheduled_at).
	Recorded bool
	// Published: a previous owner published its page and its row is
	// missing.
	Published bool
	State     crawlv1.CrawlState // its crawl's
	// Spent reports whether its crawl's page budget refuses it; asked
	// only of a running crawl's request (the first count of a crawl
	// blocks on the store).
	Spent func() bool
}

// Deferral is a request to produce again to the fetch topic, due at At;
// its record is acked once the copy is written.
type Deferral struct {
	Task *Task
	At   time.Time
	// Held: a paused crawl's request, held by decide.Limits.PauseRecheck
	// (its copy is not marked deferred: it is checked again at intake).
	Held bool
	// Evicted: a worse-ranked request that left its host's full queue
	// for the batch's (its claim released).
	Evicted bool
	// Estimated: At only estimates when the host's full queue drains;
	// the copy carries the request's own not_before too (Task.Estimated).
	Estimated bool
}

// Ready is what the adapter carries out after Intake, in this order:
// reprioritize records, the records of Cancelled and Spent requests, the
// rows of Rebuilt ones, then the Deferred copies, produced at once (when
// they cannot be, each is queued again with Push: nothing is lost).
type Ready struct {
	Skipped   []*Task // recorded by a previous owner: ack (the attempts are finished)
	Repeats   []*Task // held or finished here already: ack
	Rebuilt   []*Task // published by a previous owner, claimed: write their rows from the pages, then ack
	Cancelled []*Task // record failure.Cancelled, then ack
	Spent     []*Task // record failure.BudgetExhausted, then ack
	Deferred  []Deferral
	// Redeferred counts the batch's records that a deferral produced and
	// that are deferred again: a batch of nothing else means the
	// partition holds only far-future work (the adapter pauses).
	Redeferred int
}

// Intake decides what becomes of a batch's records read at now
// (decide.Intake, then Place for the rest) and applies it to the
// partition: queued requests are claimed and in their host queues,
// skipped attempts are finished, rebuilt ones claimed, evicted ones
// released. The rest is the adapter's, in the Ready returned.
func (p *Partition) Intake(reads []Read, now time.Time) Ready {
	var r Ready
	for _, rd := range reads {
		t := rd.Task
		verdict := decide.Intake(decide.Record{
			Recorded: rd.Recorded, Published: rd.Published,
			State: rd.State, NotBefore: t.NotBeforeTime(), Spent: rd.Spent,
		}, now)
		switch verdict {
		case decide.Skip:
			p.Finished(t, true)
			r.Skipped = append(r.Skipped, t)
		case decide.Rebuild:
			if p.Claim(t) {
				r.Rebuilt = append(r.Rebuilt, t)
			} else {
				r.Repeats = append(r.Repeats, t)
			}
		case decide.Cancel:
			r.Cancelled = append(r.Cancelled, t)
		case decide.Spent:
			r.Spent = append(r.Spent, t)
		case decide.Hold:
			r.Deferred = append(r.Deferred, Deferral{Task: t, At: p.limits.HoldUntil(now), Held: true})
		default:
			r.place(p.Place(t, now), t)
		}
	}
	return r
}

// place adds what Place did with t to r.
func (r *Ready) place(pl Placement, t *Task) {
	switch pl.Action {
	case decide.Defer:
		r.Deferred = append(r.Deferred, Deferral{Task: t, At: pl.At, Estimated: pl.Estimated})
		if t.Redefer {
			r.Redeferred++
		}
		return
	case decide.Evict:
		r.Deferred = append(r.Deferred, Deferral{Task: pl.Evicted, At: pl.At, Evicted: true, Estimated: pl.Estimated})
	}
	if pl.Repeat {
		r.Repeats = append(r.Repeats, t)
	}
}
