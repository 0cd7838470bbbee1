package crawlcontrol_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestGrantFoldsIntoScoped: grants widen Scoped's seed sites, never Get's
// (the seeder's specification), survive a new revision of the
// specification, may come before it, and repeat without effect.
func TestGrantFoldsIntoScoped(t *testing.T) {
	s := crawlcontrol.NewSpecs()
	early := &crawlv1.ScopeGrant{CrawlId: "c", Domain: "go.dev", GrantedAt: timestamppb.New(time.Unix(10, 0))}
	if !s.Grant(early) {
		t.Fatal("first grant not new")
	}
	if s.Scoped("c") != nil {
		t.Fatal("a grant without a specification made one up")
	}
	spec := &crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"golang.org"}}}
	s.Apply(spec)
	if got := s.Scoped("c").GetScope().GetSeedDomains(); !slices.Equal(got, []string{"golang.org", "go.dev"}) {
		t.Errorf("scoped seed domains = %v", got)
	}
	if s.Get("c") != spec || len(spec.GetScope().GetSeedDomains()) != 1 {
		t.Errorf("Get changed: %v", s.Get("c"))
	}
	if s.Grant(&crawlv1.ScopeGrant{CrawlId: "c", Domain: "go.dev"}) {
		t.Error("a repeated grant was new")
	}
	before := s.Scoped("c")
	if !s.Grant(&crawlv1.ScopeGrant{CrawlId: "c", Host: "127.0.0.9:80", GrantedAt: timestamppb.New(time.Unix(20, 0))}) {
		t.Error("second site not new")
	}
	after := s.Scoped("c")
	if after == before || !slices.Equal(after.GetScope().GetSeedHosts(), []string{"127.0.0.9:80"}) {
		t.Errorf("scoped after second grant: %v (same message: %v)", after.GetScope(), after == before)
	}
	// The seeder revises the spec (pauses the crawl): the grants stay.
	s.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED,
		Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, SeedDomains: []string{"golang.org"}}})
	if sc := s.Scoped("c"); sc.GetState() != crawlv1.CrawlState_CRAWL_STATE_PAUSED || len(sc.GetScope().GetSeedDomains()) != 2 || len(sc.GetScope().GetSeedHosts()) != 1 {
		t.Errorf("scoped after a revision: %v", sc)
	}
	if gs := s.Grants("c"); len(gs) != 2 || gs[0].GetDomain() != "go.dev" || gs[1].GetHost() != "127.0.0.9:80" {
		t.Errorf("grants = %v", gs)
	}
	if s.Scoped("other") != nil || len(s.Grants("other")) != 0 {
		t.Error("a crawl without spec nor grants has some")
	}
	for _, bad := range []*crawlv1.ScopeGrant{
		{Domain: "x.example"},
		{CrawlId: "c"},
		{CrawlId: "c", Host: "a.example", Domain: "a.example"},
	} {
		if s.Grant(bad) {
			t.Errorf("invalid grant %v recorded", bad)
		}
		if _, err := crawlcontrol.ScopeGrantMessage("control", bad); err == nil {
			t.Errorf("ScopeGrantMessage(%v) encoded an invalid grant", bad)
		}
	}
	if _, err := crawlcontrol.ScopeGrantMessage("control", &crawlv1.ScopeGrant{Host: "h"}); !errors.Is(err, crawlcontrol.ErrNoCrawlID) {
		t.Errorf("grant without crawl id: err = %v", err)
	}
	if _, err := crawlcontrol.ScopeGrantMessage("control", &crawlv1.ScopeGrant{CrawlId: "c"}); !errors.Is(err, crawlcontrol.ErrNoSite) {
		t.Errorf("grant without site: err = %v", err)
	}
}

// TestFollowGrants: grants written to a real broker reach a follower's
// Scoped and a Snapshot; a grant key's tombstone and an undecodable grant
// change nothing (the latter is reported), and a follower of
// specifications never mistakes a grant for one.
func TestFollowGrants(t *testing.T) {
	c := kafkatest.Config(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(c, nil, nil)
	defer w.Close()
	topic := c.Topics().Control

	spec, err := crawlcontrol.Message(topic, &crawlv1.CrawlSpec{CrawlId: "c", Revision: 1,
		Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	grant, err := crawlcontrol.ScopeGrantMessage(topic, &crawlv1.ScopeGrant{CrawlId: "c", Host: "www.example.com",
		RedirectedFrom: "http://example.com/", TargetUrl: "http://www.example.com/", RedirectHops: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(grant.Key) != "scope/c/www.example.com" || !crawlcontrol.IsScopeGrant(grant) || crawlcontrol.IsClaim(grant) {
		t.Fatalf("grant key %q", grant.Key)
	}
	if err := w.Write(ctx, grant, spec,
		kafka.Message{Topic: topic, Key: []byte("scope/c/other.example")},                          // tombstone
		kafka.Message{Topic: topic, Key: []byte("scope/c/bad.example"), Value: []byte{0xff, 0x01}}, // poison
	); err != nil {
		t.Fatal(err)
	}

	specs := crawlcontrol.NewSpecs()
	var errs []error
	caught := make(chan struct{})
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- crawlcontrol.FollowCaughtUp(fctx, c, specs, func() { close(caught) }, func(err error) { errs = append(errs, err) })
	}()
	select {
	case <-caught:
	case <-ctx.Done():
		t.Fatal("follower never caught up")
	}
	fcancel()
	if err := <-done; err != nil {
		t.Errorf("follower returned %v", err)
	}
	if len(errs) != 1 {
		t.Errorf("errors reported: %v, want the poison grant's", errs)
	}
	if got := specs.Scoped("c").GetScope().GetSeedHosts(); !slices.Equal(got, []string{"example.com", "www.example.com"}) {
		t.Errorf("scoped seed hosts = %v", got)
	}
	if n := len(specs.All()); n != 1 || len(specs.Get("c").GetScope().GetSeedHosts()) != 1 {
		t.Errorf("specs: %d, c = %v; a grant was taken for a specification", n, specs.Get("c"))
	}

	snap, err := crawlcontrol.Snapshot(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if gs := snap.Grants("c"); len(gs) != 1 || gs[0].GetRedirectedFrom() != "http://example.com/" || gs[0].GetRedirectHops() != 1 {
		t.Errorf("snapshot grants = %v", gs)
	}
}
