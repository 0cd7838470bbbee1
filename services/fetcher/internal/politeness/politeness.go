// Package politeness schedules the requests of one Kafka partition so that
// every host is treated politely: a queue per host, at most one request in
// flight per host, and a minimum delay between the end of one request to a
// host and the start of the next (what the site sees).
//
// A host's queue is ranked: of the items that may start, the one with the
// lowest rank (given by the rank function of NewRanked; the fetcher ranks a
// request by its priority, then its link depth, libs/priority.Rank) goes
// first, and among equal ranks the one pushed first. Raise gives a queued
// item a better rank. New ranks every item 0, which is first-in first-out.
//
// An Engine is a plain data structure with an injected clock: it starts no
// goroutines and never sleeps. The dispatcher asks it for the next eligible
// item (Next) and when to look again (NextWakeup); workers report the end of
// a request with Done. Hosts that are waiting for their delay occupy no
// worker, and one slow host never holds back the other hosts.
package politeness

import (
	"container/heap"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// DefaultDelay is the minimum delay between two requests to one host.
const DefaultDelay = hostdelay.DefaultDelay

// DefaultMaxCrawlDelay caps the Crawl-delay a robots.txt may ask for.
const DefaultMaxCrawlDelay = hostdelay.DefaultMaxCrawlDelay

// Options configures an Engine.
type Options struct {
	// Delay is the minimum time from the end of a request to a host to the
	// start of the next one (default DefaultDelay).
	Delay time.Duration
	// MaxCrawlDelay caps per-host delays raised by SetCrawlDelay and
	// back-offs (default DefaultMaxCrawlDelay).
	MaxCrawlDelay time.Duration
	// ResponseFactor, when positive, makes a host's gap follow its
	// response time: after a request that took d, the next one waits at
	// least ResponseFactor×d (never more than MaxCrawlDelay), so a server
	// that slows down under load is given proportionally more room. Zero
	// turns it off.
	ResponseFactor float64
	// FullAt is the queue length at which a host counts as full
	// (OpenHosts); zero: no host is ever full.
	FullAt int
}

// withDefaults applies the fleet's defaults (libs/hostdelay): the
// default delay and cap, and a cap never below the delay.
func (o Options) withDefaults() Options {
	f := hostdelay.Fleet{Delay: o.Delay, MaxCrawlDelay: o.MaxCrawlDelay}.WithDefaults()
	o.Delay, o.MaxCrawlDelay = f.Delay, f.MaxCrawlDelay
	return o
}

type entry[T any] struct {
	item      T
	notBefore time.Time
	rank      uint32 // the rank function's value, or a better one given by Raise
	seq       uint64 // push order (PushFront and Requeue go before every other)
}

// before reports whether a starts before b in a host's ready queue: lower
// rank first (better-ranked), then push order.
func (a *entry[T]) before(b *entry[T]) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}

// hostState is one host's queue and timing. Its items are in two queues:
// ready holds the items that could start now, by rank then push order;
// later holds the items whose not_before was ahead when they were pushed
// (a retry after a back-off, a deferred request), by not_before, and moves
// them to ready when they come due. A retry due in ten seconds therefore
// never holds back the host's other URLs, and once due it takes its place
// by rank.
type hostState[T any] struct {
	name      string
	ready     readyHeap[T] // by rank, then seq; ready[0] is the head
	later     laterHeap[T] // by notBefore, then seq
	active    bool         // a request is in flight
	next      time.Time    // earliest start of the next request
	hold      time.Time    // earliest start set by Requeue (a server's gate), apart from politeness
	delay     time.Duration
	heapIndex int  // index in Engine.waiting, -1 when absent
	busy      bool // active or has queued items (counted in Engine.busy)
	open      bool // busy with fewer than Options.FullAt queued items (counted in Engine.open)

	backoffLevel int           // consecutive Backoff calls without Recovered
	took         time.Duration // duration of the last request (ObserveDuration)

	// reported is the delay and back-off level the last state handed to
	// the next owner carried (Changed); a new host starts at the defaults,
	// which need no record.
	reportedDelay time.Duration
	reportedLevel int
}

