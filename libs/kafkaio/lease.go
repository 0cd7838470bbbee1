package kafkaio

import (
	"context"
	"net"
	"sync/atomic"
	"time"
)

// Lease is what a member of a consumer group knows of its session: when
// the coordinator may have expired it, and so may have given its
// partitions to another member. Until then the partitions are the
// member's. A handler that acts on the world (the fetcher's requests,
// under a politeness rule the next owner applies too) stops at the
// expiry: a member cut off from the brokers learns that its generation
// ended only once its heartbeat fails, and what it still does meanwhile
// can overlap with the next owner's work.
type Lease interface {
	// Expiry returns when the session may expire if the coordinator is
	// not heard from again before; zero before it was ever heard from.
	// Once the coordinator was silent for a whole session timeout, the
	// session of the current generation may have expired: Expiry then
	// stays in the past until the member joins a new generation, or
	// until the generation has outlived two heartbeats since with the
	// coordinator answering, which it does only for a live session (a
	// refused heartbeat ends the generation).
	Expiry() time.Time
}

// LeaseOf returns the Lease of the group that assigned the partition
// whose AssignFunc got ctx, nil outside one.
func LeaseOf(ctx context.Context) Lease {
	l, _ := ctx.Value(leaseKey{}).(*lease)
	if l == nil {
		return nil
	}
	return l
}

type leaseKey struct{}

// lease is a member's Lease: the coordinator last answered at last (on
// the connections of the group itself: heartbeats, joins, commits, not
// the partition readers'), so the session cannot expire before last plus
// the session timeout. The margin covers the request's way to the
// coordinator (its clock starts when the heartbeat arrives, before the
// answer is read here) and the time a handler takes to notice.
//
// Its instants are nanoseconds since origin on the monotonic clock (at):
// a step of the wall clock (NTP, a virtual machine paused and resumed,
// which sets the wall clock forward while the monotonic one stood still,
// like the coordinator's timers) is no silence. On the wall clock, a
// minute's pause of the machine running both the member and the
// coordinator read as a session expired that the coordinator had kept,
// and the fetcher's partitions never made a request again.
type lease struct {
	origin time.Time    // carries the monotonic reading every instant is measured from
	last   atomic.Int64 // since origin; 0 before the first answer
	back   atomic.Int64 // since origin, of the first answer after the last lapse; 0 for none
	// ended is the instant at which the coordinator may have
	// expired the session of the current generation (it had not been
	// heard from for a whole session timeout), 0 while it is alive. The
	// lease does not renew until the member joins a new generation
	// (newGeneration), or until the generation outlives two heartbeats
	// after endedSeen, when it was found, with the coordinator answering:
	// a heartbeat the coordinator refused (the session expired) ends the
	// generation at once, so the heartbeats since were answered as those
	// of a live session. A silence can be the member's own (its process
	// stopped, starved of CPU: the answers waited unread) or a
	// coordinator that stalled as a whole, its session clock with it.
	ended, endedSeen atomic.Int64
	// inGen is true while the member is in a generation: silences only
	// count then (a JoinGroup waits at the coordinator for the other
	// members, which is no lapse). lapsed says the last generation ended
	// in a silence (its heartbeat timed out): the next answer ends the
	// lapse.
	inGen, lapsed atomic.Bool
	genStart      atomic.Int64 // since origin, when the current generation started
	session       time.Duration
	heartbeat     time.Duration
}

func newLease(session, heartbeat time.Duration) *lease {
	return &lease{origin: time.Now(), session: session, heartbeat: heartbeat}
}

// at returns t as nanoseconds since origin on the monotonic clock (t
// from time.Now; the tests' instants without a monotonic reading are
// measured on the wall clock), never 0, which stands for none.
func (l *lease) at(t time.Time) int64 {
	if ns := int64(t.Sub(l.origin)); ns != 0 {
		return ns
	}
	return 1
}

// time returns the instant ns (since origin) as a time.Time that
// compares with time.Now on the monotonic clock.
func (l *lease) time(ns int64) time.Time { return l.origin.Add(time.Duration(ns)) }

// leaseMargin is how long before the coordinator's earliest possible
// expiry a lease lapses.
func leaseMargin(session time.Duration) time.Duration {
	return min(session/5, 2*time.Second)
}

func (l *lease) Expiry() time.Time {
	last := l.last.Load()
	if last == 0 {
		return time.Time{}
	}
	if ended := l.ended.Load(); ended != 0 {
		return l.time(ended).Add(-leaseMargin(l.session))
	}
	return l.time(last).Add(l.session - leaseMargin(l.session))
}

// newGeneration is called when the member joins a generation, at now: a
// session that ended before belongs to an earlier one, and silences are
// counted from now at the earliest.
func (l *lease) newGeneration(now time.Time) {
	l.genStart.Store(l.at(now))
	l.ended.Store(0)
	l.endedSeen.Store(0)
	l.lapsed.Store(false)
	l.inGen.Store(true)
}

// endGeneration is called when the member's generation ended, at now. It
// ended in a silence when the coordinator had not answered for longer
// than a heartbeat interval (the heartbeat timed out: a cut link, a
// broker away); an answer (an error: a rebalance, an unknown member)
// ends it right after the answer.
func (l *lease) endGeneration(now time.Time) {
	if l.inGen.Swap(false) {
		if last := l.last.Load(); last != 0 && l.at(now)-last > int64(l.heartbeat) {
			l.lapsed.Store(true)
		}
	}
}

// renew records an answer of the coordinator at now. In a generation, an
// answer after a silence long enough for the lease to have lapsed marks
// the lapse's end, unless the silence outlasted the session: then the
// first answer more than two heartbeats later in the same generation
// does (ended); between generations, the first answer after a generation
// that ended in a silence does.
func (l *lease) renew(now time.Time) {
	ns := l.at(now)
	prev := l.last.Swap(ns)
	if prev == 0 {
		return
	}
	if !l.inGen.Load() {
		if l.lapsed.Swap(false) {
			l.back.Store(ns)
		}
		return
	}
	if seen := l.endedSeen.Load(); seen != 0 {
		if ns-seen > int64(2*l.heartbeat) {
			l.ended.Store(0)
			l.endedSeen.Store(0)
			l.back.Store(ns)
		}
		return
	}
	prev = max(prev, l.genStart.Load())
	if ns-prev > int64(l.session-leaseMargin(l.session)) {
		l.back.Store(ns)
	}
	// The coordinator heard from the member at the latest when it sent
	// its previous answer: silent for longer than the session, it may
	// have expired the session.
	if ns-prev > int64(l.session) && l.ended.CompareAndSwap(0, prev+int64(l.session)) {
		l.endedSeen.Store(ns)
	}
}

// lapseEnded returns when the coordinator answered again after the lease
// last lapsed; zero when it never lapsed.
func (l *lease) lapseEnded() time.Time {
	back := l.back.Load()
	if back == 0 {
		return time.Time{}
	}
	return l.time(back)
}

// dialer wraps dial: every answer read on its connections renews l.
func (l *lease) dialer(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &leaseConn{Conn: c, l: l}, nil
	}
}

type leaseConn struct {
	net.Conn
	l *lease
}

func (c *leaseConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.l.renew(time.Now())
	}
	return n, err
}
