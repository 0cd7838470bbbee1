package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// maxAttempts is the fetcher's --max-attempts in the websim crawls.
const maxAttempts = 3

// webArgs are the service flags of the websim crawls: retries close
// together, so a 500's three attempts do not set the crawl's length.
var webArgs = map[string][]string{
	"fetcher": {"--max-attempts", fmt.Sprint(maxAttempts), "--retry-backoff", "400ms"},
}

// TestWebCrawlNoWastedRequest crawls a generated web that has every shape
// a link takes on the web (upper-case schemes, scheme-relative and
// relative links, dot segments, empty queries, fragments, escaped
// unreserved characters, ;jsessionid), redirect chains into pages already
// linked, 404s, a 500, binaries, GBK pages, a robots.txt Disallow, links to
// a host outside the crawl and a calendar trap, with a scope that allows
// exactly the web's hosts and a depth limit that bounds the trap. The site
// counts what it receives: every content page is fetched, and not one
// request fetches something already fetched, leaves the scope, or asks
// for a disallowed page; the only repeats are the retries of the 500s.
func TestWebCrawlNoWastedRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	start := time.Now()
	e := startWebEnv(t, ctx, webEnvConfig{
		web: websim.Config{
			Hosts: 12, Articles: 20, FirstAddr: netip.MustParseAddr("127.1.60.1"), Seed: 60,
			GBKEvery: 5, TrapEvery: 4, BigEvery: 6, BigBytes: 256 << 10, SlowEvery: 6, SlowDelay: 300 * time.Millisecond,
		},
		delay: e2eDelay,
		args:  webArgs,
	})
	// Every page is within 3 links of its host's index (lists 1 and 2, the
	// second list's articles), but a URL keeps the depth at which it was
	// first discovered, and links from other hosts' pages often find one
	// deeper than that before its own host's pages do (a limit of 3 left a
	// tenth of the web out; 4, a page now and then). 8 leaves room and
	// still stops the calendar trap within a few months each way.
	const maxDepth = 8
	e.seedScoped(ctx, webScope{AllowHosts: e.hostNames(), MaxDepth: maxDepth})
	s := e.drain(ctx, 120*time.Second)
	e.stop()
	c := costOf(e.web)
	st := c.Stats
	t.Logf("crawl drained: %s; total %s", s.Line(), time.Since(start).Round(time.Millisecond))
	t.Logf("site: %d requests (%d robots.txt), %d distinct resources; pages %d/%d (%.1f%%); duplicates %d, robots.txt beyond one per host %d; "+
		"retries %d of %d resources answered 5xx (max %d attempts); offsite %d, disallowed %d, trap %d (max depth %d); by kind %v",
		st.Requests, st.Robots, st.Distinct, st.Pages, st.PagesTotal, 100*st.Coverage(), st.Duplicates, st.RobotsMore,
		st.Retries, c.Errors5xx, maxAttempts, st.Offsite, st.Disallowed, st.Trap, maxDepth, st.ByKind)

	if st.Pages != e.web.Pages() {
		t.Errorf("fetched %d of %d content pages, want all; never requested: %v", st.Pages, e.web.Pages(),
			e.explainMissing(ctx, first(missingPages(e.web), 10)))
	}
	if st.Duplicates != 0 {
		t.Errorf("%d duplicate requests, want 0; e.g. %v", st.Duplicates, first(c.Repeated, 10))
	}
	if st.RobotsMore != 0 {
		t.Errorf("%d robots.txt requests beyond one per host, want 0", st.RobotsMore)
	}
	if st.Offsite != 0 || st.Disallowed != 0 {
		t.Errorf("%d requests outside the scope and %d under a Disallow, want 0", st.Offsite, st.Disallowed)
	}
	if c.Errors5xx == 0 {
		t.Errorf("no resource answered 5xx: the web should link its /error pages")
	}
	if limit := (maxAttempts - 1) * c.Errors5xx; st.Retries > limit {
		t.Errorf("%d retries, want at most %d ((max attempts - 1) × %d resources answered 5xx)", st.Retries, limit, c.Errors5xx)
	}
	if c.MaxHits > maxAttempts {
		t.Errorf("%s requested %d times, more than --max-attempts %d", c.MaxHitsOf, c.MaxHits, maxAttempts)
	}
	if lost := e.unfetched(ctx); len(lost) > 0 {
		t.Errorf("%d admitted URLs never fetched: %v", len(lost), first(lost, 10))
	}
	if lost := lostRedirects(e.web); len(lost) > 0 {
		t.Errorf("%d redirects whose target was never requested: %v", len(lost), first(lost, 10))
	}
	if st.Trap == 0 || st.ByKind[websim.KindRedirect] == 0 {
		t.Errorf("trap %d, redirects %d: the web should have led the crawl into both", st.Trap, st.ByKind[websim.KindRedirect])
	}
	// The calendars cost their entry and the months it links: a month
	// that repeats them makes its neighbours suspects (trap_suspected).
	// At most one month each way past the second hop, when the entry is
	// read before any page published its home link (then the entry
	// brought something new and is no candidate).
	trapHosts := e.web.TrapHosts()
	if st.TrapDeep > 2*trapHosts {
		t.Errorf("%d calendar requests past the second hop on %d trap hosts, want at most %d", st.TrapDeep, trapHosts, 2*trapHosts)
	}
	var suspected uint64
	if err := e.p.Store.Conn().QueryRow(ctx, `SELECT uniqExact(url_fp) FROM url_events WHERE crawl_id = ? AND state = 'trap_suspected'`,
		e.crawlID).Scan(&suspected); err != nil {
		t.Fatalf("query url_events: %v", err)
	}
	t.Logf("calendar: %d requests, %d past the second hop; %d URLs ended as trap_suspected", st.Trap, st.TrapDeep, suspected)
	if suspected == 0 {
		t.Errorf("no URL ended as trap_suspected: the calendars were cut by the depth limit only")
	}
}