// eligibleAt is when the host's first item may start: its next-allowed
// time, when an item is ready, or else when the earliest later item is due.
func (h *hostState[T]) eligibleAt() time.Time {
	t := h.next
	if h.hold.After(t) {
		t = h.hold
	}
	if len(h.ready) == 0 && len(h.later) > 0 && h.later[0].notBefore.After(t) {
		t = h.later[0].notBefore
	}
	return t
}

// queued returns the number of items of h.
func (h *hostState[T]) queued() int { return len(h.ready) + len(h.later) }

// take removes and returns the item to start at now: the first by rank
// and push order of the ready items and the later items due by now. The
// caller knows the host is eligible, so one of them exists.
func (h *hostState[T]) take(now time.Time) entry[T] {
	for len(h.later) > 0 && !h.later[0].notBefore.After(now) {
		h.ready.push(heap.Pop(&h.later).(entry[T]))
	}
	if len(h.ready) == 0 { // not reached: an eligible host has a due item
		return heap.Pop(&h.later).(entry[T])
	}
	return h.ready.pop()
}

// put queues it: in later when its not_before is after now, else in ready.
func (h *hostState[T]) put(it entry[T], now time.Time) {
	if it.notBefore.After(now) {
		heap.Push(&h.later, it)
		return
	}
	h.ready.push(it)
}

// removeLast removes and returns the host's queued item that would start
// last among those ranked above rank (the highest rank, then the latest
// pushed), ready and later alike; ok is false when no item ranks above
// rank. Linear in the host's queue: it serves the bounded queue's
// overflow, not the dispatch path.
func (h *hostState[T]) removeLast(rank uint32) (it entry[T], ok bool) {
	inReady, at := false, -1
	var worst *entry[T]
	for i := range h.ready {
		if e := &h.ready[i]; e.rank > rank && (worst == nil || worst.before(e)) {
			worst, inReady, at = e, true, i
		}
	}
	for i := range h.later {
		if e := &h.later[i]; e.rank > rank && (worst == nil || worst.before(e)) {
			worst, inReady, at = e, false, i
		}
	}
	if worst == nil {
		return it, false
	}
	if inReady {
		return h.ready.remove(at), true
	}
	return heap.Remove(&h.later, at).(entry[T]), true
}

// readyHeap is a binary min-heap of entries by rank, then push order,
// written out rather than through container/heap so that a push or pop
// boxes nothing (the dispatch path allocates no memory per item).
type readyHeap[T any] []entry[T]

func (q *readyHeap[T]) push(it entry[T]) {
	*q = append(*q, it)
	q.up(len(*q) - 1)
}

func (q *readyHeap[T]) pop() entry[T] {
	return q.remove(0)
}

// remove removes and returns the entry at index i.
func (q *readyHeap[T]) remove(i int) entry[T] {
	old := *q
	n := len(old) - 1
	it := old[i]
	if i != n {
		old[i] = old[n]
	}
	var zero entry[T]
	old[n] = zero
	*q = old[:n]
	if n == 0 {
		*q = nil
		return it
	}
	if i != n {
		if !q.down(i) {
			q.up(i)
		}
	}
	return it
}

func (q readyHeap[T]) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q[i].before(&q[parent]) {
			return
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

// down sifts the entry at i down; it reports whether it moved.
func (q readyHeap[T]) down(i int) bool {
	start, n := i, len(q)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && q[r].before(&q[l]) {
			c = r
		}
		if !q[c].before(&q[i]) {
			break
		}
		q[i], q[c] = q[c], q[i]
		i = c
	}
	return i > start
}

// laterHeap orders a host's not-yet-due items by not_before, then push
// order.
type laterHeap[T any] []entry[T]

func (q laterHeap[T]) Len() int { return len(q) }
func (q laterHeap[T]) Less(i, j int) bool {
	if !q[i].notBefore.Equal(q[j].notBefore) {
		return q[i].notBefore.Before(q[j].notBefore)
	}
	return q[i].seq < q[j].seq
}
func (q laterHeap[T]) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *laterHeap[T]) Push(x any)   { *q = append(*q, x.(entry[T])) }
func (q *laterHeap[T]) Pop() any {
	old := *q
	n := len(old)
	it := old[n-1]
	var zero entry[T]
	old[n-1] = zero
	*q = old[:n-1]
	if len(*q) == 0 {
		*q = nil
	}
	return it
}

