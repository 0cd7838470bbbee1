package consume

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/config"
)

// redirectRec is a redirect target as the fetcher reports it: at the
// depth of the URL that redirected, with one more hop.
func redirectRec(crawl, url, from string, depth, hops uint32) rec {
	return rec{u: &crawlv1.DiscoveredURL{CrawlId: crawl, Url: url, Depth: depth, ParentUrl: from,
		Source: crawlv1.Source_SOURCE_REDIRECT, RedirectHops: hops}}
}

// TestSeedRedirectGrantsScope, on the real broker: a seed's redirect to
// another host is admitted and its scope grant is on the control topic by
// the time its fetch request is (written first, acks=all), counted once
// though two seeds' targets on that host come in one batch; a page's
// redirect to another site is still dropped; the scheduler's own table
// knows the grant at once, and a follower of the topic folds it in.
func TestSeedRedirectGrantsScope(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1,
		Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"seed.example"}}})
	cfg := specsConfig(specs)
	cfg.Scope = config.SpecScope(specs, e.log)
	cfg.Granted = specs.Grant
	inst := e.startWith(cfg, 0)

	e.publish(
		redirectRec("c", "http://www.seed.example/", "http://seed.example/", 0, 1),
		redirectRec("c", "http://www.seed.example/two", "http://seed.example/two", 0, 1),
		redirectRec("c", "http://elsewhere.example/", "http://seed.example/page", 1, 1),
	)
	e.drain()

	var admitted []string
	for _, f := range e.fetches() {
		admitted = append(admitted, f.req.GetUrl())
	}
	slices.Sort(admitted)
	if !slices.Equal(admitted, []string{"http://www.seed.example/", "http://www.seed.example/two"}) {
		t.Errorf("admitted %v, want the seeds' redirect targets only", admitted)
	}
	if n := dropped(inst.s, admit.OutOfScope); n != 1 {
		t.Errorf("out_of_scope drops = %d, want 1 (the page's redirect)", n)
	}
	snap, err := crawlcontrol.Snapshot(t.Context(), e.kafka)
	if err != nil {
		t.Fatal(err)
	}
	gs := snap.Grants("c")
	if len(gs) != 1 || gs[0].GetHost() != "www.seed.example" || gs[0].GetRedirectHops() != 1 {
		t.Fatalf("grants on the control topic: %v", gs)
	}
	if got := snap.Scoped("c"); got != nil {
		t.Errorf("the topic holds no specification here, yet Scoped = %v", got)
	}
	if got := testutil.ToFloat64(inst.s.metrics.grants); got != 1 {
		t.Errorf("scope_grants_total = %v, want 1", got)
	}
	if got := specs.Scoped("c").GetScope().GetSeedHosts(); !slices.Equal(got, []string{"seed.example", "www.seed.example"}) {
		t.Errorf("the scheduler's own scope: %v", got)
	}
	// A redirect from the granted host's pages stays in scope now.
	e.publish(redirectRec("c", "http://www.seed.example/moved/", "http://www.seed.example/moved", 1, 1))
	e.drain()
	if n := len(e.fetches()); n != 3 {
		t.Errorf("%d fetch requests, want 3: a redirect on the granted host was dropped", n)
	}
}

// TestScopeSyncWhenParentOffSites: a redirect whose parent is off the
// known sites makes the scheduler catch up with the control topic once
// per batch before deciding (here the sync brings the grant, and the
// target is admitted); a redirect from a known site never does.
func TestScopeSyncWhenParentOffSites(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1,
		Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"seed.example"}}})
	var syncs atomic.Int32
	cfg := specsConfig(specs)
	cfg.Scope = config.SpecScope(specs, e.log)
	cfg.SyncScope = func(context.Context) error {
		syncs.Add(1)
		specs.Grant(&crawlv1.ScopeGrant{CrawlId: "c", Host: "granted.example"}) // what the follower had not read yet
		return nil
	}
	e.startWith(cfg, 0)

	e.publish(redirectRec("c", "http://seed.example/b", "http://seed.example/a", 1, 1))
	e.drain()
	if n := syncs.Load(); n != 0 {
		t.Errorf("%d syncs for a redirect on a seed site", n)
	}
	e.publish(
		redirectRec("c", "http://granted.example/x/", "http://granted.example/x", 1, 1),
		redirectRec("c", "http://granted.example/y/", "http://granted.example/y", 1, 1),
	)
	e.drain()
	if n := syncs.Load(); n < 1 || n > 2 {
		t.Errorf("%d syncs for two redirects on a granted host (one batch or two), want 1 or 2", n)
	}
	if n := len(e.fetches()); n != 3 { // drained: every request is produced
		t.Errorf("%d fetch requests, want 3", n)
	}
}
