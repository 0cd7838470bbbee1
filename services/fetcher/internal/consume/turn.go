package consume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// A turn of a host: robots.txt when it is due, the server gate, the fetch
// and the politeness feedback of its answer.

// turn is the dispatch.Work of a partition: one turn of host with t,
// taken from the engine at dispatched.
func (h *handler) turn(ctx context.Context, host string, t *partition.Task, dispatched time.Time) {
	if !t.Waited {
		t.Waited = true
		h.s.m.politenessWait.Observe(dispatched.Sub(time.Unix(0, t.Enqueued)).Seconds())
	}
	h.process(ctx, host, t)
	if queued, _, _ := h.engine.HostQueue(host); queued == 0 {
		// Nothing of the host left in the partition: its connection is
		// closed now rather than kept idle, so that the fetcher holds a
		// connection per host in flight, not per host of the last
		// --idle-conn-timeout.
		h.s.fetch.Release(host)
	}
	h.syncGauges() // the dispatcher looks for the next host on return
}

// process runs one turn of host: the step decide.Turn chooses. Its
// requests run under the partition's lease (lease.go): none while it has
// lapsed, and those in flight when it lapses are put back in the queue.
func (h *handler) process(ctx context.Context, host string, t *partition.Task) {
	s := h.s
	rctx, ok := h.requestContext()
	if !ok {
		partition.Compact(t)
		h.engine.Requeue(host, t, s.opts.Now().Add(leaseCheck))
		return
	}
	req := h.request(t)
	origin, _ := robots.Origin(req.GetUrl()) // checked when the record was read
	id := s.identityOf(t.Crawl)
	var rules *robots.Rules
	step := decide.Turn(decide.TurnInput{
		State: h.crawlState(t.Crawl), Attempt: t.ID.Attempt, NotBefore: t.NotBeforeTime(),
		Robots: func() decide.Robots {
			var fresh bool
			rules, fresh = s.robots.LookupAs(origin, id.agent)
			if !fresh {
				return decide.Robots{}
			}
			return decide.Robots{Fresh: true, Unavailable: rules.Outcome == robots.Unavailable, FetchedAt: rules.FetchedAt}
		},
		Spent: func() bool { return h.spent(ctx, t) },
	})
	switch step {
	case decide.Cancelled:
		h.engine.Release(host) // no request made
		h.p.Pending(t, false)
		h.recordCancelled(ctx, []*partition.Task{t})
	case decide.Paused:
		h.engine.Release(host)
		h.hold(ctx, t)
	case decide.Refused:
		// Not even robots.txt is asked for a page the budget refuses.
		h.engine.Release(host)
		h.p.Pending(t, false)
		h.recordSpent(ctx, []*partition.Task{t})
	case decide.FetchRobots:
		h.fetchRobots(ctx, rctx, host, t, origin, id)
	case decide.TakePage:
		h.setDelay(host, t, rules.CrawlDelay)
		if h.yieldToBetter(host, t) {
			return
		}
		allowed, exempted := h.robotsAllow(t, rules)
		switch step := h.settle(ctx, t, decide.Page(allowed)); step {
		case decide.Refused: // recorded by the charge
			h.engine.Release(host) // no request made: the delay clock is unchanged
		case decide.Deny:
			h.engine.Release(host) // no request made: the delay clock is unchanged
			h.refuse(ctx, t, rules)
		case decide.Fetch:
			if exempted {
				h.serpFetched(host, t)
			}
			h.fetchPage(ctx, rctx, host, t, id)
		}
	}
}

// fetchRobots takes host's turn for robots.txt (decide.FetchRobots): the
// page waits the delay after it. The request runs under rctx.
func (h *handler) fetchRobots(ctx, rctx context.Context, host string, t *partition.Task, origin string, id ident) {
	s := h.s
	server, ok := h.claimServer(rctx, host, t)
	if !ok {
		return
	}
	rules := s.robots.FetchAs(rctx, origin, host, id.robotsAs())
	h.serverDone(server, s.opts.Now())
	if rctx.Err() != nil {
		h.cutShort(host, t, s.opts.Now())
		return
	}
	s.m.robots.WithLabelValues(string(rules.Outcome)).Inc()
	t.Robots = h.robotsRows(host, rules)
	h.publishSitemaps(ctx, t, rules)
	if h.setDelay(host, t, rules.CrawlDelay) {
		s.m.crawlDelayCaped.Inc()
		h.log.Info("capped crawl delay", telemetry.Host(host), zap.Duration("crawl_delay", rules.CrawlDelay))
	}
	h.engine.Done(host, s.opts.Now())
	allowed, _ := h.robotsAllow(t, rules) // an exemption counts when its request is made, at the next turn
	switch h.settle(ctx, t, decide.AfterRobots(allowed)) {
	case decide.Requeue:
		partition.Compact(t)
		h.engine.PushFront(host, t)
	case decide.Deny:
		h.refuse(ctx, t, rules)
	case decide.Refused: // recorded by the charge
	}
}