// Engine is the politeness state of one partition. It is safe for
// concurrent use (the dispatcher and the workers share it).
type Engine[T any] struct {
	mu         sync.Mutex
	now        func() time.Time
	rank       func(T) uint32 // nil: every item ranks 0 (FIFO)
	opts       Options
	assignedAt time.Time
	hosts      map[string]*hostState[T]
	waiting    hostHeap[T] // hosts with queued items and no request in flight, by eligibleAt
	queued     int
	busy       int    // hosts with queued items or a request in flight
	open       int    // busy hosts with room below Options.FullAt
	seq        uint64 // pushes so far (Push counts up from midSeq)
	frontSeq   uint64 // PushFront and Requeue so far (they count down from midSeq)
	sweepAt    int    // sweep idle hosts when the map reaches this size
}

// New returns the engine of a partition assigned now, with first-in
// first-out host queues. No host's first request may start before now +
// Delay, so that a rebalance or a restart never makes two fetchers hit a
// host closer than the delay.
func New[T any](now func() time.Time, o Options) *Engine[T] {
	return NewRanked[T](now, o, nil)
}

// NewRanked is New with ranked host queues: of a host's items that may
// start, the one of lowest rank(item) goes first (the fetcher ranks a
// request by its priority, then its link depth), then the one pushed
// first. rank is called once per push, under the engine's lock; nil ranks
// every item 0.
func NewRanked[T any](now func() time.Time, o Options, rank func(T) uint32) *Engine[T] {
	return &Engine[T]{
		now:        now,
		rank:       rank,
		opts:       o.withDefaults(),
		assignedAt: now(),
		hosts:      make(map[string]*hostState[T]),
		sweepAt:    minSweep,
	}
}

// entry returns item's queue entry with its rank.
func (e *Engine[T]) entry(item T, notBefore time.Time, seq uint64) entry[T] {
	it := entry[T]{item: item, notBefore: notBefore, seq: seq}
	if e.rank != nil {
		it.rank = e.rank(item)
	}
	return it
}

// Push queues item for host, not to start before notBefore (zero for no
// constraint). Items that may start go by rank, then in push order; an
// item whose notBefore is ahead waits apart and holds back no other item
// of the host.
func (e *Engine[T]) Push(host string, item T, notBefore time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	e.seq++
	h.put(e.entry(item, notBefore, midSeq+e.seq), e.now())
	e.queued++
	e.fix(h)
}

// PushFront puts item back at the head of host's queue, for example after
// the host's slot was spent on robots.txt: before every item of its rank
// (an item of a lower rank pushed meanwhile still goes first).
func (e *Engine[T]) PushFront(host string, item T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	h.put(e.entry(item, time.Time{}, e.front()), time.Time{})
	e.queued++
	e.fix(h)
}

// Requeue ends host's turn without a request (the next-allowed time is
// unchanged) and puts item back at the head of its queue, as PushFront;
// the host starts nothing before notBefore: it waits for something outside
// the engine, such as its server's Gate, without holding a worker.
func (e *Engine[T]) Requeue(host string, item T, notBefore time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	h.active = false
	if notBefore.After(h.hold) {
		h.hold = notBefore
	}
	h.put(e.entry(item, time.Time{}, e.front()), time.Time{})
	e.queued++
	e.fix(h)
}

// EvictAbove removes and returns host's queued item that would start last
// (the highest rank, then the latest pushed) when its rank is above rank;
// ok is false when no queued item of host ranks above rank. A bounded
// host queue that is full makes room with it for a better-ranked item, so
// that what it holds in memory is the host's best work and the worst is
// what waits outside.
func (e *Engine[T]) EvictAbove(host string, rank uint32) (item T, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, known := e.hosts[host]
	if !known {
		return item, false
	}
	it, ok := h.removeLast(rank)
	if !ok {
		return item, false
	}
	e.queued--
	e.fix(h)
	return it.item, true
}

