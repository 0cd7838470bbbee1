package partition

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// clock is a partition's fake clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newPartition(c *clock, limits decide.Limits) *Partition {
	return New(Options{
		Politeness: politeness.Options{Delay: time.Second, FullAt: limits.MaxHostQueue},
		Limits:     limits, Attempts: NewAttempts(1024), Now: c.Now,
	})
}

// task returns the decoded task of a first attempt of url on host, scheduled at
// t0, at depth and priority, read at now; budgets says whether page
// budgets are charged.
func task(host, url string, depth uint32, pr int32, budgets bool, now time.Time) *Task {
	req := &crawlv1.FetchRequest{CrawlId: "c", Url: url, UrlFp: uint64(len(url)) << 8, Depth: depth, Priority: pr,
		ScheduledAt: timestamppb.New(t0)}
	t := NewTask(req, TaskOf{Host: host, Crawl: "c", Budgets: budgets}, now)
	t.Req = req // decoded, as in a turn (Compact drops it)
	return t
}

// drain takes every turn the engine gives until now, ending each at
// once, and returns the URLs' depths in turn order.
func drain(p *Partition, until time.Time) []uint32 {
	var depths []uint32
	for {
		host, t, ok := p.Engine().Next(until)
		if !ok {
			return depths
		}
		depths = append(depths, t.Depth)
		p.Engine().Done(host, t0)
	}
}

func TestPlace(t *testing.T) {
	limits := decide.Limits{MaxHostQueue: 3, MaxHostWait: time.Minute, HoldHorizon: 2 * time.Minute}
	t.Run("queued, then a repeat", func(t *testing.T) {
		c := &clock{t0}
		p := newPartition(c, limits)
		a := task("a", "http://a/1", 1, 0, false, c.now)
		if pl := p.Place(a, c.now); pl.Action != decide.Queue || pl.Repeat || pl.Evicted != nil {
			t.Fatalf("first placement %+v, want queued", pl)
		}
		again := task("a", "http://a/1", 1, 0, false, c.now)
		if pl := p.Place(again, c.now); pl.Action != decide.Queue || !pl.Repeat {
			t.Fatalf("the same attempt again: %+v, want a repeat", pl)
		}
		if n := p.Engine().Len(); n != 1 {
			t.Fatalf("%d queued, want 1", n)
		}
	})
	t.Run("due beyond the horizon: deferred, not claimed", func(t *testing.T) {
		c := &clock{t0}
		p := newPartition(c, limits)
		far := task("a", "http://a/far", 1, 0, false, c.now)
		far.NotBefore = t0.Add(time.Hour).UnixNano()
		pl := p.Place(far, c.now)
		if pl.Action != decide.Defer || !pl.At.Equal(t0.Add(time.Hour)) {
			t.Fatalf("placement %+v, want deferred to its not_before", pl)
		}
		if p.Engine().Len() != 0 || len(p.Abandon()) != 0 {
			t.Fatal("a deferred request was queued or claimed")
		}
		if !p.Claim(far) {
			t.Fatal("a deferred request's attempt is held: its copy would be skipped as a repeat")
		}
	})
	t.Run("a full queue keeps its best", func(t *testing.T) {
		c := &clock{t0}
		p := newPartition(c, limits)
		p.Place(task("b", "http://b/1", 1, 0, false, c.now), c.now) // another host with room
		for i, d := range []uint32{1, 5, 3} {
			if pl := p.Place(task("a", fmt.Sprintf("http://a/%d", i), d, 0, false, c.now), c.now); pl.Action != decide.Queue {
				t.Fatalf("request %d: %+v", i, pl)
			}
		}
		better := task("a", "http://a/better", 2, 0, false, c.now)
		pl := p.Place(better, c.now)
		if pl.Action != decide.Evict || pl.Evicted == nil || pl.Evicted.Depth != 5 || pl.Repeat {
			t.Fatalf("placement %+v, want the depth-5 request evicted", pl)
		}
		if !p.Claim(pl.Evicted) {
			t.Fatal("the evicted request's attempt is still held: its deferred copy would be skipped")
		}
		p.Settle(pl.Evicted, false)
		worse := task("a", "http://a/worse", 9, 0, false, c.now)
		if pl := p.Place(worse, c.now); pl.Action != decide.Defer || pl.Evicted != nil {
			t.Fatalf("a request ranked below the whole full queue: %+v, want deferred", pl)
		}
		raised := task("a", "http://a/raised", 9, 7, false, c.now)
		if pl := p.Place(raised, c.now); pl.Action != decide.Evict || pl.Evicted.Depth != 3 {
			t.Fatalf("a higher priority at depth 9: %+v, want the depth-3 request evicted", pl)
		}
		got := drain(p, t0.Add(time.Hour))
		want := map[uint32]bool{9: true, 1: true, 2: true}
		for _, d := range got {
			delete(want, d)
		}
		if len(want) != 0 || len(got) != 4 {
			t.Fatalf("turns at depths %v, want a's 9 (raised), 1, 2 and b's 1", got)
		}
	})
}

