package config

import (
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit"
)

// SpecDepth returns a crawl's max depth: its specification's
// limits.max_depth, else the fleet's --max-depth (crawlsettings.Resolve).
func SpecDepth(specs *crawlcontrol.Specs, fleet crawlsettings.Fleet) func(crawlID string) uint32 {
	return func(crawlID string) uint32 {
		return crawlsettings.Resolve(specs.Get(crawlID), fleet).Depth
	}
}

// SpecScope returns a crawl's scope rules from its specification, when it
// sets a scope, with its scope grants folded in (crawlcontrol's Scoped: the
// sites seeds redirected to); patterns that do not compile are logged once
// per revision and left out (the parser reports them too).
func SpecScope(specs *crawlcontrol.Specs, log *zap.Logger) func(crawlID string) (*scope.Rules, bool) {
	cache := scope.NewCache(scope.Defaults{}, func(crawlID string, err error) {
		log.Warn("crawl scope partly invalid", telemetry.Crawl(crawlID), zap.Error(err))
	})
	return func(crawlID string) (*scope.Rules, bool) {
		spec := specs.Scoped(crawlID)
		if spec.GetScope() == nil {
			return nil, false
		}
		return cache.Rules(crawlID, spec), true
	}
}

// SpecPriority returns a crawl's compiled priority rules from its
// specification (CrawlSpec.priority), compiled once per revision; rules
// that do not compile are logged once per revision and left out, the valid
// ones kept. nil for a crawl without a specification: the default signals.
func SpecPriority(specs *crawlcontrol.Specs, log *zap.Logger) func(crawlID string) *priority.Rules {
	cache := crawlsettings.NewCompiled(func(spec *crawlv1.CrawlSpec) (*priority.Rules, error) {
		return priority.Compile(spec.GetPriority())
	}, func(crawlID string, err error) {
		log.Warn("crawl priority rules partly invalid, the valid ones kept", telemetry.Crawl(crawlID), zap.Error(err))
	})
	return func(crawlID string) *priority.Rules {
		spec := specs.Get(crawlID)
		if spec == nil {
			return nil
		}
		return cache.Get(crawlID, spec)
	}
}

// SpecPages returns a crawl's admission ceiling: its page budget
// (crawlsettings.Resolve: limits.max_pages, else the fleet's --max-pages)
// times factor (AdmitCeiling).
func SpecPages(specs *crawlcontrol.Specs, fleet crawlsettings.Fleet, factor float64) func(crawlID string) int64 {
	return func(crawlID string) int64 {
		return AdmitCeiling(crawlsettings.Resolve(specs.Get(crawlID), fleet).Pages, factor)
	}
}

// PausedCrawls lists the crawls that are PAUSED (crawlcontrol's State: a
// paused crawl past its time limit is cancelled, not paused): the frontier
// pump leaves their URLs pending.
func PausedCrawls(specs *crawlcontrol.Specs) func() []string {
	return func() []string {
		var ids []string
		for _, sp := range specs.All() {
			if specs.State(sp.GetCrawlId()) == crawlv1.CrawlState_CRAWL_STATE_PAUSED {
				ids = append(ids, sp.GetCrawlId())
			}
		}
		return ids
	}
}

// RetiredCrawls lists the crawls that are CANCELLED (crawlcontrol's State:
// by their specification or their time limit): no scheduler admits their
// URLs, so none keeps their fingerprints.
func RetiredCrawls(specs *crawlcontrol.Specs) func() []string {
	return func() []string {
		var ids []string
		for _, sp := range specs.All() {
			if specs.State(sp.GetCrawlId()) == crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
				ids = append(ids, sp.GetCrawlId())
			}
		}
		return ids
	}
}

// SpecRevisit returns a crawl's revisit policy from its specification;
// crawls without one (or with revisit disabled) are not revisited.
func SpecRevisit(specs *crawlcontrol.Specs) func(crawlID string) (revisit.Policy, bool) {
	return func(crawlID string) (revisit.Policy, bool) {
		return revisit.FromSpec(specs.Get(crawlID).GetRevisit())
	}
}

// SpecHostPages returns a crawl's per-host page budget
// (limits.max_pages_per_host), 0 = unlimited.
func SpecHostPages(specs *crawlcontrol.Specs) func(crawlID string) int64 {
	return func(crawlID string) int64 {
		return crawlsettings.Resolve(specs.Get(crawlID), crawlsettings.Fleet{}).PagesPerHost
	}
}