// RaiseResult is what Raise did.
type RaiseResult uint8

// Results of Raise.
const (
	// NotQueued: no queued item of the host matched (unknown, in flight,
	// or gone).
	NotQueued RaiseResult = iota
	// NotHigher: the item matched but already ranks as well or better.
	NotHigher
	// Raised: the item took the better rank and its place by it.
	Raised
)

var raiseNames = [...]string{NotQueued: "not_queued", NotHigher: "not_higher", Raised: "raised"}

func (r RaiseResult) String() string {
	if int(r) < len(raiseNames) {
		return raiseNames[r]
	}
	return "raise(?)"
}

// Raise gives a queued item of host a better rank. match is called on the
// host's queued items until it selects one (ok), returning the rank that
// item would have; when that rank is lower (better) than the item's, the
// item takes it and its place by it (push order still breaks ties), and
// raised is called on it under the engine's lock, so that whoever takes
// the item next sees what raised changed in it. A rank is never made
// worse. Items in flight are not queued: NotQueued.
//
// The search is a linear scan of one host's queue, ready and later alike:
// host queues are bounded (Options.FullAt, the fetcher's --max-host-queue,
// 100 by default; over it only while no other host has room, and then by
// the partition's in-flight window), and raises are rare (a URL's
// in-links doubled), where an index by item would cost a map update on
// every push and dispatch.
func (e *Engine[T]) Raise(host string, match func(T) (rank uint32, ok bool), raised func(T)) RaiseResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, known := e.hosts[host]
	if !known {
		return NotQueued
	}
	for i := range h.ready {
		if r, ok := raise(&h.ready[i], match, raised); ok {
			if r == Raised {
				h.ready.up(i) // a better rank only moves up
			}
			return r
		}
	}
	for i := range h.later {
		// The later heap orders by not_before: nothing moves; the rank
		// counts once the item is due (take).
		if r, ok := raise(&h.later[i], match, raised); ok {
			return r
		}
	}
	return NotQueued
}

// raise applies Raise's match to one queued entry: ok when it selects the
// entry, with the outcome (the entry's rank raised, or not higher).
func raise[T any](it *entry[T], match func(T) (uint32, bool), raised func(T)) (RaiseResult, bool) {
	rank, ok := match(it.item)
	if !ok {
		return NotQueued, false
	}
	if rank >= it.rank {
		return NotHigher, true
	}
	it.rank = rank
	if raised != nil {
		raised(it.item)
	}
	return Raised, true
}

// midSeq splits the push sequence: Push numbers count up from it and
// front numbers down, so neither side runs out.
const midSeq = 1 << 63

// front returns a sequence number before every one given so far.
func (e *Engine[T]) front() uint64 {
	e.frontSeq++
	return midSeq - e.frontSeq
}

// Next returns the head item of a host that is eligible at now, marking
// the host active (one request at a time). ok is false when no host is
// eligible; NextWakeup tells when to ask again.
func (e *Engine[T]) Next(now time.Time) (host string, item T, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.waiting) == 0 || e.waiting[0].eligibleAt().After(now) {
		var zero T
		return "", zero, false
	}
	h := heap.Pop(&e.waiting).(*hostState[T])
	it := h.take(now)
	e.queued--
	h.active = true
	return h.name, it.item, true
}

// NextWakeup returns the earliest time a queued host becomes eligible; ok
// is false when no host is waiting (the engine is empty or every host with
// items has a request in flight).
func (e *Engine[T]) NextWakeup() (at time.Time, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.waiting) == 0 {
		return time.Time{}, false
	}
	return e.waiting[0].eligibleAt(), true
}

// Done ends the in-flight request of host at end: its next request may
// start at end + the host's delay.
func (e *Engine[T]) Done(host string, end time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hosts[host]
	if !ok {
		return
	}
	h.active = false
	if t := end.Add(e.gap(h)); t.After(h.next) {
		h.next = t
	}
	e.fix(h)
}