func TestYieldToBetter(t *testing.T) {
	c := &clock{t0}
	p := newPartition(c, decide.Limits{MaxHostQueue: 100, MaxHostWait: time.Minute, HoldHorizon: time.Minute})
	deep := task("a", "http://a/deep", 4, 0, true, c.now)
	p.Push(deep, time.Time{})
	for i := range 2 {
		p.Push(task(fmt.Sprintf("b%d", i), fmt.Sprintf("http://b%d/", i), 1, 0, true, c.now), time.Time{})
	}
	host, turn, ok := p.Engine().Next(t0.Add(time.Second))
	for ok && turn != deep {
		p.Engine().Release(host)
		host, turn, ok = p.Engine().Next(t0.Add(time.Second))
	}
	if !ok {
		t.Fatal("the deep request got no turn")
	}
	if p.Yield(host, deep, -1) {
		t.Fatal("yielded without a budget")
	}
	if p.Yield(host, deep, 3) {
		t.Fatal("yielded with more pages left than better requests")
	}
	if !p.Yield(host, deep, 2) {
		t.Fatal("did not yield the crawl's last 2 pages to its 2 shallower requests")
	}
	if deep.Yields != 1 || deep.Req != nil {
		t.Fatalf("after a yield: %d yields, request kept %v", deep.Yields, deep.Req != nil)
	}
	for _, d := range drain(p, t0.Add(decide.YieldFor(time.Second)-time.Millisecond)) {
		if d == 4 {
			t.Fatal("the yielding request came back before decide.YieldFor of its host's delay")
		}
	}
	if got := drain(p, t0.Add(decide.YieldFor(time.Second))); !slices.Contains(got, 4) {
		t.Fatalf("turns %v once its yield ran out, want the yielding request's among them", got)
	}
	p.Pending(deep, false)
	p.Pending(deep, true)
	for range decide.MaxYields {
		p.Yield(host, deep, 2)
	}
	if p.Yield(host, deep, 2) {
		t.Fatalf("yielded past MaxYields (%d)", deep.Yields)
	}
}

func TestRaise(t *testing.T) {
	c := &clock{t0}
	p := newPartition(c, decide.Limits{MaxHostQueue: 100, MaxHostWait: time.Minute, HoldHorizon: time.Minute})
	shallow := task("a", "http://a/s", 1, 0, false, c.now)
	deep := task("a", "http://a/deep", 6, 0, false, c.now)
	p.Push(shallow, time.Time{})
	p.Push(deep, time.Time{})
	if res := p.Raise("a", "other", deep.URLFP, 5, priority.InLinks); res != politeness.NotQueued {
		t.Fatalf("raise of another crawl's URL: %v", res)
	}
	if res := p.Raise("a", "c", deep.URLFP, 5, priority.InLinks); res != politeness.Raised {
		t.Fatalf("raise: %v", res)
	}
	if pr, s := deep.Priority(); pr != 5 || s != priority.InLinks {
		t.Fatalf("raised request's priority %d %v", pr, s)
	}
	if got := drain(p, t0.Add(time.Hour)); len(got) == 0 || got[0] != 6 {
		t.Fatalf("turns at depths %v, want the raised depth-6 request first", got)
	}
}