// fetchPage requests t's page (decide.Fetch) under rctx, feeds the answer
// back to host's politeness and records the outcome.
func (h *handler) fetchPage(ctx, rctx context.Context, host string, t *partition.Task, id ident) {
	s := h.s
	req := t.Req
	r := httpfetch.Request{URL: req.GetUrl(), Host: host, Sitemap: strings.HasSuffix(req.GetParentUrl(), "/robots.txt"),
		ETag: req.GetEtag(), LastModified: req.GetLastModified(), Capture: s.opts.Archive != nil,
		UserAgent: id.userAgent, Header: id.headers, Keep: s.keptTypes(t.Crawl)}
	server, ok := h.claimServer(rctx, host, t)
	if !ok {
		h.uncharge(t) // back in its queue: charged again at its turn
		return
	}
	res := s.fetch.Fetch(rctx, r)
	end := s.opts.Now()
	h.serverDone(server, end)
	h.engine.ObserveDuration(host, res.Duration)
	if rctx.Err() != nil {
		h.uncharge(t)
		h.cutShort(host, t, end)
		return
	}
	switch {
	case politeness.SlowsDown(res.Status, res.Kind):
		h.engine.SlowDown(host, end, res.RetryAfter)
		t.RetryAfter = end.Add(res.RetryAfter).UnixNano()
	case res.Status > 0:
		h.engine.Recovered(host)
	}
	if res.ReplayRefused {
		s.m.replaysRefused.Inc()
	}
	class := statusClass(res.Status)
	s.m.fetchDuration.WithLabelValues(class).Observe(res.Duration.Seconds())
	s.m.bytes.Add(float64(res.BodyBytes))
	h.engine.Done(host, end)
	t.HostState = h.changedState(host)
	if !h.archive(ctx, t, res) {
		return
	}
	h.finish(ctx, t, res)
}

// cutShort ends the turn of a request cancelled in flight (a close, or
// the lease lapsed): the host's delay runs from end, as after any request
// that may have reached it, and t waits at the head of its queue for the
// host's next turn; at a close it is handed back unacked with the rest.
func (h *handler) cutShort(host string, t *partition.Task, end time.Time) {
	h.engine.Done(host, end)
	partition.Compact(t)
	h.engine.PushFront(host, t)
}

// archive writes the exchange of t's fetch to the WARC archive, when one
// is configured, before its outcome is recorded: an attempt is acked only
// once its records are written. On failure t is left unacked (redelivered
// after a restart or rebalance) and archive returns false.
func (h *handler) archive(ctx context.Context, t *partition.Task, res *httpfetch.Response) bool {
	if h.s.opts.Archive == nil {
		return true
	}
	file, off, err := h.s.opts.Archive.Archive(ctx, t.Req, res)
	if err != nil {
		h.log.Warn("left fetch unacked, not archived; redelivered later", telemetry.URL(t.Req.GetUrl()), zap.Error(err))
		return false
	}
	t.WarcFile, t.WarcOffset = file, off
	return true
}

// claimServer claims the server of host (Options.Servers) for the request
// t is about to make and returns its key ("" when servers are not grouped
// or host does not resolve: nothing to release). When another host's
// request holds the server, t goes back to the head of host's queue until
// the server may be free, the host's turn ends, and ok is false.
func (h *handler) claimServer(ctx context.Context, host string, t *partition.Task) (key string, ok bool) {
	s := h.s
	if s.opts.Servers == nil {
		return "", true
	}
	addr, err := s.opts.Resolve(ctx, host)
	if err != nil {
		// the fetch fails on the same error and records it
		return "", true
	}
	key = politeness.ServerKey(addr)
	claimed, retryAt := s.opts.Servers.Acquire(key)
	if !claimed {
		s.m.serverWaits.Inc()
		partition.Compact(t)
		h.engine.Requeue(host, t, retryAt)
		return "", false
	}
	return key, true
}

// serverDone ends the request claimed by claimServer.
func (h *handler) serverDone(key string, end time.Time) {
	if key != "" {
		h.s.opts.Servers.Done(key, end)
	}
}

// maxSitemaps bounds the Sitemap lines of one robots.txt published.
const maxSitemaps = 50