// gap is the host's wait after a request: its delay, or the response-time
// multiple when ResponseFactor is set and that is longer.
func (e *Engine[T]) gap(h *hostState[T]) time.Duration {
	if e.opts.ResponseFactor <= 0 || h.took <= 0 {
		return h.delay
	}
	adaptive := time.Duration(e.opts.ResponseFactor * float64(h.took))
	return max(h.delay, min(adaptive, e.opts.MaxCrawlDelay))
}

// ObserveDuration records how long the host's request in flight took; Done
// then applies Options.ResponseFactor to it.
func (e *Engine[T]) ObserveDuration(host string, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[host]; ok {
		h.took = took
	}
}

// Release ends the turn of host without a request having been made (for
// example a URL refused by robots.txt): the next-allowed time is unchanged.
func (e *Engine[T]) Release(host string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hosts[host]
	if !ok {
		return
	}
	h.active = false
	e.fix(h)
}

// SetCrawlDelay raises host's delay to d (a robots.txt Crawl-delay), capped
// at MaxCrawlDelay; capped reports that the cap applied. A d below the
// engine's Delay leaves the default.
func (e *Engine[T]) SetCrawlDelay(host string, d time.Duration) (capped bool) {
	return e.SetHostDelay(host, d, hostdelay.Crawl{})
}

// SetHostDelay is SetCrawlDelay with a crawl's own politeness c
// (crawlsettings.PolitenessOf its spec): the host's delay becomes the
// Crawl-delay d capped at c.MaxCrawlDelay (the engine's MaxCrawlDelay when
// zero), raised to c.Delay and never below the engine's Delay, which is a
// floor no crawl lowers (hostdelay.Effective).
func (e *Engine[T]) SetHostDelay(host string, d time.Duration, c hostdelay.Crawl) (capped bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	h.delay, capped = hostdelay.Effective(hostdelay.Fleet{Delay: e.opts.Delay, MaxCrawlDelay: e.opts.MaxCrawlDelay}, c, d)
	return capped
}

// Backoff keeps host idle until until (a 429/503 answer's Retry-After),
// capped at now + MaxCrawlDelay, and raises its back-off level.
func (e *Engine[T]) Backoff(host string, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	h.backoffLevel++
	if limit := e.now().Add(e.opts.MaxCrawlDelay); until.After(limit) {
		until = limit
	}
	if until.After(h.next) {
		h.next = until
	}
	e.fix(h)
}

// Slow-down back-off: a host that answers 429 or 503, times out, refuses
// the connection or sends its body too slowly (SlowsDown) waits
// Retry-After, but at least SlowDownDelays of its delay, doubled with every
// consecutive slow-down up to 2^MaxSlowDownDoublings, and never longer than
// MaxCrawlDelay (Backoff's cap).
const (
	SlowDownDelays       = 5
	MaxSlowDownDoublings = 10
)

// SlowsDown reports whether an answer asks the crawler to slow down: a 429
// or 503 status, a timeout, a refused or reset connection, a body sent too
// slowly. Any other answer with a status is a normal one (Recovered).
func SlowsDown(status int, kind failure.Kind) bool {
	return status == 429 || status == 503 || kind == failure.Timeout || kind == failure.Connect || kind == failure.TooSlow
}

// SlowDown backs host off after a request that ended at end with an
// answer that asks the crawler to slow down (SlowsDown): it stays idle for
// retryAfter (the server's Retry-After, 0 when none), but at least
// SlowDownDelays × Options.Delay doubled per earlier consecutive slow-down
// (the back-off level, at most MaxSlowDownDoublings doublings), capped by
// Backoff at MaxCrawlDelay; the level rises by one.
func (e *Engine[T]) SlowDown(host string, end time.Time, retryAfter time.Duration) {
	level := min(e.BackoffLevel(host), MaxSlowDownDoublings)
	wait := max(retryAfter, (SlowDownDelays*e.opts.Delay)<<level)
	e.Backoff(host, end.Add(wait))
}

// Len returns the number of queued items (in-flight ones excluded).
func (e *Engine[T]) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.queued
}

// Hosts returns the number of hosts with queued items or a request in
// flight.
func (e *Engine[T]) Hosts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.busy
}

// OpenHosts returns the number of hosts with queued items or a request in
// flight that are not full (fewer than Options.FullAt queued items): the
// hosts that more records of the partition could still feed.
func (e *Engine[T]) OpenHosts() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.open
}

