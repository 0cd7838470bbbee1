// Package admit decides whether a discovered URL becomes a fetch request:
// the scheduler's admission policy, as a plain type with its state
// (seen set, page budget, partition function, clock) injected.
//
// The order of the checks is part of the policy, cheapest and most
// fundamental first:
//
//  1. invalid_crawl: the crawl id is empty or contains a NUL byte (it would
//     make fingerprints of two crawls collide).
//  2. invalid_url, unsupported_scheme, url_too_long: urlcanon refuses the URL.
//  3. wrong_partition: the URL's politeness key does not hash to the
//     partition the record was read from; another scheduler owns its seen
//     set, so the record is handed back to Discovered under its proper key.
//  4. cancelled: the crawl's specification is CANCELLED (its URLs are
//     dropped and recorded; a PAUSED crawl's URLs are admitted and Hold is
//     set: the caller parks them in the frontier until it runs again).
//  5. out_of_scope, filtered, trap_guard, too_long: a URL the parser did not
//     judge (a redirect target, a sitemap's URL) breaks the crawl's scope
//     rules (libs/scope). Links were judged by the parser, with the page
//     they were found on; seeds are the user's own and are not judged.
//     same_host_only, a rule about a page's links, does not apply to a
//     redirect: it is the server's answer for a URL the crawl asked for.
//     A seed's redirect target (SeedRedirect) off the sites a crawl of
//     mode DOMAIN or HOST stays on is admitted instead, when every other
//     scope rule keeps it, and its site joins the scope: Decision.Grant.
//  6. too_deep: depth above the maximum.
//  7. duplicate: the fingerprint is already in the partition's seen set.
//     7b. trap_suspected: the parser marked the link a suspected crawler trap
//     (DiscoveredURL.trap_family: it leads into a URL family whose pages
//     repeat one another and brought nothing new). Not added to the seen
//     set: the same URL linked from a page that is no trap is admitted.
//  8. budget_exhausted: the crawl reached its admission ceiling
//     (--budget-admit-factor × its page budget, which the fetchers
//     charge; checked after
//     every rule that does not consume anything, because it consumes
//     budget on success). A URL whose priority is above 0 is still
//     admitted past the ceiling, within a second allowance of the same
//     size (BestBudget): a valuable URL discovered late is not dropped
//     because the crawl's shallow URLs came first.
//  9. host_budget_exhausted: the URL's host reached its crawl's per-host
//     page budget (CrawlSpec.limits.max_pages_per_host; HostBudget); the
//     page reserved in step 8 is given back.
//
// Every reason but wrong_partition is a terminal state of the URL,
// recorded in url_events (StateOf).
//
// Every URL decided on its own partition gets its priority (libs/priority:
// the crawl's rules, a sitemap's <priority> and <lastmod>, its in-links),
// carried in the fetch request and in its url_events row. A duplicate that
// comes with new in-links (DiscoveredURL.in_links > 1) yields a
// reprioritize request instead (Decision.Reprioritize): the fetcher raises
// the URL's queued request, if it holds one.
package admit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Reason says why a URL was not admitted. The set is fixed, so it is safe as
// a metric label.
type Reason string

// Drop reasons.
const (
	InvalidCrawl      Reason = "invalid_crawl"
	InvalidURL        Reason = "invalid_url"
	UnsupportedScheme Reason = "unsupported_scheme"
	URLTooLong        Reason = "url_too_long"
	WrongPartition    Reason = "wrong_partition"
	TooDeep           Reason = "too_deep"
	Duplicate         Reason = "duplicate"
	BudgetExhausted   Reason = "budget_exhausted"
	Cancelled         Reason = "cancelled"
	TrapSuspected     Reason = "trap_suspected"
	// HostBudgetExhausted: the host used up its crawl's per-host page
	// budget; recorded as budget_exhausted.
	HostBudgetExhausted Reason = "host_budget_exhausted"
	// The scope drops, named as the parser names them (libs/scope).
	OutOfScope   Reason = scope.DropOutOfScope
	Filtered     Reason = scope.DropFiltered
	TrapGuard    Reason = scope.DropTrapGuard
	ScopeTooLong Reason = scope.DropTooLong
)