func TestAbandon(t *testing.T) {
	c := &clock{t0}
	p := newPartition(c, decide.Limits{MaxHostQueue: 100, MaxHostWait: time.Minute, HoldHorizon: time.Minute})
	queued := task("a", "http://a/q", 1, 0, false, c.now)
	handed := task("a", "http://a/h", 1, 0, false, c.now)
	p.Push(queued, time.Time{})
	p.Push(handed, time.Time{})
	p.Handed(handed) // with the recorder: its outcome settles it
	got := p.Abandon()
	if len(got) != 1 || got[0] != queued {
		t.Fatalf("abandoned %v, want only the queued request", got)
	}
	if !p.Claim(task("a", "http://a/q", 1, 0, false, c.now)) {
		t.Fatal("an abandoned attempt is still held: the next owner's copy... this fetcher would skip it")
	}
	if p.Claim(task("a", "http://a/h", 1, 0, false, c.now)) {
		t.Fatal("an attempt with the recorder was released at close: it could be fetched twice")
	}
}

// TestIntake: a batch's records end where decide.Intake and Place say,
// and the partition's claims follow: a skipped attempt is finished, a
// rebuilt one claimed, a held or cancelled one neither.
//
// (TestPlaceEstimated has the copies deferred for a full queue read again.)
func TestIntake(t *testing.T) {
	c := &clock{t0}
	limits := decide.Limits{MaxHostQueue: 2, MaxHostWait: time.Minute, HoldHorizon: time.Minute, PauseRecheck: 5 * time.Second}
	p := newPartition(c, limits)
	run, pause, cancel := crawlv1.CrawlState_CRAWL_STATE_RUNNING, crawlv1.CrawlState_CRAWL_STATE_PAUSED, crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	no := func() bool { return false }
	yes := func() bool { return true }
	mk := func(url string, depth uint32) *Task { return task("a", url, depth, 0, false, c.now) }
	skipped, rebuilt, cancelled, spent, held := mk("http://a/s", 1), mk("http://a/r", 1), mk("http://a/c", 1), mk("http://a/b", 1), mk("http://a/h", 1)
	far := mk("http://a/far", 1)
	far.NotBefore, far.Redefer = t0.Add(time.Hour).UnixNano(), true
	q1, q2, better := mk("http://a/q1", 3), mk("http://a/q2", 4), mk("http://a/better", 1)
	other := task("b", "http://b/1", 1, 0, false, c.now) // a host with room: a's queue is full by its length
	repeat := mk("http://a/q1", 3)
	r := p.Intake([]Read{
		{Task: skipped, Recorded: true, State: run, Spent: no},
		{Task: rebuilt, Published: true, State: run, Spent: no},
		{Task: cancelled, State: cancel, Spent: yes},
		{Task: spent, State: run, Spent: yes},
		{Task: held, State: pause, Spent: yes},
		{Task: far, State: run, Spent: no},
		{Task: other, State: run, Spent: no},
		{Task: q1, State: run, Spent: no},
		{Task: repeat, State: run, Spent: no},
		{Task: q2, State: run, Spent: no},
		{Task: better, State: run, Spent: no},
	}, c.now)
	one := func(name string, got []*Task, want *Task) {
		t.Helper()
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: %d tasks, want only %s", name, len(got), want.Req.GetUrl())
		}
	}
	one("skipped", r.Skipped, skipped)
	one("rebuilt", r.Rebuilt, rebuilt)
	one("cancelled", r.Cancelled, cancelled)
	one("spent", r.Spent, spent)
	one("repeats", r.Repeats, repeat)
	want := []Deferral{
		{Task: held, At: t0.Add(5 * time.Second), Held: true},
		{Task: far, At: t0.Add(time.Hour)},
		{Task: q2, Evicted: true, Estimated: true}, // due when a's queue ahead is done (decide.Place)
	}
	if len(r.Deferred) != len(want) {
		t.Fatalf("deferred %+v, want %+v", r.Deferred, want)
	}
	for i, d := range r.Deferred {
		if d.Task != want[i].Task || (!want[i].At.IsZero() && !d.At.Equal(want[i].At)) || d.At.Before(t0) || d.Held != want[i].Held || d.Evicted != want[i].Evicted ||
			d.Estimated != want[i].Estimated {
			t.Errorf("deferral %d: %s at %v held %v evicted %v, want %s at %v held %v evicted %v", i, d.Task.Req.GetUrl(), d.At.Sub(t0),
				d.Held, d.Evicted, want[i].Task.Req.GetUrl(), want[i].At.Sub(t0), want[i].Held, want[i].Evicted)
		}
	}
	if r.Redeferred != 1 {
		t.Errorf("redeferred %d, want 1 (the far request, a deferral's copy)", r.Redeferred)
	}
	if p.Claim(mk("http://a/s", 1)) || p.Claim(mk("http://a/r", 1)) {
		t.Error("a skipped attempt is not finished, or a rebuilt one not claimed")
	}
	if !p.Claim(mk("http://a/h", 1)) || !p.Claim(mk("http://a/q2", 4)) {
		t.Error("a held or an evicted request is still claimed: its copy would be skipped as a repeat")
	}
	if n := p.Engine().Len(); n != 3 {
		t.Errorf("%d queued, want 3 (q1, better, b's)", n)
	}
}

