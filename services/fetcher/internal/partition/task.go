package partition

import (
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

// Task is one fetch request of the partition: in a host queue, in a turn,
// or with the recorder. A queued request is held compactly: the record's
// value (the encoded request, one allocation without pointers, about 200
// bytes on the bench web) and the fields that its queue, the repeat check
// and the page budget read (TestTaskIsCompact), plus its host's name and
// its 48-byte entry in the host queue: about 500 bytes, where the decoded
// message and the record it came from were 1.2 KB in a dozen allocations
// that the collector scanned on every cycle. The request is decoded again
// for its turn and for its outcome (the adapter's Req), and that copy is
// dropped when the task goes back to its queue (Compact).
//
// Every field but Req, Waited, Yields, the priority and the turn's own
// fields is set by NewTask and never changes.
type Task struct {
	Offset int64                 // the record's offset in the partition: what acking reads
	Value  []byte                // the record's value, the encoded FetchRequest
	Schema string                // the record's schema header (crawlmsg), shared
	Req    *crawlv1.FetchRequest // decoded for a turn or an outcome; nil while queued
	Host   string                // politeness key
	Crawl  string                // crawl id, shared by the partition's tasks of the crawl

	ID        AttemptID // the attempt (Attempts)
	URLFP     uint64    // the request's url_fp
	Scheduled int64     // scheduled_at, Unix nanoseconds
	NotBefore int64     // not_before, Unix nanoseconds; 0 for none
	// Due is the request's own not_before (0 for none) when NotBefore is
	// only a deferral's estimate of when its host's full queue drains
	// (Estimated): Partition.Place re-estimates it, never before Due.
	Due      int64
	Enqueued int64 // when the record was read, Unix nanoseconds
	Depth    uint32
	// priority and signals are the request's priority and the signals of
	// its priority_reason (libs/priority), raised by a reprioritize
	// record while queued; changed only under the engine's lock and the
	// partition's unchargedMu (Partition.Raise).
	priority int32
	signals  priority.Signals
	Revisit  bool
	Charged  bool // charged to its crawl's page budget (decide.Charged)
	Redefer  bool // the record was produced by a deferral
	// Estimated: NotBefore is a deferral's estimate, Due the request's own.
	Estimated bool
	Waited    bool  // politeness wait observed (a robots turn re-queues it)
	Yields    uint8 // turns given up to better-ranked requests (Partition.Yield)

	// A turn's own fields, set while it runs and read by its outcome.
	HostState  *politeness.HostState // the host's state after the request, when the next owner must be told (Engine.Changed)
	RetryAfter int64                 // earliest useful retry (a Retry-After), Unix nanoseconds; 0 for none
	Robots     []rows.RobotsRow      // robots.txt its turn fetched, recorded with its outcome
	WarcFile   string                // WARC file and offset of the archived answer
	WarcOffset int64
}

// TaskOf is what NewTask reads of a record besides its decoded request.
type TaskOf struct {
	Offset  int64
	Value   []byte
	Schema  string // shared (the adapter interns it)
	Host    string // the request's politeness key
	Crawl   string // the request's crawl id, shared
	Redefer bool   // produced by a deferral
	// Estimated: the record's not_before is a deferral's estimate of when
	// its host's full queue drains, and Due (Unix nanoseconds, 0 for none)
	// the request's own not_before.
	Estimated bool
	Due       int64
	Budgets   bool // page budgets are charged (decide.Charged)
}

// NewTask returns the task of a record whose request decoded as req, read
// at now.
func NewTask(req *crawlv1.FetchRequest, r TaskOf, now time.Time) *Task {
	t := &Task{
		Offset: r.Offset, Value: r.Value, Schema: r.Schema, Host: r.Host, Crawl: r.Crawl,
		ID: IDOf(req), URLFP: req.GetUrlFp(), Depth: req.GetDepth(), Revisit: req.GetRevisit(),
		priority: req.GetPriority(), signals: priority.ParseSignals(req.GetPriorityReason()),
		Redefer: r.Redefer, Estimated: r.Estimated, Due: r.Due, Enqueued: now.UnixNano(),
	}
	t.Charged = decide.Charged(r.Budgets, t.ID.Attempt, t.Revisit)
	if sa := req.GetScheduledAt(); sa != nil {
		t.Scheduled = sa.AsTime().UnixNano()
	}
	if nb := req.GetNotBefore(); nb != nil {
		t.NotBefore = nb.AsTime().UnixNano()
	}
	return t
}

// Key is what Attempts knows of t's request.
func (t *Task) Key() AttemptKey {
	return AttemptKey{ID: t.ID, Scheduled: t.Scheduled, Revisit: t.Revisit}
}

// NotBeforeTime is t's not_before (zero for none).
func (t *Task) NotBeforeTime() time.Time { return unixTime(t.NotBefore) }

// OwnNotBefore is t's own not_before, Unix nanoseconds (0 for none):
// NotBefore, or Due when NotBefore is a deferral's estimate.
func (t *Task) OwnNotBefore() int64 {
	if t.Estimated {
		return t.Due
	}
	return t.NotBefore
}

// RetryAfterTime is the earliest useful retry of t's turn (zero for none).
func (t *Task) RetryAfterTime() time.Time { return unixTime(t.RetryAfter) }

// ScheduledTime is t's scheduled_at.
func (t *Task) ScheduledTime() time.Time { return time.Unix(0, t.Scheduled) }

// Priority returns t's priority and the signals of its reason, raised or
// not. Read it in t's turn or outcome (when no raise can reach t) or
// under the partition's lock (Partition.Raise).
func (t *Task) Priority() (int32, priority.Signals) { return t.priority, t.signals }

// Rank ranks a request in its host's queue (politeness.NewRanked): the
// highest priority first, then the lowest depth (priority.Rank), so that
// a crawl stopped by its budget, a cancel or a rebalance has its best
// pages; with no priority signal, its shallowest (breadth-first).
func Rank(t *Task) uint32 { return priority.Rank(t.priority, t.Depth) }

// Request returns t's FetchRequest, decoding the record's value when it
// is not decoded yet, and keeps it as t.Req. The value decoded when the
// record was read, so it decodes again; should it not, the request is t's
// fields alone (its fetch fails as an invalid URL rather than panic) and
// the error says why, for the caller to log. Its priority is t's: a
// request raised while queued (Partition.Raise) is fetched, logged,
// retried and deferred with the raised priority and the signals that
// raised it.
func (t *Task) Request() (*crawlv1.FetchRequest, error) {
	if t.Req != nil {
		return t.Req, nil
	}
	req := &crawlv1.FetchRequest{}
	err := crawlmsg.Unmarshal(t.Value, t.Schema, req)
	if err != nil {
		req = &crawlv1.FetchRequest{CrawlId: t.Crawl, Attempt: t.ID.Attempt, Depth: t.Depth}
	}
	if p, signals := t.Priority(); req.GetPriority() != p {
		req.Priority, req.PriorityReason = p, signals.String()
	}
	t.Req = req
	return req, err
}

// Compact drops t's decoded request before t goes back to its queue; call
// it before handing t to the engine (another turn may take it at once).
func Compact(t *Task) { t.Req = nil }

// unixTime is the time of a task's Unix nanoseconds, zero for 0 (none).
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// unixNano is t in Unix nanoseconds, 0 for the zero time (unixTime's
// inverse).
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Strings is a partition's shared copies of the strings its tasks repeat
// (crawl ids, schema names): a queue of thousands holds one string per
// crawl (TaskOf's Crawl and Schema). The zero value is ready; one
// goroutine only (the adapter's intake).
type Strings map[string]string

// Intern returns the shared copy of s; the table starts over when it
// holds MaxStrings.
func (in *Strings) Intern(s string) string {
	if v, ok := (*in)[s]; ok {
		return v
	}
	if *in == nil || len(*in) >= MaxStrings {
		*in = make(map[string]string)
	}
	(*in)[s] = s
	return s
}

// MaxStrings bounds the strings a Strings shares (crawls running at once
// are far fewer).
const MaxStrings = 1024