// Reasons lists every Reason, for pre-creating metric series.
var Reasons = []Reason{InvalidCrawl, InvalidURL, UnsupportedScheme, URLTooLong, WrongPartition, TooDeep, Duplicate, BudgetExhausted, Cancelled,
	TrapSuspected, HostBudgetExhausted, OutOfScope, Filtered, TrapGuard, ScopeTooLong}

// Terminal states of URLs the scheduler does not admit (url_events.state).
const (
	StateDuplicate       = "duplicate"
	StateOutOfScope      = "out_of_scope"
	StateBudgetExhausted = "budget_exhausted"
	StateInvalid         = "invalid"
	StateCancelled       = "cancelled"
	StateTrapSuspected   = "trap_suspected"
)

// StateOf maps a drop reason to the terminal state it records; false for
// a reason that is not terminal (wrong_partition: re-keyed to its owner).
func StateOf(r Reason) (string, bool) {
	switch r {
	case Duplicate:
		return StateDuplicate, true
	case TooDeep, OutOfScope, Filtered, TrapGuard, ScopeTooLong:
		return StateOutOfScope, true
	case BudgetExhausted, HostBudgetExhausted:
		return StateBudgetExhausted, true
	case Cancelled:
		return StateCancelled, true
	case TrapSuspected:
		return StateTrapSuspected, true
	case InvalidCrawl, InvalidURL, UnsupportedScheme, URLTooLong:
		return StateInvalid, true
	default:
		return "", false
	}
}

// Seen reports whether a fingerprint was already admitted in this partition
// (persisted or earlier in the same batch). Called from the deciding
// goroutine only.
type Seen interface {
	Contains(fp uint64) bool
}

// Budget hands out the page budget of crawls. Reserve takes one page of the
// crawl's budget and reports false, taking nothing, when none is left;
// Unreserve gives back n pages reserved for admissions that did not
// happen. It must be safe for concurrent use when shared by several
// partitions (*budget.Tracker).
type Budget interface {
	Reserve(partition int, crawlID string) bool
	Unreserve(partition int, crawlID string, n int64)
}

// BestBudget is a Budget with a second allowance for the URLs whose
// priority is above 0: ReserveBest takes one page of it once Reserve
// refuses, and reports false, taking nothing, when that is used up too.
// Unreserve gives back pages of either. *budget.Tracker; a Budget without
// the method has no second allowance.
type BestBudget interface {
	Budget
	ReserveBest(partition int, crawlID string) bool
}

// Unlimited is a Budget that never runs out.
type Unlimited struct{}

// Reserve always succeeds.
func (Unlimited) Reserve(int, string) bool { return true }

// Unreserve does nothing.
func (Unlimited) Unreserve(int, string, int64) {}

// HostBudget hands out the per-host page budgets of crawls in one
// partition (*budget.Hosts). Take takes one page of host's budget in the
// crawl and reports false, taking nothing, when none is left; it may
// block to load the partition's counts, and fails when it cannot. Called
// from the deciding goroutine only.
type HostBudget interface {
	Take(ctx context.Context, crawlID, host string) (bool, error)
}

// PartitionFunc returns the record key of a canonical URL and the partition
// that key hashes to (the pipeline's one partition function).
type PartitionFunc func(canonicalURL string) (key []byte, partition int, err error)

// Policy holds the admission rules.
type Policy struct {
	// Depth returns a crawl's maximum link depth, resolved in one place
	// (config.SpecDepth: its CrawlSpec's limits.max_depth, else the
	// fleet's --max-depth). nil admits only seeds.
	Depth func(crawlID string) uint32
	// State, when set, returns a crawl's operator state (its CrawlSpec;
	// RUNNING without one).
	State func(crawlID string) crawlv1.CrawlState
	// Scope, when set, returns the compiled scope rules of a crawl and
	// true, or false for a crawl without rules (nothing is judged).
	Scope func(crawlID string) (*scope.Rules, bool)
	// Priority, when set, returns a crawl's compiled priority rules (its
	// CrawlSpec.priority); nil, or a nil result, ranks by the default
	// signals (sitemaps and in-links) with no rule.
	Priority  func(crawlID string) *priority.Rules
	Partition PartitionFunc
	Now       func() time.Time
}

