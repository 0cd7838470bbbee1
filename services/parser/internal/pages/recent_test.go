package pages_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLinksPublishedOnce: a link that many pages repeat is published once
// per depth it is first seen at; the repeats are counted as dropped
// "published", and the document still counts every link it has.
//
// Counting in-links, the same links are published first; a repeat that
// steps its link's in-link count (x's by p2 and y's by p3, and w's when
// p4 is read after p2's batch: the first repeat always does) is published
// again with in_links instead of dropped, spelled as the page spells it
// (y? is y's fingerprint).
func TestLinksPublishedOnce(t *testing.T) {
	for _, inLinks := range []bool{false, true} {
		t.Run(fmt.Sprintf("in-links=%v", inLinks), func(t *testing.T) { testLinksPublishedOnce(t, inLinks) })
	}
}

func testLinksPublishedOnce(t *testing.T, inLinks bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, zaptest.NewLogger(t), nil)
	runWriters(t, dropped)
	now := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, RecentLinks: 1024, InLinks: inLinks},
		pages.Sinks{Dropped: dropped}, now)
	kc, reg := r.kc, r.reg

	page := func(u string, depth uint32, hrefs ...string) *crawlv1.FetchedPage {
		body := "<html><body>"
		for _, h := range hrefs {
			body += `<a href="` + h + `">x</a>`
		}
		return htmlPage(u, depth, body+"</body></html>", now)
	}
	// Each round is parsed completely before the next is produced.
	rounds := [][]*crawlv1.FetchedPage{
		{page("http://127.0.0.2/p1", 2, "/x", "/y")},
		{
			page("http://127.0.0.2/p2", 2, "/x", "/z", "/w"), // x again at the same depth
			page("http://127.0.0.2/p3", 4, "/y?"),            // y again, deeper, another spelling
			page("http://127.0.0.2/p4", 2, "/w"),             // w in the same round as p2
		},
		{page("http://127.0.0.2/p5", 0, "/x")}, // x shallower: published again
	}
	for i, round := range rounds {
		r.produce(ctx, round...)
		waitFor(t, ctx, "round parsed", func() bool { return r.lag(ctx) == 0 })
		t.Logf("round %d parsed", i+1)
	}

	want := []string{"http://127.0.0.2/w@3", "http://127.0.0.2/x@1", "http://127.0.0.2/x@3", "http://127.0.0.2/y@3", "http://127.0.0.2/z@3"}
	all := readDiscovered(t, ctx, kc, len(want))
	var got, again []string
	for _, d := range all {
		at := d.url + "@" + string(rune('0'+d.depth))
		if d.inLinks > 1 {
			again = append(again, fmt.Sprintf("%s×%d from %s", at, d.inLinks, d.parent))
			continue
		}
		got = append(got, at)
	}
	sort.Strings(got)
	sort.Strings(again)
	if len(got) != len(want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("published %v, want %v", got, want)
			break
		}
	}
	wantAgain := []string{"http://127.0.0.2/x@3×2 from http://127.0.0.2/p2", "http://127.0.0.2/y?@5×2 from http://127.0.0.2/p3"}
	if len(again) == 3 { // p4 in a batch after p2's
		wantAgain = []string{wantAgain[0], "http://127.0.0.2/w@3×2 from http://127.0.0.2/p4", wantAgain[1]}
		sort.Strings(wantAgain)
	}
	if !inLinks {
		wantAgain = nil
	}
	if !slices.Equal(again, wantAgain) {
		t.Errorf("published again %q, want %q", again, wantAgain)
	}
	wantDropped := 3.0 - float64(len(again))
	if n := counterValue(t, reg, "links_dropped_total", "reason", pages.DropPublished); n != wantDropped {
		t.Errorf("links_dropped_total{reason=published} = %v, want %v (x by p2, y by p3, w by p2 or p4; less the republished)", n, wantDropped)
	}
	if n := counterValue(t, reg, "links_inlinks_republished_total", "", ""); n != float64(len(again)) {
		t.Errorf("links_inlinks_republished_total = %v, want %d", n, len(again))
	}
	if wantDropped == 0 {
		return
	}
	waitFor(t, ctx, "links_dropped rows", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT sum(n) FROM links_dropped_v2 WHERE crawl_id = 'c' AND reason = ?", pages.DropPublished).Scan(&n)
		return err == nil && float64(n) == wantDropped
	})
}
