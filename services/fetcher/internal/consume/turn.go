package consume

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
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
	// Nothing of the host left in the partition: its connection is closed
	// now rather than kept idle, so that the fetcher holds a connection
	// per host in flight, not per host of the last --idle-conn-timeout.
	// The engine holds the host's turns off meanwhile: a request of the
	// host read since this turn ended may have begun a turn on another
	// worker, and closing its connection would cut that request after it
	// was sent (the site answers a request the fetcher never reads).
	h.p.Engine().WhenIdle(host, func() { h.s.fetch.Release(host) })
}

// process runs one turn of host: the steps its partition returns
// (partition.Partition.Turn and those after it), with the requests, the
// page budget's charge and the outcomes between them. Its requests run
// under the partition's lease (kafkaio.LeaseGuard): none while it has
// lapsed, and those in flight when it lapses are put back in the queue.
func (h *handler) process(ctx context.Context, host string, t *partition.Task) {
	s := h.s
	rctx, ok := h.lease.RequestContext()
	if !ok {
		h.p.Wait(host, t, s.opts.Now().Add(kafkaio.LeaseCheck))
		return
	}
	req := h.s.request(t)
	origin, _ := robots.Origin(req.GetUrl()) // checked when the record was read
	set := s.settings(t.Crawl)
	var rules *robots.Rules
	step := h.p.Turn(host, t, decide.TurnInput{
		State: h.s.crawlState(t.Crawl), Attempt: t.ID.Attempt, NotBefore: t.NotBeforeTime(),
		Robots: func() decide.Robots {
			var fresh bool
			rules, fresh = s.robots.LookupAs(origin, set.Identity.Agent)
			if !fresh {
				return decide.Robots{}
			}
			return decide.Robots{Fresh: true, Unavailable: rules.Outcome == robots.Unavailable, FetchedAt: rules.FetchedAt}
		},
		Spent: func() bool { return h.s.spent(ctx, t) },
	})
	switch step {
	case decide.Cancelled:
		h.recordCancelled(ctx, []*partition.Task{t})
	case decide.Paused:
		h.hold(ctx, t)
	case decide.Refused:
		// Not even robots.txt is asked for a page the budget refuses.
		h.recordSpent(ctx, []*partition.Task{t})
	case decide.FetchRobots:
		h.fetchRobots(ctx, rctx, host, t, origin, set)
	case decide.TakePage:
		allowed, exempted := robotsAllow(t, rules, set)
		left := int64(-1)
		if t.Charged {
			left = s.opts.Budget.Remaining(t.Crawl)
		}
		step, yielded := h.p.Page(host, t, partition.PageTurn{CrawlDelay: rules.CrawlDelay, Crawl: set.Politeness, Left: left, Allowed: allowed})
		if yielded {
			s.m.budgetYields.Inc()
			return
		}
		switch h.p.Charged(host, t, step, h.charge(ctx, t, step)) {
		case decide.Deny:
			h.refuse(ctx, t, rules)
		case decide.Fetch:
			if exempted {
				h.s.serpFetched(host, t)
			}
			h.fetchPage(ctx, rctx, host, t, set, rules)
		case decide.Refused: // recorded by the charge
		}
	}
}

// fetchRobots takes host's turn for robots.txt (decide.FetchRobots): the
// page waits the delay after it. The request runs under rctx.
func (h *handler) fetchRobots(ctx, rctx context.Context, host string, t *partition.Task, origin string, set crawlsettings.Settings) {
	s := h.s
	server, ok := h.claimServer(rctx, host, t)
	if !ok {
		return
	}
	rules := s.robots.FetchAs(rctx, origin, host, robots.As{UserAgent: set.Identity.UserAgent, Header: set.Identity.Headers})
	end := s.opts.Now()
	s.opts.Servers.Done(server, end)
	if rctx.Err() != nil {
		h.p.CutShort(host, t, end)
		return
	}
	t.Robots = h.s.robotsRows(h.partition, host, rules)
	h.s.publishSitemaps(ctx, t, rules)
	allowed, _ := robotsAllow(t, rules, set) // an exemption counts when its request is made, at the next turn
	step, capped := h.p.RobotsFetched(host, t, partition.RobotsTurn{End: end, CrawlDelay: rules.CrawlDelay, Crawl: set.Politeness, Allowed: allowed})
	if capped {
		s.m.crawlDelayCaped.Inc()
		h.log.Info("capped crawl delay", telemetry.Host(host), zap.Duration("crawl_delay", rules.CrawlDelay))
	}
	if step.Charges() && h.p.RobotsCharged(t, step, h.charge(ctx, t, step)) == decide.Deny {
		h.refuse(ctx, t, rules)
	}
}