// Decision is the outcome for one discovered URL.
type Decision struct {
	// Admit is true when Fetch should be produced; otherwise Reason is set.
	Admit  bool
	Reason Reason
	// Canonical is the canonical URL, FP its fingerprint within the crawl
	// and Key its record key; set unless the URL or crawl id was invalid.
	Canonical string
	FP        uint64
	Key       []byte
	// Partition is the partition Key hashes to: the owner of the URL.
	Partition int
	// Priority is the URL's priority and PriorityReason the signals that
	// made it (priority.Signals.String()); set when the URL is decided on
	// its own partition, whatever the outcome, except for a duplicate
	// without new in-links (most records: a link to a known page), whose
	// priority only its url_events row needs: Policy.Prioritized computes
	// it then.
	Priority       int32
	PriorityReason string
	prioritized    bool // Priority is computed (or has no meaning)
	// Reprioritize is set with Reason Duplicate when the URL comes with
	// in-links (DiscoveredURL.in_links > 1) in a crawl that is not
	// breadth-first: a FetchRequest with Reprioritize set, to produce to
	// the fetch topic under Key. It admits nothing.
	Reprioritize *crawlv1.FetchRequest
	// Fetch is the request to produce when Admit is true.
	Fetch *crawlv1.FetchRequest
	// Hold is set with Admit when the crawl is paused: the request must
	// wait (durably) until the crawl runs again instead of being produced.
	Hold bool
	// Grant is set with Admit when the URL is a seed's redirect target
	// (SeedRedirect) whose site joins the crawl's scope: the caller must
	// write it durably to the control topic before Fetch goes out
	// (crawlcontrol.ScopeGrantMessage), so that every service judging
	// the site's URLs afterwards can know it.
	Grant *crawlv1.ScopeGrant
}

// MaxSeedRedirectHops is how many redirects from a seed may lead to a
// site that joins the crawl's scope: http://golang.org/ → https://go.dev/
// takes one, http://example.com/ → https://example.com/ →
// https://www.example.com/ two.
const MaxSeedRedirectHops = 3

// SeedRedirect reports whether u is a seed's redirect target within
// MaxSeedRedirectHops: the fetcher reports a redirect's target at the
// depth of the URL that redirected (depth 0 for a seed's chain) with one
// more redirect hop. A search-engine result page (serp_engine) is no seed
// of a site and widens nothing. The depth-0 URLs that are not seeds are
// the entry points the crawl was given with them (a sitemap's URLs the
// seeder published at depth 0, a sitemap named by a seed host's
// robots.txt), which a site that moved redirects just the same.
func SeedRedirect(u *crawlv1.DiscoveredURL) bool {
	return u.GetSource() == crawlv1.Source_SOURCE_REDIRECT && u.GetDepth() == 0 &&
		u.GetRedirectHops() >= 1 && u.GetRedirectHops() <= MaxSeedRedirectHops && u.GetSerpEngine() == ""
}

