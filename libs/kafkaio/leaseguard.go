package kafkaio

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// LeaseCheck is how often a LeaseGuard compares its lease with the clock,
// and how soon a handler should retry work refused for a lapsed lease.
const LeaseCheck = 200 * time.Millisecond

// LeaseGuard holds the context of a partition's requests under the group
// lease (Lease): cancelled when the lease lapses, made anew when it is
// renewed.
//
// The fetcher runs its requests to the sites under it. A fetcher cut off
// from the brokers learns that its partitions went to another fetcher
// only when its heartbeat fails; until then it would go on requesting
// pages of hosts whose new owner requests them too, and requests held up
// in a cut link would reach the sites when it comes back, next to the new
// owner's. So a partition makes requests only while its lease holds: when
// the coordinator has not answered for nearly a session timeout, before
// it can have given the partition away, the requests in flight are
// cancelled (their connections reset: the fetcher's httpfetch discards
// what they had not sent) and put back at the head of their queues, and
// no turn makes a request until the coordinator answers again. If the
// generation ended meanwhile, the partition closes as usual and its
// records go unacked to the next owner.
type LeaseGuard struct {
	log    *zap.Logger
	lapses prometheus.Counter // the handler's count of lapses (the fetcher's crawler_fetcher_group_lease_lapses_total)

	mu     sync.Mutex
	ctx    context.Context //nolint:containedctx // the requests' context, replaced as the lease lapses and holds
	cancel context.CancelFunc
	lapsed bool
	done   sync.WaitGroup // the watch goroutine
}

// NewLeaseGuard returns the LeaseGuard of a partition: log tells when its
// lease lapses and holds again, lapses counts the lapses. Its requests
// have no context before Watch.
func NewLeaseGuard(log *zap.Logger, lapses prometheus.Counter) *LeaseGuard {
	return &LeaseGuard{log: log, lapses: lapses}
}

// Watch starts the partition's lease guard under runCtx (the
// partition's in-flight context); without a lease (a handler not run by
// a Group) requests run under runCtx alone. The guard stops watching when
// runCtx is done (Wait).
func (g *LeaseGuard) Watch(runCtx context.Context, lease Lease) {
	g.ctx, g.cancel = context.WithCancel(runCtx)
	if lease == nil {
		return
	}
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		t := time.NewTicker(LeaseCheck)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				g.check(runCtx, lease.Expiry())
			}
		}
	}()
}

// Wait returns once the goroutine Watch started has ended (its runCtx is
// done).
func (g *LeaseGuard) Wait() { g.done.Wait() }

// check lapses or renews the lease as expiry says.
func (g *LeaseGuard) check(runCtx context.Context, expiry time.Time) {
	lapsed := !expiry.IsZero() && time.Now().After(expiry)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case lapsed && !g.lapsed:
		g.lapsed = true
		g.cancel()
		g.lapses.Inc()
		g.log.Warn("kafka group coordinator silent for nearly a session timeout: requests stopped, in-flight ones cancelled and queued again, until it answers",
			zap.Time("lease_expired", expiry))
	case !lapsed && g.lapsed:
		g.lapsed = false
		g.ctx, g.cancel = context.WithCancel(runCtx)
		g.log.Info("kafka group coordinator answers again: requests resume")
	}
}

// RequestContext returns the context of a request of the partition, and
// false while the lease has lapsed (no request may start).
func (g *LeaseGuard) RequestContext() (context.Context, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ctx, !g.lapsed
}
