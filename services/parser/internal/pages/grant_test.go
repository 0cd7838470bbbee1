package pages_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// laggingSpecs is the crawl specifications of a parser whose control
// follower has not read a scope grant yet: the grant is on the topic
// (the scheduler wrote it before the page's fetch request) and Sync, the
// catch-up with the topic, is what reads it.
type laggingSpecs struct {
	*crawlcontrol.Specs
	unread *crawlv1.ScopeGrant
	syncs  atomic.Int32
}

func (l *laggingSpecs) Sync(context.Context) error {
	l.syncs.Add(1)
	l.Grant(l.unread)
	return nil
}

// TestGrantedSiteKeepsItsLinks: the page of a site a seed redirected to
// (a scope grant) keeps that site's links though the parser had not read
// the grant when the page came: a page off its crawl's known sites makes
// the parser catch up with the control topic first (once per batch).
// Pages on the seeds' sites and pages that yield no links never do; links
// to other sites are still dropped.
func TestGrantedSiteKeepsItsLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	specs := &laggingSpecs{Specs: crawlcontrol.NewSpecs(), unread: &crawlv1.ScopeGrant{CrawlId: "c", Host: "127.0.0.9"}}
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1,
		Scope: &crawlv1.Scope{Mode: crawlv1.ScopeMode_SCOPE_MODE_HOST, SeedHosts: []string{"127.0.0.2"}}})
	r := startParserSpecs(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048},
		pages.Sinks{}, specs, now)

	seedPage := htmlPage("http://127.0.0.2/", 0, `<a href="/s1">s1</a> <a href="http://127.0.0.9/elsewhere">x</a>`, now)
	notFound := &crawlv1.FetchedPage{CrawlId: "c", Url: "http://127.0.0.7/gone", StatusCode: 404}
	r.produce(ctx, seedPage, notFound)
	waitFor(t, ctx, "the first pages committed", func() bool { return r.lag(ctx) == 0 })
	if n := specs.syncs.Load(); n != 0 {
		t.Errorf("%d catch-ups for a seed site's page and a 404", n)
	}
	granted := htmlPage("http://127.0.0.9/", 0, `<a href="/g1">g1</a> <a href="/g2">g2</a> <a href="http://127.0.0.3/off">off</a>`, now)
	r.produce(ctx, granted)
	waitFor(t, ctx, "the granted page committed", func() bool { return r.lag(ctx) == 0 })

	got := readDiscovered(t, ctx, r.kc, 3)
	var urls []string
	for _, d := range got {
		urls = append(urls, d.url)
	}
	slices.Sort(urls)
	want := []string{"http://127.0.0.2/s1", "http://127.0.0.9/g1", "http://127.0.0.9/g2"}
	if !slices.Equal(urls, want) {
		t.Errorf("discovered %v, want %v", urls, want)
	}
	if n := specs.syncs.Load(); n != 1 {
		t.Errorf("%d catch-ups, want 1 (the granted page's batch)", n)
	}
	r.stop()
	if err := <-r.done; err != nil {
		t.Errorf("parser group: %v", err)
	}
	if n, err := testutil.GatherAndCount(r.reg, "scope_syncs_total"); err != nil || n != 1 {
		t.Fatalf("scope_syncs_total series: %d, %v", n, err)
	}
	mfs, _ := r.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "scope_syncs_total" && mf.GetMetric()[0].GetCounter().GetValue() != 1 {
			t.Errorf("scope_syncs_total = %v, want 1", mf.GetMetric()[0].GetCounter().GetValue())
		}
	}
}