// Decide applies the policy to u, read from partition. It reserves the
// crawl's budget and takes the host's (hosts, nil when no crawl has
// per-host budgets) only when it admits; the caller must then record FP as
// seen so that a repeat in the same batch is a duplicate. An error (the
// host counts could not be loaded) reserves nothing: the caller fails the
// batch.
func (p Policy) Decide(ctx context.Context, u *crawlv1.DiscoveredURL, partition int, seen Seen, budget Budget, hosts HostBudget) (Decision, error) {
	if u.GetCrawlId() == "" || strings.IndexByte(u.GetCrawlId(), 0) >= 0 {
		return Decision{Reason: InvalidCrawl}, nil
	}
	canonical, err := urlcanon.Canonicalize(u.GetUrl())
	if err != nil {
		return Decision{Reason: invalidReason(err)}, nil
	}
	key, owner, err := p.Partition(canonical)
	if err != nil {
		return Decision{Reason: InvalidURL}, nil
	}
	d := Decision{
		Canonical: canonical,
		FP:        fingerprint.URL(u.GetCrawlId(), canonical),
		Key:       key,
		Partition: owner,
	}
	state := p.state(u.GetCrawlId())
	var (
		scopeDrop Reason
		grant     *crawlv1.ScopeGrant
	)
	var (
		duplicate    bool
		breadthFirst bool
	)
	if owner == partition {
		scopeDrop, grant = p.scopeDrop(u, canonical, string(key))
		duplicate = seen.Contains(d.FP)
		if !duplicate || u.GetInLinks() > 1 {
			breadthFirst = p.prioritize(u, &d)
		}
	}
	switch {
	case owner != partition:
		d.Reason = WrongPartition
	case state == crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		d.Reason = Cancelled
	case scopeDrop != "":
		d.Reason = scopeDrop
	case u.GetDepth() > p.maxDepth(u.GetCrawlId()):
		d.Reason = TooDeep
	case duplicate:
		d.Reason = Duplicate
		if u.GetInLinks() > 1 && !breadthFirst {
			d.Reprioritize = &crawlv1.FetchRequest{
				CrawlId:        u.GetCrawlId(),
				Url:            canonical,
				UrlFp:          d.FP,
				Depth:          u.GetDepth(),
				Priority:       d.Priority,
				PriorityReason: d.PriorityReason,
				Reprioritize:   true,
			}
		}
	case u.GetTrapFamily() != "":
		d.Reason = TrapSuspected
	case !reserve(budget, partition, u.GetCrawlId(), d.Priority):
		d.Reason = BudgetExhausted
	default:
		if hosts != nil {
			ok, err := hosts.Take(ctx, u.GetCrawlId(), string(key))
			if err != nil {
				budget.Unreserve(partition, u.GetCrawlId(), 1)
				return Decision{}, fmt.Errorf("count admitted urls per host: %w", err)
			}
			if !ok {
				budget.Unreserve(partition, u.GetCrawlId(), 1)
				d.Reason = HostBudgetExhausted
				return d, nil
			}
		}
		d.Admit = true
		d.Fetch = &crawlv1.FetchRequest{
			CrawlId:      u.GetCrawlId(),
			Url:          canonical,
			UrlFp:        d.FP,
			Depth:        u.GetDepth(),
			ParentUrl:    u.GetParentUrl(),
			DiscoveredAt: u.GetDiscoveredAt(),
			ScheduledAt:  timestamppb.New(p.Now()),
			AnchorText:   u.GetAnchorText(),
			SerpEngine:   u.GetSerpEngine(),
			RedirectHops: u.GetRedirectHops(),
			// A URL of the previous crawl: asked for conditionally, a 304
			// carrying that crawl's document over.
			Etag:            u.GetEtag(),
			LastModified:    u.GetLastModified(),
			DocumentCrawlId: u.GetDocumentCrawlId(),
			Priority:        d.Priority,
			PriorityReason:  d.PriorityReason,
		}
		d.Hold = state == crawlv1.CrawlState_CRAWL_STATE_PAUSED
		d.Grant = grant
	}
	return d, nil
}

// reserve takes a page of the crawl's budget, or, for a URL whose
// priority is above 0, of its second allowance (BestBudget) once the
// budget refuses.
func reserve(b Budget, partition int, crawlID string, prio int32) bool {
	if b.Reserve(partition, crawlID) {
		return true
	}
	best, ok := b.(BestBudget)
	return ok && prio > 0 && best.ReserveBest(partition, crawlID)
}

// Prioritized returns d, the decision on u, with its priority: computed
// now for a duplicate without new in-links, which Decide leaves out; d
// itself otherwise. The caller asks for it when it records the duplicate.
func (p Policy) Prioritized(u *crawlv1.DiscoveredURL, d Decision) Decision {
	if d.prioritized || d.Canonical == "" || d.Reason == WrongPartition {
		return d
	}
	p.prioritize(u, &d)
	return d
}