// Backlog returns the number of items queued for host and how long an item
// pushed now would wait before it may start: the host's next-allowed time,
// then a turn for every item ahead of it, each the host's gap after a
// request plus the time its last request took.
func (e *Engine[T]) Backlog(host string, now time.Time) (queued int, wait time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hosts[host]
	if !ok {
		return 0, max(e.assignedAt.Add(e.opts.Delay).Sub(now), 0)
	}
	return h.queued(), max(h.next.Sub(now), 0) + time.Duration(h.queued())*(e.gap(h)+h.took)
}

// host returns the state of name, creating it. A new host may start no
// earlier than the assignment time + Delay.
func (e *Engine[T]) host(name string) *hostState[T] {
	h, ok := e.hosts[name]
	if !ok {
		h = &hostState[T]{
			name:          name,
			next:          e.assignedAt.Add(e.opts.Delay),
			delay:         e.opts.Delay,
			heapIndex:     -1,
			reportedDelay: e.opts.Delay,
		}
		e.hosts[name] = h
	}
	return h
}

// inUse reports whether h has a turn in progress or requests queued.
func (h *hostState[T]) inUse() bool { return h.active || h.queued() > 0 }

// fix restores the waiting heap and the busy count after h changed, and
// forgets idle hosts whose delay has passed (bounded memory).
func (e *Engine[T]) fix(h *hostState[T]) {
	busy := h.inUse()
	if busy != h.busy {
		h.busy = busy
		if busy {
			e.busy++
		} else {
			e.busy--
		}
	}
	if open := busy && e.opts.FullAt > 0 && h.queued() < e.opts.FullAt; open != h.open {
		h.open = open
		if open {
			e.open++
		} else {
			e.open--
		}
	}
	wantWaiting := !h.active && h.queued() > 0
	switch {
	case wantWaiting && h.heapIndex >= 0:
		heap.Fix(&e.waiting, h.heapIndex)
	case wantWaiting:
		heap.Push(&e.waiting, h)
	case h.heapIndex >= 0:
		heap.Remove(&e.waiting, h.heapIndex)
	}
	if len(e.hosts) >= e.sweepAt {
		e.sweep()
	}
}

// sweep drops hosts that are idle and past their next-allowed time. A host
// re-created later starts at assignedAt + Delay, already in the past then,
// and gets its crawl delay again from robots.txt before its next Done, so
// forgetting it loses nothing. Sweeping only when the map doubled keeps
// the cost amortized O(1) per call and the map within twice the hosts that
// matter.
func (e *Engine[T]) sweep() {
	now := e.now()
	for name, h := range e.hosts {
		if !h.busy && !h.next.After(now) {
			delete(e.hosts, name)
		}
	}
	e.sweepAt = max(minSweep, 2*len(e.hosts))
}

const minSweep = 64

type hostHeap[T any] []*hostState[T]

func (q hostHeap[T]) Len() int { return len(q) }
func (q hostHeap[T]) Less(i, j int) bool {
	a, b := q[i].eligibleAt(), q[j].eligibleAt()
	if a.Equal(b) {
		return q[i].name < q[j].name
	}
	return a.Before(b)
}
func (q hostHeap[T]) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIndex = i
	q[j].heapIndex = j
}
func (q *hostHeap[T]) Push(x any) {
	h := x.(*hostState[T])
	h.heapIndex = len(*q)
	*q = append(*q, h)
}
func (q *hostHeap[T]) Pop() any {
	old := *q
	n := len(old)
	h := old[n-1]
	old[n-1] = nil
	h.heapIndex = -1
	*q = old[:n-1]
	return h
}

// WhenIdle runs f while host has no turn in progress and nothing queued
// (an unknown host has neither), and reports whether it ran. The engine
// stays locked while f runs, so no turn of host can begin meanwhile: a
// caller that frees what a host's turns use (its kept connection) cannot
// free it under a turn that another worker just took. f must be short
// and must not call the engine.
func (e *Engine[T]) WhenIdle(host string, f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[host]; ok && h.inUse() {
		return false
	}
	f()
	return true
}

