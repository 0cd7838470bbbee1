package consume

import (
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// The search engines' robots.txt disallow their result pages (/search,
// /s, /html/), so a crawl seeded from keywords (seed 001) would refuse
// every seed it has. A crawl may therefore ask, explicitly, for one
// exception: politeness.serp_ignore_robots fetches the result pages the
// seeder generated from the crawl's keywords although robots.txt
// disallows them. Only those: a request with serp_engine set, at depth 0,
// not reached through a redirect (a redirect target inherits serp_engine,
// but is the engine's answer, not the user's query). The result links the
// parser extracts, every other URL of the engine's host and of every other
// host, and robots.txt that cannot be read are never exempt. Every
// exempted request is counted (serp_robots_overridden_total) and the first
// of each crawl and host is logged (past telemetry.MaxOnce pairs, at
// debug).

// robotsAllow reports whether t may be requested under rules
// (robots.Verdict.Allow), and whether only its crawl's exemption for its
// result pages allows it (decide.SERPExempt; counted and logged by
// serpFetched when the request is made).
func robotsAllow(t *partition.Task, rules *robots.Rules, set crawlsettings.Settings) (allow, exempted bool) {
	req := t.Req
	return rules.Check(req.GetUrl()).Allow(func() bool {
		return decide.SERPExempt(req.GetSerpEngine(), req.GetDepth(), req.GetRedirectHops(), set.SERPIgnoreRobots)
	})
}

// serpFetched counts and logs a result page fetched that robots.txt
// disallows, as its crawl asks (serp_ignore_robots).
func (s *Service) serpFetched(host string, t *partition.Task) {
	s.m.serpRobotsOverridden.Inc()
	fields := []zap.Field{telemetry.Crawl(t.Crawl), telemetry.Host(host),
		zap.String("serp_engine", t.Req.GetSerpEngine()), telemetry.URL(t.Req.GetUrl())}
	if s.serpLogged.First(t.Crawl, host) {
		s.log.Info("fetching search result page that robots.txt disallows, as the crawl asks (serp_ignore_robots)", fields...)
	} else {
		s.log.Debug("fetching search result page that robots.txt disallows, as the crawl asks (serp_ignore_robots)", fields...)
	}
}