// prioritize sets d's priority by its crawl's rules (d.Canonical and
// d.Key, the URL's politeness key, are set) and reports whether the crawl
// is breadth-first (every priority 0).
func (p Policy) prioritize(u *crawlv1.DiscoveredURL, d *Decision) bool {
	var rules *priority.Rules
	if p.Priority != nil {
		rules = p.Priority(u.GetCrawlId())
	}
	in := priority.Input{URL: d.Canonical, Host: string(d.Key), InLinks: u.GetInLinks()}
	if u.SitemapPriority != nil {
		in.SitemapPriority, in.HasSitemap = u.GetSitemapPriority(), true
	}
	if u.GetLastmod() != nil {
		in.Lastmod, in.Now = u.GetLastmod().AsTime(), p.Now()
	}
	prio, sig := rules.Of(in)
	d.Priority, d.PriorityReason, d.prioritized = prio, sig.String(), true
	return rules.BreadthFirst()
}

// scopeDrop judges the URLs nobody judged before (redirect targets,
// sitemaps' URLs, the previous crawl's URLs, judged by that crawl's
// scope) by the crawl's scope: the reason it is dropped, or "".
// host is the URL's politeness key. A seed's redirect target that only the
// seed-site rule would drop is kept, with the grant of its site.
func (p Policy) scopeDrop(u *crawlv1.DiscoveredURL, canonical, host string) (Reason, *crawlv1.ScopeGrant) {
	rules, ok := p.rules(u)
	if !ok {
		return "", nil
	}
	if !SeedRedirect(u) {
		return Reason(rules.Check("", canonical, host, false)), nil
	}
	reason, site, joins := rules.CheckJoining(canonical, host)
	if !joins {
		return Reason(reason), nil
	}
	return "", &crawlv1.ScopeGrant{
		CrawlId:        u.GetCrawlId(),
		Host:           site.Host,
		Domain:         site.Domain,
		RedirectedFrom: u.GetParentUrl(),
		TargetUrl:      canonical,
		RedirectHops:   u.GetRedirectHops(),
		GrantedAt:      timestamppb.New(p.Now()),
	}
}

// rules returns the scope rules u is judged by: those of its crawl, for
// a URL nobody judged before (a redirect target, a sitemap's URL, a URL of
// the previous crawl).
func (p Policy) rules(u *crawlv1.DiscoveredURL) (*scope.Rules, bool) {
	switch u.GetSource() {
	case crawlv1.Source_SOURCE_REDIRECT, crawlv1.Source_SOURCE_SITEMAP, crawlv1.Source_SOURCE_PREVIOUS_CRAWL:
	default:
		return nil, false
	}
	if p.Scope == nil {
		return nil, false
	}
	return p.Scope(u.GetCrawlId())
}

// ParentOffSites reports whether u is a URL the scope judges (a redirect
// target, a sitemap's URL) whose parent, a URL the crawl fetched, is off
// the sites its crawl stays on by the rules known here. The parent was in
// scope when it was fetched, so the rules known here lag behind a scope
// grant (written before anything of its site was fetched, but perhaps not
// read yet by this scheduler's control follower): the caller should catch
// up with the control topic before deciding u.
func (p Policy) ParentOffSites(u *crawlv1.DiscoveredURL) bool {
	if u.GetParentUrl() == "" {
		return false
	}
	rules, ok := p.rules(u)
	if !ok {
		return false
	}
	host, err := urlcanon.PolitenessKey(u.GetParentUrl())
	if err != nil {
		return false
	}
	return !rules.OnSeedSites(host)
}

// state is the crawl's operator state.
func (p Policy) state(crawlID string) crawlv1.CrawlState {
	if p.State == nil {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return p.State(crawlID)
}

// maxDepth is the crawl's depth limit.
func (p Policy) maxDepth(crawlID string) uint32 {
	if p.Depth == nil {
		return 0
	}
	return p.Depth(crawlID)
}

// FixedDepth is the Policy.Depth of a fleet without specifications:
// every crawl admits links up to depth d.
func FixedDepth(d uint32) func(crawlID string) uint32 {
	return func(string) uint32 { return d }
}

// invalidReason classifies a urlcanon error.
func invalidReason(err error) Reason {
	switch {
	case errors.Is(err, urlcanon.ErrScheme):
		return UnsupportedScheme
	case errors.Is(err, urlcanon.ErrTooLong):
		return URLTooLong
	default:
		return InvalidURL
	}
}