// HostQueue returns the number of items queued for host, the host's
// current delay and its next-allowed time (for an unknown host: the
// engine's Delay and the assignment time plus Delay).
func (e *Engine[T]) HostQueue(host string) (queued int, delay time.Duration, next time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[host]; ok {
		return h.queued(), h.delay, h.next
	}
	return 0, e.opts.Delay, e.assignedAt.Add(e.opts.Delay)
}

// HostState is the politeness state of a host that outlives its owner: it
// is persisted so that the next owner of the host's partition continues
// where this one stopped.
type HostState struct {
	Next         time.Time     // no request may start before
	Delay        time.Duration // the host's delay (Crawl-delay, capped, or the default)
	BackoffLevel int           // consecutive server slow-downs
}

// State returns host's state; ok is false for a host the engine does not
// know. A host with a request in flight cannot start again before now plus
// its delay.
func (e *Engine[T]) State(host string) (st HostState, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hosts[host]
	if !ok {
		return HostState{}, false
	}
	return e.stateOf(h), true
}

// States returns the state of every host the engine knows (hosts idle past
// their next-allowed time may have been forgotten: they carry nothing).
func (e *Engine[T]) States() map[string]HostState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]HostState, len(e.hosts))
	for name, h := range e.hosts {
		out[name] = e.stateOf(h)
	}
	return out
}

func (e *Engine[T]) stateOf(h *hostState[T]) HostState {
	st := HostState{Next: h.next, Delay: h.delay, BackoffLevel: h.backoffLevel}
	if h.active {
		if t := e.now().Add(h.delay); t.After(st.Next) {
			st.Next = t
		}
	}
	return st
}

// Changed returns host's state when the next owner of its partition could
// not infer it from its own defaults: its delay (a Crawl-delay) or its
// back-off level changed since the last state Changed returned for it (a
// host first seen starts at the defaults, which need no record), or its
// next request may not start for more than two delays (a Retry-After, a
// back-off). The state then counts as handed over. A host in the engine's
// steady state (the default delay, no back-off) needs no record per
// request: the next owner waits one delay after its assignment anyway.
func (e *Engine[T]) Changed(host string) (HostState, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.hosts[host]
	if !ok {
		return HostState{}, false
	}
	return e.changed(h)
}

func (e *Engine[T]) changed(h *hostState[T]) (HostState, bool) {
	st := e.stateOf(h)
	if st.Delay == h.reportedDelay && st.BackoffLevel == h.reportedLevel && st.Next.Sub(e.now()) <= 2*st.Delay {
		return st, false
	}
	h.reportedDelay, h.reportedLevel = st.Delay, st.BackoffLevel
	return st, true
}

// ChangedStates is Changed of every host the engine knows: what a closing
// owner hands over.
func (e *Engine[T]) ChangedStates() map[string]HostState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]HostState)
	for name, h := range e.hosts {
		if st, ok := e.changed(h); ok {
			out[name] = st
		}
	}
	return out
}

// Restore installs the state a previous owner persisted for host: its
// delay and back-off level, and its next-allowed time, but never earlier
// than the one-delay wait of a host first seen after the assignment (the
// record may predate the previous owner's last requests, which hand over
// no record when nothing changed). Call it before the host's first
// request.
func (e *Engine[T]) Restore(host string, st HostState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := e.host(host)
	h.delay = min(max(st.Delay, e.opts.Delay), e.opts.MaxCrawlDelay)
	h.next = st.Next
	if first := e.assignedAt.Add(h.delay); first.After(h.next) {
		h.next = first
	}
	h.backoffLevel = max(st.BackoffLevel, 0)
	h.reportedDelay, h.reportedLevel = h.delay, h.backoffLevel
	e.fix(h)
}

// BackoffLevel returns the number of consecutive slow-downs of host.
func (e *Engine[T]) BackoffLevel(host string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[host]; ok {
		return h.backoffLevel
	}
	return 0
}

// Recovered resets host's back-off level after a normal answer.
func (e *Engine[T]) Recovered(host string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h, ok := e.hosts[host]; ok {
		h.backoffLevel = 0
	}
}