// publishSitemaps reports the Sitemap lines of a freshly fetched robots.txt
// as DiscoveredURLs (source SITEMAP) of the crawl whose request fetched it,
// at that request's depth (so a sitemap never widens a depth-limited
// crawl), to be deduplicated and scheduled like any URL. Best effort: a
// failure is logged; the lines come back with the next robots.txt fetch.
func (h *handler) publishSitemaps(ctx context.Context, t *partition.Task, rules *robots.Rules) {
	if len(rules.Sitemaps) == 0 {
		return
	}
	now := timestamppb.New(h.s.opts.Now())
	var msgs []kafka.Message
	for _, sm := range rules.Sitemaps[:min(len(rules.Sitemaps), maxSitemaps)] {
		u, err := urlcanon.Canonicalize(sm)
		if err != nil {
			continue
		}
		key, err := kafkaio.Key(u)
		if err != nil {
			continue
		}
		m, err := kafkaio.NewMessage(h.s.opts.Topics.Discovered, key, &crawlv1.DiscoveredURL{
			CrawlId:      t.Req.GetCrawlId(),
			Url:          u,
			Depth:        t.Req.GetDepth(),
			ParentUrl:    rules.Origin + "/robots.txt",
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_SITEMAP,
		})
		if err == nil {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return
	}
	if err := h.s.prod.Write(ctx, msgs...); err != nil {
		h.log.Warn("lost robots.txt sitemaps", telemetry.URL(rules.Origin), zap.Error(err))
		return
	}
	h.s.m.sitemaps.Add(float64(len(msgs)))
}

// refuse records a URL that robots.txt denies or that cannot be fetched
// now because robots.txt is unavailable (decide.Refusal).
func (h *handler) refuse(ctx context.Context, t *partition.Task, rules *robots.Rules) {
	unavailable := rules.Outcome == robots.Unavailable
	res := &httpfetch.Response{Start: h.s.opts.Now(), Kind: decide.Refusal(unavailable, rules.Kind), Err: errors.New("disallowed by robots.txt")}
	if unavailable {
		res.Err = rules.Err
		if res.Err == nil {
			res.Err = fmt.Errorf("robots.txt unavailable (status %d)", rules.Status)
		}
	}
	h.s.m.robotsVerdicts.WithLabelValues(robotsVerdict(res.Kind)).Inc()
	h.finish(ctx, t, res)
}

func robotsVerdict(k failure.Kind) string {
	if k == failure.RobotsDenied {
		return "disallowed"
	}
	return "unavailable"
}

// setDelay applies the Crawl-delay d of host's robots.txt with the
// politeness of t's crawl, when its spec has one: the crawl's delay raises
// the host's delay and its max_crawl_delay replaces the cap, never below
// the fetcher's --delay floor. A host shared by crawls takes, after each
// request, the delay of that request's crawl.
func (h *handler) setDelay(host string, t *partition.Task, d time.Duration) (capped bool) {
	var p hostdelay.Crawl
	if h.s.opts.Crawls != nil {
		p = crawlsettings.PolitenessOf(h.s.opts.Crawls.Get(t.Crawl))
	}
	return h.engine.SetHostDelay(host, d, p)
}

// The page budget at a host's turn: refused, charged, yielded, given
// back (the rules are decide's Charged and Yield).

// spent reports whether t would be refused by its crawl's page budget,
// without charging anything.
func (h *handler) spent(ctx context.Context, t *partition.Task) bool {
	if !t.Charged {
		return false
	}
	spent, err := h.s.opts.Budget.Exhausted(ctx, t.Crawl)
	if err != nil {
		h.log.Warn("checked page budget on this fetcher's count only", telemetry.Crawl(t.Crawl), zap.Error(err))
	}
	return spent
}

// settle charges t's page budget before step when the step Charges (a
// request or a refusal: decide.Settle) and returns the step that follows:
// Refused when no page was left, recorded as failure.BudgetExhausted. A
// count that could not be read is logged; the page is charged on the
// local count.
func (h *handler) settle(ctx context.Context, t *partition.Task, step decide.Step) decide.Step {
	if !step.Charges() || !t.Charged {
		return step
	}
	ok, err := h.s.opts.Budget.Reserve(ctx, t.Crawl)
	h.p.Pending(t, false) // charged, or refused: no longer a page to come
	if err != nil {
		h.log.Warn("charged page budget on this fetcher's count only", telemetry.Crawl(t.Crawl), zap.Error(err))
	}
	if !ok {
		h.recordSpent(ctx, []*partition.Task{t})
	}
	return decide.Settle(step, ok)
}

// yieldToBetter asks the partition whether t gives its turn up to
// better-ranked requests of its crawl (partition.Partition.Yield), and
// counts it when it does.
func (h *handler) yieldToBetter(host string, t *partition.Task) bool {
	left := int64(-1)
	if t.Charged {
		left = h.s.opts.Budget.Remaining(t.Crawl)
	}
	if !h.p.Yield(host, t, left) {
		return false
	}
	h.s.m.budgetYields.Inc()
	return true
}

// uncharge gives back t's page when its turn made no request after all.
func (h *handler) uncharge(t *partition.Task) {
	if t.Charged {
		h.s.opts.Budget.Unreserve(t.Crawl)
		h.p.Pending(t, true)
	}
}
