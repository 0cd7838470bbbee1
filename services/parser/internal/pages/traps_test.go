package pages_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// calendarPage is a month of an empty calendar that links the months
// around it and the home page, as a trap does.
func calendarPage(y, m int) string {
	prev, next := fmt.Sprintf("%d/%d", y, m-1), fmt.Sprintf("%d/%d", y, m+1)
	if m == 12 {
		next = fmt.Sprintf("%d/1", y+1)
	}
	return fmt.Sprintf(`<html><head><title>Events %d-%02d</title></head><body><h1>Events in %d-%02d</h1>
		<p>No events this month.</p><a href="/cal/%s">previous</a> <a href="/cal/%s">next</a> <a href="/">home</a></body></html>`,
		y, m, y, m, prev, next)
}

// TestCalendarTrapSuspected: a calendar's entry and the months next to it
// are followed; a month that repeats the entry and links nothing new but
// the next month makes that month a suspect (trap_family), and so does
// the month before. List pages that look alike but link new stories are
// no trap. A suspect is not remembered as published: a story that links
// it publishes it again, unmarked.
//
// Counting in-links changes none of it: a link published before is no new
// link to the detector, counted or not; the republishes (in_links) come
// besides, unmarked.
func TestCalendarTrapSuspected(t *testing.T) {
	for _, inLinks := range []bool{false, true} {
		t.Run(fmt.Sprintf("in-links=%v", inLinks), func(t *testing.T) { testCalendarTrapSuspected(t, inLinks) })
	}
}

func testCalendarTrapSuspected(t *testing.T, inLinks bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		RecentLinks: 1 << 12, TrapAllowance: 1, InLinks: inLinks}, pages.Sinks{}, now)
	const site = "http://127.0.0.2"
	steps := []struct{ url, body string }{
		{site + "/news/1", `<html><title>Story one</title><p>The crawler fetches pages.</p><a href="/cal/2026/11">events</a> <a href="/about">about</a> <a href="/">home</a></html>`},
		{site + "/cal/2026/11", calendarPage(2026, 11)},
		{site + "/cal/2026/12", calendarPage(2026, 12)},
		{site + "/cal/2026/10", calendarPage(2026, 10)},
		{site + "/list?page=1", `<html><title>Stories</title><ol><li><a href="/news/2">Story 2</a></ol><a href="/list?page=2">next</a></html>`},
		{site + "/list?page=2", `<html><title>Stories</title><ol><li><a href="/news/3">Story 3</a></ol><a href="/list?page=3">next</a></html>`},
		{site + "/news/5", `<html><title>Story five</title><p>The scheduler keeps a frontier.</p><a href="/cal/2027/1">next year's events</a></html>`},
	}
	for _, s := range steps {
		// One at a time: each page's links are durable, hence remembered
		// as published, before the next page is read.
		r.produce(ctx, htmlPage(s.url, 2, s.body, now))
		waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	}
	// A page's links into its own family come after the others.
	want := []struct{ url, trap string }{
		{site + "/cal/2026/11", ""}, {site + "/about", ""}, {site + "/", ""},
		{site + "/cal/2026/10", ""}, {site + "/cal/2026/12", ""}, // the entry brings only its own family: a candidate, no repeat
		{site + "/cal/2027/1", site + "/cal/#/#"}, // the month after a repeat
		{site + "/cal/2026/9", site + "/cal/#/#"}, // the month before the second repeat
		{site + "/news/2", ""}, {site + "/list?page=2", ""},
		{site + "/news/3", ""}, {site + "/list?page=3", ""}, // alike, but it brought a new story
		{site + "/cal/2027/1", ""}, // linked from a story: no suspect
	}
	all := readDiscovered(t, ctx, r.kc, len(want))
	got := firstSightings(all)
	republished := 0
	for _, g := range all {
		switch {
		case g.inLinks <= 1:
		case !inLinks || g.trap != "":
			t.Errorf("%s republished with %d in-links, trap %q (in-links counted: %v)", g.url, g.inLinks, g.trap, inLinks)
		default:
			republished++
		}
	}
	if inLinks && republished == 0 {
		t.Error("no in-link republished: the home page is linked by every month")
	}
	if len(got) != len(want) {
		for _, g := range got {
			t.Logf("published %s (parent %s) trap %q", g.url, g.parent, g.trap)
		}
		t.Fatalf("%d links published, want %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].url != w.url || got[i].trap != w.trap {
			t.Errorf("link %d = %s trap %q, want %s trap %q", i, got[i].url, got[i].trap, w.url, w.trap)
		}
	}
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	suspected := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "links_trap_suspected_total" {
			suspected = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if suspected != 2 {
		t.Errorf("links_trap_suspected_total = %v, want 2", suspected)
	}
}

// TestFollowTraps: a crawl whose scope follows traps gets the calendar's
// months unmarked.
func TestFollowTraps(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING, Scope: &crawlv1.Scope{FollowTraps: true}})
	r := startParserSpecs(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		RecentLinks: 1 << 12, TrapAllowance: 1}, pages.Sinks{}, specs, now)
	for _, m := range []int{11, 12} {
		r.produce(ctx, htmlPage(fmt.Sprintf("http://127.0.0.2/cal/2026/%d", m), 2, calendarPage(2026, m), now))
		waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })
	}
	got := readDiscovered(t, ctx, r.kc, 5) // /, 10, 12, then 11 and 2027/1
	if len(got) != 5 || got[4].url != "http://127.0.0.2/cal/2027/1" || got[4].trap != "" {
		t.Fatalf("published %+v, want the fifth 2027/1 unmarked", got)
	}
}
