package pages_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestInLinksRepublished: pages that all link one URL publish it once,
// then again with in_links 2 from the first page that repeats it, then
// with 4, 8, … ever more rarely (about log2 n records for n pages), each
// from the page that stepped the count, at that page's depth and with its
// anchor text. The repeats that step nothing are dropped as published.
func TestInLinksRepublished(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		RecentLinks: 1 << 12, InLinks: true}, pages.Sinks{}, now)
	const (
		site = "http://127.0.0.2"
		hub  = site + "/hub"
		n    = 40
	)
	page := func(i int) *crawlv1.FetchedPage {
		return htmlPage(fmt.Sprintf("%s/p%d", site, i), uint32(1+i%3),
			fmt.Sprintf(`<html><title>Page %d</title><p>Story %d.</p><a href="/hub">The hub</a> <a href="/own/%d">more</a></html>`, i, i, i), now)
	}
	// The first page alone, so that its links are remembered; then the
	// second, the first repeat; then the rest together.
	rounds := [][]*crawlv1.FetchedPage{{page(0)}, {page(1)}, nil}
	for i := 2; i < n; i++ {
		rounds[2] = append(rounds[2], page(i))
	}
	for _, round := range rounds {
		r.produce(ctx, round...)
		waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	}

	// At least the pages' own links and the hub with in_links 0, 2 and 4;
	// the rest are in the topic already.
	var hubs []discovered
	own := 0
	for _, d := range readDiscovered(t, ctx, r.kc, n+3) {
		if d.url == hub {
			hubs = append(hubs, d)
		} else {
			own++
		}
	}
	if own != n {
		t.Errorf("%d pages' own links published, want %d", own, n)
	}
	if len(hubs) < 3 {
		t.Fatalf("the hub published %d times (%+v), want at least with in_links 0, 2 and 4", len(hubs), hubs)
	}
	if h := hubs[0]; h.inLinks != 0 || h.parent != site+"/p0" || h.depth != 2 {
		t.Errorf("first hub record: in_links %d from %s at depth %d, want 0 from /p0 at 2", h.inLinks, h.parent, h.depth)
	}
	if h := hubs[1]; h.inLinks != 2 || h.parent != site+"/p1" || h.depth != 3 {
		t.Errorf("second hub record: in_links %d from %s at depth %d, want 2 from the first repeat, /p1, at 3", h.inLinks, h.parent, h.depth)
	}
	for i, h := range hubs[1:] {
		var from int
		if _, err := fmt.Sscanf(h.parent, site+"/p%d", &from); err != nil {
			t.Fatalf("hub record from %s: %v", h.parent, err)
		}
		d := 2 + from%3
		if h.inLinks != 2<<i || h.anchor != "The hub" || h.depth != uint32(d) || h.source != crawlv1.Source_SOURCE_LINK || h.trap != "" {
			t.Errorf("hub record %d = %+v, want in_links %d, anchor %q, depth %d (its page's), source LINK, no trap", i+1, h, 2<<i, "The hub", d)
		}
	}
	republished := len(hubs) - 1
	t.Logf("%d pages: the hub published once and again %d times, last with in_links %d", n, republished, hubs[len(hubs)-1].inLinks)
	if most := 7; republished > most { // ⌈log2 40⌉+1
		t.Errorf("%d republishes for %d pages, want at most %d", republished, n, most)
	}
	if got := counterValue(t, r.reg, "links_inlinks_republished_total", "", ""); got != float64(republished) {
		t.Errorf("links_inlinks_republished_total = %v, want %d", got, republished)
	}
	if got := counterValue(t, r.reg, "links_extracted_total", "", ""); got != float64(n+1) {
		t.Errorf("links_extracted_total = %v, want %d (the republishes apart)", got, n+1)
	}
	if got := counterValue(t, r.reg, "links_dropped_total", "reason", pages.DropPublished); got != float64(n-1-republished) {
		t.Errorf("links_dropped_total{reason=published} = %v, want %d (the repeats that stepped nothing)", got, n-1-republished)
	}

	// The hub's own page is fetched: its in-links order nothing any more,
	// so however many pages link it next, it is not published again.
	more := []*crawlv1.FetchedPage{htmlPage(hub, 1, `<html><title>Hub</title><p>The hub.</p></html>`, now)}
	for i := n; i < 4*n; i++ {
		more = append(more, page(i))
	}
	r.produce(ctx, more...)
	waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	if got := counterValue(t, r.reg, "links_inlinks_republished_total", "", ""); got != float64(republished) {
		t.Errorf("after the hub was fetched: links_inlinks_republished_total = %v, want still %d", got, republished)
	}
}

// TestInLinksMatter: in-links are counted for a crawl that stops before
// it fetched everything it admits (a page budget, a time limit) and is
// not breadth-first, and for a crawl without a specification (the fleet's
// --max-pages is not known here).
func TestInLinksMatter(t *testing.T) {
	cases := []struct {
		name string
		spec *crawlv1.CrawlSpec
		want bool
	}{
		{"no specification", nil, true},
		{"no limit", &crawlv1.CrawlSpec{CrawlId: "c"}, false},
		{"a depth limit only", &crawlv1.CrawlSpec{CrawlId: "c", Limits: &crawlv1.Limits{MaxDepth: 3}}, false},
		{"a page budget", &crawlv1.CrawlSpec{CrawlId: "c", Limits: &crawlv1.Limits{MaxPages: 100}}, true},
		{"a time limit", &crawlv1.CrawlSpec{CrawlId: "c", Limits: &crawlv1.Limits{MaxDuration: durationpb.New(time.Hour)}}, true},
		{"a budget, breadth-first", &crawlv1.CrawlSpec{CrawlId: "c", Limits: &crawlv1.Limits{MaxPages: 100},
			Priority: &crawlv1.Priority{BreadthFirst: true}}, false},
	}
	for _, c := range cases {
		if got := pages.InLinksMatter(c.spec); got != c.want {
			t.Errorf("%s: InLinksMatter = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestInLinksNotCountedWithoutLimit: a crawl whose specification sets no
// page budget nor time limit publishes a link once, however many pages
// link it (it fetches everything it admits: the order decides nothing).
func TestInLinksNotCountedWithoutLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING})
	r := startParserSpecs(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		RecentLinks: 1 << 12, InLinks: true}, pages.Sinks{}, specs, now)
	var batch []*crawlv1.FetchedPage
	for i := range 20 {
		batch = append(batch, htmlPage(fmt.Sprintf("http://127.0.0.2/p%d", i), 1,
			fmt.Sprintf(`<html><title>Page %d</title><a href="/hub">The hub</a></html>`, i), now))
	}
	r.produce(ctx, batch[0])
	waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	r.produce(ctx, batch[1:]...)
	waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	if got := counterValue(t, r.reg, "links_inlinks_republished_total", "", ""); got != 0 {
		t.Errorf("links_inlinks_republished_total = %v, want 0 for a crawl without a limit", got)
	}
	if got := counterValue(t, r.reg, "links_dropped_total", "reason", pages.DropPublished); got != 19 {
		t.Errorf("links_dropped_total{reason=published} = %v, want 19", got)
	}
}