// fetchPage requests t's page (decide.Fetch) under rctx, feeds the answer
// back to its partition and records the outcome.
func (h *handler) fetchPage(ctx, rctx context.Context, host string, t *partition.Task, set crawlsettings.Settings, rules *robots.Rules) {
	s := h.s
	req := t.Req
	r := httpfetch.Request{URL: req.GetUrl(), Host: host, Sitemap: strings.HasSuffix(req.GetParentUrl(), "/robots.txt"),
		ETag: req.GetEtag(), LastModified: req.GetLastModified(), Capture: s.opts.Archive != nil,
		UserAgent: set.Identity.UserAgent, Header: set.Identity.Headers, Keep: set.Documents}
	server, ok := h.claimServer(rctx, host, t)
	if !ok {
		h.uncharge(t) // back in its queue: charged again at its turn
		return
	}
	res := s.fetch.Fetch(rctx, r)
	s.renderer.Render(rctx, t.Req, host, res, rules, set)
	end := s.opts.Now()
	s.opts.Servers.Done(server, end)
	if rctx.Err() != nil {
		h.uncharge(t)
		h.p.CutShort(host, t, end)
		return
	}
	h.p.Fetched(host, t, partition.Answer{End: end, Took: res.Duration, Status: res.Status, Kind: res.Kind, RetryAfter: res.RetryAfter})
	if s.opts.HostStates != nil {
		t.HostState = h.p.Changed(host)
	}
	if !h.s.archive(ctx, t, res) {
		return
	}
	h.finish(ctx, t, res)
}

// archive writes the exchange of t's fetch to the WARC archive, when one
// is configured, before its outcome is recorded: an attempt is acked only
// once its records are written. On failure t is left unacked (redelivered
// after a restart or rebalance) and archive returns false.
func (s *Service) archive(ctx context.Context, t *partition.Task, res *httpfetch.Response) bool {
	if s.opts.Archive == nil {
		return true
	}
	file, off, err := s.opts.Archive.Archive(ctx, t.Req, res)
	if err != nil {
		s.log.Warn("left fetch unacked, not archived; redelivered later", telemetry.URL(t.Req.GetUrl()), zap.Error(err))
		return false
	}
	t.WarcFile, t.WarcOffset = file, off
	return true
}

// claimServer claims the server of host (Options.Servers, Gate.Claim)
// for the request t is about to make and returns its key for Gate.Done.
// When another host's request holds the server, t goes back to the head
// of host's queue until the server may be free, the host's turn ends, and
// ok is false.
func (h *handler) claimServer(ctx context.Context, host string, t *partition.Task) (key string, ok bool) {
	key, retryAt, ok := h.s.opts.Servers.Claim(ctx, h.s.opts.Resolve, host)
	if !ok {
		h.s.m.serverWaits.Inc()
		h.p.Wait(host, t, retryAt)
	}
	return key, ok
}

// publishSitemaps reports the Sitemap lines of a freshly fetched robots.txt
// as DiscoveredURLs of the crawl whose request fetched it
// (emit.Encoder.Sitemaps). Best effort: a failure is logged; the lines
// come back with the next robots.txt fetch.
func (s *Service) publishSitemaps(ctx context.Context, t *partition.Task, rules *robots.Rules) {
	msgs := s.enc.Sitemaps(t.Req, rules)
	if len(msgs) == 0 {
		return
	}
	if err := s.prod.Write(ctx, msgs...); err != nil {
		s.log.Warn("lost robots.txt sitemaps", telemetry.URL(rules.Origin), zap.Error(err))
		return
	}
	s.m.sitemaps.Add(float64(len(msgs)))
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

// The page budget at a host's turn: refused, charged, yielded, given
// back (the rules are decide's Charged and Yield).

// spent reports whether t would be refused by its crawl's page budget,
// without charging anything.
func (s *Service) spent(ctx context.Context, t *partition.Task) bool {
	if !t.Charged {
		return false
	}
	spent, err := s.opts.Budget.Exhausted(ctx, t.Crawl)
	if err != nil {
		s.log.Warn("checked page budget on this fetcher's count only", telemetry.Crawl(t.Crawl), zap.Error(err))
	}
	return spent
}

// charge charges t's page budget for step when the step Charges (a
// request or a refusal: decide.Settle) and t is charged to one, and
// reports whether a page was left; when none was, t is recorded as
// failure.BudgetExhausted. A count that could not be read is logged; the
// page is charged on the local count.
func (h *handler) charge(ctx context.Context, t *partition.Task, step decide.Step) bool {
	if !step.Charges() || !t.Charged {
		return true
	}
	ok, err := h.s.opts.Budget.Reserve(ctx, t.Crawl)
	if err != nil {
		h.log.Warn("charged page budget on this fetcher's count only", telemetry.Crawl(t.Crawl), zap.Error(err))
	}
	if !ok {
		h.recordSpent(ctx, []*partition.Task{t})
	}
	return ok
}

// uncharge gives back t's page when its turn made no request after all.
func (h *handler) uncharge(t *partition.Task) {
	if t.Charged {
		h.s.opts.Budget.Unreserve(t.Crawl)
		h.p.Uncharged(t)
	}
}