// TestPlaceEstimated: a copy deferred for its host's full queue, due at
// an estimate of the queue's drain, is read again when its host is idle:
// it is due as soon as the host is (not 95 s later: the end of a crawl of
// a few huge sites waited that long for its last requests), but never
// before its own not_before; a copy due at its own not_before (no
// estimate) keeps it.
func TestPlaceEstimated(t *testing.T) {
	limits := decide.Limits{MaxHostQueue: 3, MaxHostWait: time.Minute, HoldHorizon: 2 * time.Minute}
	estimate := t0.Add(95 * time.Second)
	copyOf := func(host, url string, own time.Time, estimated bool, now time.Time) *Task {
		tk := task(host, url, 2, 0, false, now)
		tk.NotBefore, tk.Redefer = estimate.UnixNano(), true
		if estimated {
			tk.Estimated, tk.Due = true, unixNano(own)
		}
		return tk
	}
	c := &clock{t0.Add(10 * time.Second)}
	p := newPartition(c, limits)
	idle := copyOf("a", "http://a/1", time.Time{}, true, c.now)
	if pl := p.Place(idle, c.now); pl.Action != decide.Queue || pl.At.After(c.now.Add(time.Second)) {
		t.Fatalf("an estimated copy of an idle host: %+v, want queued, due within the host's delay", pl)
	}
	if got := drain(p, c.now.Add(time.Second)); len(got) != 1 {
		t.Fatalf("%d turns in the next second, want the estimated copy's", len(got))
	}

	retry := copyOf("b", "http://b/1", t0.Add(30*time.Second), true, c.now)
	if pl := p.Place(retry, c.now); pl.Action != decide.Queue || !pl.At.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("an estimated copy with its own not_before: %+v, want queued at +30s", pl)
	}
	if got := drain(p, t0.Add(29*time.Second)); len(got) != 0 {
		t.Fatalf("%d turns before the request's own not_before", len(got))
	}
	if got := drain(p, t0.Add(30*time.Second)); len(got) != 1 {
		t.Fatalf("%d turns at the request's own not_before, want 1", len(got))
	}

	own := copyOf("c", "http://c/1", time.Time{}, false, c.now)
	if pl := p.Place(own, c.now); pl.Action != decide.Queue || !pl.At.Equal(estimate) {
		t.Fatalf("a copy due at its own not_before: %+v, want queued at +95s", pl)
	}
	if got := drain(p, estimate.Add(-time.Second)); len(got) != 0 {
		t.Fatalf("%d turns before a copy's own not_before", len(got))
	}

	// Read again while its host's queue is still full, an estimated copy
	// is deferred again as an estimate: the copy keeps its own not_before.
	for i := range 3 {
		p.Place(task("d", fmt.Sprintf("http://d/%d", i), 1, 0, false, c.now), c.now)
	}
	again := copyOf("d", "http://d/deep", t0.Add(20*time.Second), true, c.now)
	again.Depth = 9
	pl := p.Place(again, c.now)
	if pl.Action != decide.Defer || !pl.Estimated || again.OwnNotBefore() != t0.Add(20*time.Second).UnixNano() {
		t.Fatalf("an estimated copy of a full queue: %+v (own %d), want deferred again as an estimate", pl, again.OwnNotBefore())
	}
}
