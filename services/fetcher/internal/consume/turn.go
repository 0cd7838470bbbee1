package consume

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
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
	if queued, _, _ := h.p.Engine().HostQueue(host); queued == 0 {
		// Nothing of the host left in the partition: its connection is
		// closed now rather than kept idle, so that the fetcher holds a
		// connection per host in flight, not per host of the last
		// --idle-conn-timeout.
		h.s.fetch.Release(host)
	}
	h.syncGauges() // the dispatcher looks for the next host on return
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
	id := s.identityOf(t.Crawl)
	var rules *robots.Rules
	step := h.p.Turn(host, t, decide.TurnInput{
		State: h.s.crawlState(t.Crawl), Attempt: t.ID.Attempt, NotBefore: t.NotBeforeTime(),
		Robots: func() decide.Robots {
			var fresh bool
			rules, fresh = s.robots.LookupAs(origin, id.agent)
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
		h.fetchRobots(ctx, rctx, host, t, origin, id)
	case decide.TakePage:
		allowed, exempted := h.s.robotsAllow(t, rules)
		left := int64(-1)
		if t.Charged {
			left = s.opts.Budget.Remaining(t.Crawl)
		}
		step, yielded := h.p.Page(host, t, partition.PageTurn{CrawlDelay: rules.CrawlDelay, Crawl: h.s.politeness(t.Crawl), Left: left, Allowed: allowed})
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
			h.fetchPage(ctx, rctx, host, t, id, rules)
		case decide.Refused: // recorded by the charge
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
	end := s.opts.Now()
	s.serverDone(server, end)
	if rctx.Err() != nil {
		h.p.CutShort(host, t, end)
		return
	}
	s.m.robots.WithLabelValues(string(rules.Outcome)).Inc()
	t.Robots = h.s.robotsRows(h.partition, host, rules)
	h.s.publishSitemaps(ctx, t, rules)
	allowed, _ := h.s.robotsAllow(t, rules) // an exemption counts when its request is made, at the next turn
	step, capped := h.p.RobotsFetched(host, t, partition.RobotsTurn{End: end, CrawlDelay: rules.CrawlDelay, Crawl: h.s.politeness(t.Crawl), Allowed: allowed})
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
func (h *handler) fetchPage(ctx, rctx context.Context, host string, t *partition.Task, id ident, rules *robots.Rules) {
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
	s.render(rctx, t, res, rules, id)
	end := s.opts.Now()
	s.serverDone(server, end)
	if rctx.Err() != nil {
		h.uncharge(t)
		h.p.CutShort(host, t, end)
		return
	}
	h.p.Fetched(host, t, partition.Answer{End: end, Took: res.Duration, Status: res.Status, Kind: res.Kind, RetryAfter: res.RetryAfter})
	if res.ReplayRefused {
		s.m.replaysRefused.Inc()
	}
	class := statusClass(res.Status)
	s.m.fetchDuration.WithLabelValues(class).Observe(res.Duration.Seconds())
	s.m.bytes.Add(float64(res.BodyBytes))
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
		h.p.Wait(host, t, retryAt)
		return "", false
	}
	return key, true
}

// serverDone ends the request claimed by claimServer.
func (s *Service) serverDone(key string, end time.Time) {
	if key != "" {
		s.opts.Servers.Done(key, end)
	}
}

// maxSitemaps bounds the Sitemap lines of one robots.txt published.
const maxSitemaps = 50

// publishSitemaps reports the Sitemap lines of a freshly fetched robots.txt
// as DiscoveredURLs (source SITEMAP) of the crawl whose request fetched it,
// at that request's depth (so a sitemap never widens a depth-limited
// crawl), to be deduplicated and scheduled like any URL. Best effort: a
// failure is logged; the lines come back with the next robots.txt fetch.
func (s *Service) publishSitemaps(ctx context.Context, t *partition.Task, rules *robots.Rules) {
	if len(rules.Sitemaps) == 0 {
		return
	}
	now := timestamppb.New(s.opts.Now())
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
		m, err := kafkaio.NewMessage(s.opts.Topics.Discovered, key, &crawlv1.DiscoveredURL{
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

// politeness is the politeness of crawl's spec (zero: none), which with
// a host's Crawl-delay sets the host's delay (politeness.Engine's
// SetHostDelay): the crawl's delay raises it and its max_crawl_delay
// replaces the cap, never below the fetcher's --delay floor. A host shared
// by crawls takes, after each request, the delay of that request's crawl.
func (s *Service) politeness(crawl string) hostdelay.Crawl {
	return crawlsettings.PolitenessOf(s.spec(crawl))
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

// render replaces the body of res, t's page, with the DOM a headless
// browser builds from it (Options.Renderer) when the page came with a 200
// and its crawl's render mode says it needs it (rendersniff). The browser
// reads the page from the fetched body (it is not asked of the site
// again) and asks the site only for what the page's scripts and styles
// need, as t's crawl: its robots.txt decides every request, and its user
// agent and headers go with them. It runs within the host's turn, holding
// the host and its server, so the host's delay runs from the end of the
// load. A load that fails or that a page ends otherwise than settled (or
// out of time, with the DOM as it stood) leaves the body as fetched.
func (s *Service) render(ctx context.Context, t *partition.Task, res *httpfetch.Response, rules *robots.Rules, id ident) {
	if res.Status != http.StatusOK || res.Truncated || len(res.Body) == 0 {
		return
	}
	set := crawlsettings.Resolve(s.spec(t.Crawl), crawlsettings.Fleet{Render: s.opts.Render.Spec()})
	v := rendersniff.ModeOf(set.RenderOf(t.Host)).Render(res.Body, res.ContentType)
	if v.Render && s.opts.Renderer == nil {
		v = rendersniff.Verdict{Reason: rendersniff.ReasonNoBrowser}
	}
	s.m.renderVerdicts.WithLabelValues(v.Reason).Inc()
	if !v.Render {
		return
	}
	var headers map[string]string
	if len(id.headers) > 0 {
		headers = make(map[string]string, len(id.headers))
		for _, hd := range id.headers {
			headers[hd.Name] = hd.Value
		}
	}
	start := time.Now()
	page, err := s.opts.Renderer.LoadAs(ctx, t.Req.GetUrl(), browser.As{
		Document: &browser.Document{Status: res.Status, Body: res.Body,
			Header: http.Header{"Content-Type": {res.ContentType + "; charset=utf-8"}}},
		Allow: func(u string) bool {
			if k, err := urlcanon.PolitenessKey(u); err == nil && k != t.Host {
				return true // another host (render.other_hosts): not crawled, so no robots.txt of its own is read
			}
			return rules.Check(u) == robots.Allowed
		},
		UserAgent: id.userAgent, Headers: headers, OtherHosts: set.RenderOtherHosts,
	})
	s.m.renderDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.renders.WithLabelValues("error").Inc()
		s.log.Warn("kept a page as fetched, its rendering failed", telemetry.URL(t.Req.GetUrl()), zap.Error(err))
		return
	}
	s.m.renders.WithLabelValues(string(page.Outcome)).Inc()
	s.archiveRender(ctx, t, res, page)
	if page.HTML == "" || (page.Outcome != browser.OutcomeSettled && page.Outcome != browser.OutcomeTimeout) {
		return
	}
	res.Body, res.Rendered = []byte(page.HTML), string(page.Outcome)
}
