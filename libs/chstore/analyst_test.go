package chstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

type analystQuery struct {
	name, sql string
}

// readAnalystQueries parses testdata/analyst_queries.sql: blocks start with
// "-- name: <name>", comment lines are skipped, a query ends with ";".
func readAnalystQueries(t *testing.T) []analystQuery {
	t.Helper()
	f, err := os.Open("testdata/analyst_queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		qs   []analystQuery
		name string
		body []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-- name:"):
			if name != "" {
				t.Fatalf("query %s has no terminating ';'", name)
			}
			name = strings.TrimSpace(strings.TrimPrefix(line, "-- name:"))
		case strings.HasPrefix(line, "--"), name == "" && strings.TrimSpace(line) == "":
		case name == "":
			t.Fatalf("line outside a named query: %q", line)
		default:
			body = append(body, line)
			if strings.HasSuffix(line, ";") {
				qs = append(qs, analystQuery{name: name, sql: strings.Join(body, "\n")})
				name, body = "", nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if name != "" {
		t.Fatalf("query %s has no terminating ';'", name)
	}
	return qs
}

// TestAnalystQueries runs every documented analyst query against a small
// crawl written with the real writers to every table the queries read
// (fetch_log and its rollups, url_seen, url_events, frontier_v2,
// documents, document_meta, near_duplicates, links, change_history,
// revisits, warc_files), some rows
// twice as a redelivery writes them, and compares each query's answer with
// the one worked out by hand below. Background merges of fetch_log and
// url_seen are stopped, so that the raw row counts the duplicates query
// reads stay as inserted. The docs must contain every query verbatim, and
// every query must have an expected answer here.
//
// The crawl: crawl-1 admits eight URLs on h0.test and h1.test. /p/0 of h0
// is fetched three times under a revisit policy (200, 304, 200 changed),
// /p/1 times out once and then answers, /p/5 and /p/6 are robots-denied;
// on h1, /p/1 answers (its row inserted twice), /p/2 redirects to /p/3,
// which waits in the frontier, /p/7 answers. crawl-2 fetches its seed a
// minute ago (row inserted twice), fails /a on three connects and had /b
// dropped from the frontier by a cancel.
func TestAnalystQueries(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	analystQueries(ctx, t, s, func(table string) error { return s.Conn().Exec(ctx, "SYSTEM STOP MERGES "+table) })
}

// TestAnalystQueriesCluster is TestAnalystQueries on a real cluster of
// two shards of two replicas in cluster mode: the same queries, unchanged,
// read the Distributed tables and must give the same answers.
func TestAnalystQueriesCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), clusterTestTimeout)
	defer cancel()
	c, cfg, stores := chtest.MigratedCluster(ctx, t, 2, 2, 1)
	s := stores[0]
	analystQueries(ctx, t, s, func(table string) error {
		for _, addr := range c.Addrs() {
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: clickhouse.Auth{Database: cfg.Database, Username: "default"}})
			if err != nil {
				return err
			}
			err = conn.Exec(ctx, "SYSTEM STOP MERGES "+table+chstore.LocalSuffix)
			conn.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// analystQueries writes the crawl of TestAnalystQueries into s, with the
// merges of fetch_log and url_seen stopped by stopMerges, and checks every
// query's answer.
func analystQueries(ctx context.Context, t *testing.T, s *chstore.Store, stopMerges func(table string) error) {
	t.Helper()
	analystQueriesDeleting(ctx, t, s, stopMerges, nil)
}

// analystQueriesDeleting is analystQueries with, when deleted is not nil,
// one crawl deleted (by deleted, once the rows are written; it returns the
// crawl's id): every query's answer is then the rows of the other crawl.
func analystQueriesDeleting(ctx context.Context, t *testing.T, s *chstore.Store, stopMerges func(table string) error, deleted func() string) {
	t.Helper()
	qs := readAnalystQueries(t)
	docs, err := os.ReadFile("../../docs/analyst-queries.md")
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}
	for _, table := range []string{"fetch_log", "url_seen"} {
		if err := stopMerges(table); err != nil {
			t.Fatalf("stop merges of %s: %v", table, err)
		}
	}

	wall := time.Now().UTC().Truncate(time.Second)
	b := wall.Truncate(time.Minute).Add(-20 * time.Minute) // every fetch of the crawl but one: three whole minutes
	at := func(sec int) time.Time { return b.Add(time.Duration(sec) * time.Second) }
	recent := wall.Add(-time.Minute) // within the last 10 minutes
	const (
		c1, c2     = "crawl-1", "crawl-2"
		h0, h1, h2 = "h0.test", "h1.test", "h2.test"
	)
	type u struct {
		crawl, host, path string
		fp                uint64
		depth             uint16
	}
	url := func(x u) string { return "http://" + x.host + x.path }
	u0, u1, u2, u3 := u{c1, h0, "/p/0", 100, 0}, u{c1, h0, "/p/1", 101, 1}, u{c1, h1, "/p/1", 102, 1}, u{c1, h1, "/p/2", 103, 2}
	u4, u5, u6, u7 := u{c1, h1, "/p/3", 104, 2}, u{c1, h0, "/p/5", 105, 1}, u{c1, h0, "/p/6", 106, 1}, u{c1, h1, "/p/7", 107, 1}
	v0, v1, v2 := u{c2, h2, "/", 200, 0}, u{c2, h2, "/a", 201, 1}, u{c2, h2, "/b", 202, 1}

	seen := func(x u) chstore.SeenRow {
		return chstore.SeenRow{CrawlID: x.crawl, Partition: uint16(x.fp % 4), FP: x.fp, URL: url(x), Depth: x.depth, FirstSeen: b.Add(-10 * time.Second)}
	}
	var seenRows []chstore.SeenRow
	for _, x := range []u{u0, u1, u2, u3, u4, u5, u6, u7, v0, v1, v2, u1, u2} { // u1, u2 redelivered
		seenRows = append(seenRows, seen(x))
	}
	write(ctx, t, s, chstore.URLSeen, seenRows)

	fetch := func(x u, attempt uint16, when time.Time, status uint16, kind, msg string, bytes uint64, ms uint32, final bool) chstore.FetchLogRow {
		return chstore.FetchLogRow{CrawlID: x.crawl, URL: url(x), URLFP: x.fp, Host: x.host, Partition: uint16(x.fp % 4), Attempt: attempt,
			FetchedAt: when, Status: status, ErrorKind: kind, ErrorMessage: msg, Bytes: bytes, ContentType: "text/html",
			DurationMs: ms, Depth: x.depth, Fetcher: "f1", Final: final}
	}
	f7, g1 := fetch(u2, 0, at(10), 200, "", "", 2000, 40, true), fetch(v0, 0, recent, 200, "", "", 500, 10, true)
	f8 := fetch(u3, 0, at(11), 301, "redirect", "redirect to http://h1.test/p/3", 0, 30, true)
	f8.RedirectLocation = url(u4)
	// archived (--warc-dir): /p/0's last fetch and h1's /p/1 (f7, whose
	// row is redelivered) and /p/7
	const w1, w2 = "trawl-20261125100000-00001-f1.warc.gz", "trawl-20261125100000-00002-f1.warc.gz"
	a0, a7 := fetch(u0, 0, at(120), 200, "", "", 1200, 100, true), fetch(u7, 0, at(12), 200, "", "", 300, 90, true)
	a0.WarcFile, a0.WarcOffset = w2, 1500
	a7.WarcFile, a7.WarcOffset = w1, 4200
	f7.WarcFile, f7.WarcOffset = w1, 0
	// best-first: /p/1 of h1 raised by a rule and its in-links, /p/7 by
	// its in-links, the redirect /p/2 lowered by a rule
	f7.Priority, f7.PriorityReason = 51, "rule+inlinks"
	a7.Priority, a7.PriorityReason = 2, "inlinks"
	f8.Priority, f8.PriorityReason = -5, "rule"
	write(ctx, t, s, chstore.FetchLog, []chstore.FetchLogRow{
		fetch(u0, 0, at(0), 200, "", "", 1000, 100, true),
		fetch(u0, 0, at(60), 304, "", "", 0, 100, true),
		a0,
		fetch(u1, 0, at(5), 0, "timeout", "timeout after 5s", 0, 5000, false),
		fetch(u1, 1, at(65), 200, "", "", 800, 100, true),
		fetch(u5, 0, at(6), 0, "robots_denied", "disallowed by robots.txt", 0, 0, true),
		fetch(u6, 0, at(7), 0, "robots_denied", "disallowed by robots.txt", 0, 0, true),
		f7, f8,
		// h1's latencies 30, 40, 90: percentiles that need no rounding
		// (18.16 returns the argument's integer type, current releases
		// Float64)
		a7,
		g1,
		fetch(v1, 0, at(0), 0, "connect", "connection refused", 0, 5, false),
		fetch(v1, 1, at(30), 0, "connect", "connection refused", 0, 5, false),
		fetch(v1, 2, at(90), 0, "connect", "connection refused", 0, 5, true),
	})
	write(ctx, t, s, chstore.FetchLog, []chstore.FetchLogRow{f7, g1}) // redelivered
	warcFile := func(name string, closed time.Time) chstore.WarcFileRow {
		return chstore.WarcFileRow{File: name, Dir: "/data/warc", Fetcher: "f1", OpenedAt: b, ClosedAt: closed, Bytes: 1 << 20, Records: 9, Responses: 3}
	}
	write(ctx, t, s, chstore.WarcFiles, []chstore.WarcFileRow{warcFile(w1, at(60)), warcFile(w2, at(180))})
	write(ctx, t, s, chstore.WarcFiles, []chstore.WarcFileRow{warcFile(w1, at(60))}) // redelivered

	write(ctx, t, s, chstore.URLEvents, []chstore.URLEventRow{
		{CrawlID: c1, URL: url(u0), URLFP: u0.fp, Host: h0, State: "duplicate", Reason: "duplicate", Depth: 1, EventTime: at(30)},
		{CrawlID: c1, URL: "http://h9.test/far", URLFP: 900, Host: "h9.test", State: "out_of_scope", Reason: "too_deep", Depth: 3, EventTime: at(40)},
		// Two months of a calendar the parser suspected as a trap, one
		// of them redelivered.
		{CrawlID: c1, URL: "http://h1.test/cal/2027/1", URLFP: 910, Host: h1, State: "trap_suspected", Reason: "trap_suspected", Depth: 4, EventTime: at(50)},
		{CrawlID: c1, URL: "http://h1.test/cal/2026/9", URLFP: 911, Host: h1, State: "trap_suspected", Reason: "trap_suspected", Depth: 5, EventTime: at(51)},
		{CrawlID: c1, URL: "http://h1.test/cal/2026/9", URLFP: 911, Host: h1, State: "trap_suspected", Reason: "trap_suspected", Depth: 5, EventTime: at(52)},
	})
	frontier := func(x u, state uint8) chstore.FrontierRow {
		return chstore.FrontierRow{Partition: uint16(x.fp % 4), CrawlID: x.crawl, Host: x.host, FP: x.fp, Depth: x.depth, URL: url(x),
			DiscoveredAt: at(11), State: state, UpdatedAt: at(20)}
	}
	write(ctx, t, s, chstore.Frontier, []chstore.FrontierRow{frontier(u4, chstore.FrontierPending),
		frontier(v2, chstore.FrontierPending), frontier(v2, chstore.FrontierCancelled)})

	doc := func(x u, when time.Time, title string, content uint64, outlinks uint32, lang string) chstore.DocumentRow {
		return chstore.DocumentRow{CrawlID: x.crawl, URL: url(x), URLFP: x.fp, Host: x.host, FetchedAt: when, Status: 200, Title: title,
			Text: "text of " + title, ContentFP: content, Outlinks: outlinks, ContentType: "text/html", Language: lang}
	}
	// structured data: a product whose breadcrumb item names come first,
	// its price a number; one with a string price and OpenGraph tags
	lamp, kettle := doc(u2, at(10), "Page one of h1", 9, 1, "de"), doc(u7, at(12), "Seven", 10, 0, "de")
	lamp.JSONLD = `[{"@type":"BreadcrumbList","itemListElement":[{"@type":"ListItem","name":"Home"}]},` +
		`{"@context":"https://schema.org","@type":"Product","name":"Lamp","offers":{"@type":"Offer","price":25,"priceCurrency":"EUR"}}]`
	kettle.JSONLD = `[{"@context":"https://schema.org","@type":"Product","name":"Kettle","offers":{"@type":"Offer","price":"19.99","priceCurrency":"EUR"}}]`
	kettle.OpenGraph = `{"og:title":"Kettle","og:image":"http://h1.test/k.png"}`
	// detected languages: the kettle page's text is English under its
	// lang="de"; /p/0's first version looked German, its re-crawl does not;
	// /p/1's could not be told
	lamp.LanguageDetected, kettle.LanguageDetected = "de", "en"
	homeV1, home := doc(u0, at(0), "Home v1", 7, 2, "en"), doc(u0, at(120), "Home", 7, 2, "en")
	homeV1.LanguageDetected, home.LanguageDetected = "de", "en"
	two := doc(v0, recent, "Two", 11, 3, "fr")
	two.LanguageDetected = "fr"
	// extraction rules: the lamp and kettle pages matched the rule
	// "product" (the kettle's images matched nothing), /p/0 the rule
	// "article", whose author and date matched nothing on its latest
	// version; /p/1 of h0 and crawl-2's page are PDFs with their own
	// properties, /p/1's text unread (encrypted)
	lamp.Fields = `{"name":"Lamp","price":25,"images":["http://h1.test/l1.png","http://h1.test/l2.png"]}`
	kettle.Fields = `{"name":"Kettle \"Steel\"","price":19.99,"released":"2026-05-01T00:00:00Z"}`
	home.Fields = `{"headline":"Home"}`
	homeV1.Fields = `{"headline":"Home v1","author":"Bo"}`
	pdf := doc(u1, at(65), "Page one", 7, 1, "en") // the same content as /p/0
	pdf.ContentType, pdf.Properties = "application/pdf", `{"author":"Ann","created":"2026-01-02T03:04:05Z","pages":12}`
	two.ContentType, two.Properties = "application/pdf", `{"pages":3}`
	write(ctx, t, s, chstore.Documents, []chstore.DocumentRow{
		homeV1, home, // a re-crawl replaces the first version
		pdf,
		lamp, kettle,
		two,
	})
	meta := func(x u, when time.Time, rule string, missing []string, parseError string) chstore.DocumentMetaRow {
		return chstore.DocumentMetaRow{CrawlID: x.crawl, URL: url(x), URLFP: x.fp, Host: x.host, FetchedAt: when,
			ExtractRule: rule, ExtractMissing: missing, ParseError: parseError}
	}
	homeMeta := meta(u0, at(120), "article", []string{"author", "date"}, "")
	write(ctx, t, s, chstore.DocumentMeta, []chstore.DocumentMetaRow{
		meta(u0, at(0), "article", []string{"date"}, ""), homeMeta, homeMeta, // re-crawled, the latest redelivered
		meta(u1, at(65), "", nil, "encrypted"),
		meta(u2, at(10), "product", nil, ""),
		meta(u7, at(12), "product", []string{"images"}, ""),
	})
	write(ctx, t, s, chstore.NearDuplicates, []chstore.NearDuplicateRow{{CrawlID: c1, URL: url(u2), URLFP: u2.fp, Host: h1,
		NearDuplicateOf: url(u0), Distance: 2, Simhash: 0xfeed, FoundAt: at(10)}})
	link := func(src, dst u, pos uint16, anchor, rel string) chstore.LinkRow {
		return chstore.LinkRow{CrawlID: src.crawl, TargetHost: dst.host, TargetURL: url(dst), TargetFP: dst.fp, SourceHost: src.host,
			SourceURL: url(src), SourceFP: src.fp, Position: pos, AnchorText: anchor, Rel: rel, Tag: "a", Depth: src.depth + 1, FoundAt: at(0)}
	}
	l1 := link(u0, u2, 1, "page one", "")
	write(ctx, t, s, chstore.Links, []chstore.LinkRow{l1, l1, // redelivered
		link(u1, u2, 3, "one", "ugc"), link(u0, u3, 2, "page one", ""), link(u2, u3, 1, "", ""),
		{CrawlID: c2, TargetHost: h1, TargetURL: url(u2), TargetFP: u2.fp, SourceHost: h2, SourceURL: url(v0), SourceFP: v0.fp,
			Position: 1, AnchorText: "x", Tag: "a", FoundAt: recent}, // another crawl's
	})
	change := func(visit uint32, when time.Time, status uint16, notModified, changed uint8, content uint64, interval uint32) chstore.ChangeRow {
		return chstore.ChangeRow{CrawlID: c1, Host: h0, URLFP: u0.fp, URL: url(u0), VisitedAt: when, Visit: visit, Status: status,
			NotModified: notModified, Changed: changed, ContentFP: content, IntervalS: interval}
	}
	write(ctx, t, s, chstore.ChangeHistory, []chstore.ChangeRow{change(1, at(0), 200, 0, 0, 7, 3600),
		change(2, at(60), 304, 1, 0, 7, 7200), change(3, at(120), 200, 0, 1, 8, 3600)})
	revisit := func(visits, changes uint32, updated time.Time, etag string, content uint64, interval uint32) chstore.RevisitRow {
		return chstore.RevisitRow{CrawlID: c1, Partition: uint16(u0.fp % 4), URL: url(u0), URLFP: u0.fp, Host: h0, ETag: etag,
			ContentFP: content, IntervalS: interval, NextVisit: updated.Add(time.Duration(interval) * time.Second),
			Changes: changes, Visits: visits, UpdatedAt: updated}
	}
	write(ctx, t, s, chstore.Revisits, []chstore.RevisitRow{revisit(2, 0, at(60), `"v2"`, 7, 7200), revisit(3, 1, at(120), `"v3"`, 8, 3600)})

	tm := func(x time.Time) string { return x.UTC().Format(time.DateTime) }
	m0, m1, m2, mr := tm(at(0)), tm(at(60)), tm(at(120)), tm(recent.Truncate(time.Minute))
	epoch := tm(time.Unix(0, 0))
	// want: each query's rows, columns joined by " | " (arrays of strings
	// quoted, times in UTC); ordered: the query's ORDER BY decides the
	// order completely, otherwise rows are compared as a set.
	want := map[string]struct {
		ordered bool
		rows    []string
	}{
		"pages_per_host_per_minute": {false, []string{
			"crawl-1 | h0.test | " + m0 + " | 4 | 3 | 1000",
			"crawl-1 | h0.test | " + m1 + " | 2 | 0 | 800",
			"crawl-1 | h0.test | " + m2 + " | 1 | 0 | 1200",
			"crawl-1 | h1.test | " + m0 + " | 3 | 1 | 2300",
			"crawl-2 | h2.test | " + m0 + " | 2 | 2 | 0",
			"crawl-2 | h2.test | " + m1 + " | 1 | 1 | 0",
			"crawl-2 | h2.test | " + mr + " | 1 | 0 | 500",
		}},
		// the rollups count every insert: the redelivered rows too
		"pages_per_host_per_minute_rollup": {false, []string{
			"crawl-1 | h0.test | " + m0 + " | 4 | 3 | 1000 | 1275",
			"crawl-1 | h0.test | " + m1 + " | 2 | 0 | 800 | 100",
			"crawl-1 | h0.test | " + m2 + " | 1 | 0 | 1200 | 100",
			"crawl-1 | h1.test | " + m0 + " | 4 | 1 | 4300 | 50",
			"crawl-2 | h2.test | " + m0 + " | 2 | 2 | 0 | 5",
			"crawl-2 | h2.test | " + m1 + " | 1 | 1 | 0 | 5",
			"crawl-2 | h2.test | " + mr + " | 2 | 0 | 1000 | 10",
		}},
		"status_codes_over_time": {false, []string{
			"crawl-1 | " + m0 + " | 0 | 3", "crawl-1 | " + m0 + " | 200 | 4", "crawl-1 | " + m0 + " | 300 | 1",
			"crawl-1 | " + m1 + " | 200 | 1", "crawl-1 | " + m1 + " | 300 | 1", "crawl-1 | " + m2 + " | 200 | 1",
			"crawl-2 | " + m0 + " | 0 | 2", "crawl-2 | " + m1 + " | 0 | 1", "crawl-2 | " + mr + " | 200 | 2",
		}},
		"status_codes_exact": {false, []string{
			"crawl-1 | 200 | 5", "crawl-1 | 0 | 3", "crawl-1 | 304 | 1", "crawl-1 | 301 | 1",
			"crawl-2 | 0 | 3", "crawl-2 | 200 | 1",
		}},
		// robots_denied (h0, twice) and the redirect (h1) are no failures
		"failure_reasons": {false, []string{
			"crawl-2 | connect | 3 | 1 | connection refused",
			"crawl-1 | timeout | 1 | 1 | timeout after 5s",
		}},
		"failing_hosts": {false, []string{
			`crawl-2 | h2.test | 3 | 4 | 0.75 | ["connect"]`,
			`crawl-1 | h0.test | 1 | 7 | 0.143 | ["timeout"]`,
		}},
		"bytes_per_host": {true, []string{
			"crawl-1 | h0.test | 3000 | 2.93 KiB | 429",
			"crawl-1 | h1.test | 2300 | 2.25 KiB | 767",
			"crawl-2 | h2.test | 500 | 500.00 B | 125",
		}},
		// status 0 (no answer) does not count: /p/1's 5 s timeout is not h0's max
		"latency_percentiles": {true, []string{
			"crawl-1 | h0.test | 4 | [100 100 100] | 100",
			"crawl-1 | h1.test | 3 | [40 80 89] | 90",
			"crawl-2 | h2.test | 1 | [10 10 10] | 10",
		}},
		"duplicates": {true, []string{
			"crawl-1 | 10 | 7 | 3 | 1 | 2",
			"crawl-2 | 4 | 2 | 2 | 1 | 0",
		}},
		"duplicate_content": {true, []string{"crawl-1 | 4 | 3 | 1", "crawl-2 | 1 | 1 | 0"}},
		// the latest "text of Home" (12 bytes), 16, 22 and 13
		"text_sizes":      {true, []string{"crawl-1 | 4 | 63 | 16 | 22", "crawl-2 | 1 | 11 | 11 | 11"}},
		"suspected_traps": {true, []string{"h1.test | /cal/#/# | 2 | 4 | http://h1.test/cal/2026/9"}},
		"products": {true, []string{
			"crawl-1 | http://h1.test/p/1 | Lamp | 25 | EUR | ",
			"crawl-1 | http://h1.test/p/7 | Kettle | 19.99 | EUR | http://h1.test/k.png",
		}},
		"language_mismatch": {true, []string{"crawl-1 | http://h1.test/p/7 | de | en"}},
		"field_values": {true, []string{
			"crawl-1 | http://h1.test/p/1 | Lamp | 25 | ",
			`crawl-1 | http://h1.test/p/7 | Kettle "Steel" | 19.99 | 2026-05-01T00:00:00Z`,
		}},
		"field_lists": {true, []string{
			"crawl-1 | http://h1.test/p/1 | http://h1.test/l1.png",
			"crawl-1 | http://h1.test/p/1 | http://h1.test/l2.png",
		}},
		// /p/0's first version (missing only its date) is replaced
		"extract_rules": {true, []string{"crawl-1 | article | 1 | 0 | 1", "crawl-1 | product | 2 | 1 | 1"}},
		"extract_missing": {true, []string{
			"crawl-1 | article | author | 1 | 0 | 1 | 1 | http://h0.test/p/0",
			"crawl-1 | article | date | 1 | 0 | 1 | 1 | http://h0.test/p/0",
			"crawl-1 | product | images | 2 | 1 | 1 | 0.5 | http://h1.test/p/7",
		}},
		"parse_errors": {true, []string{"crawl-1 | encrypted | 1 | http://h0.test/p/1"}},
		"pdf_documents": {true, []string{
			"crawl-1 | http://h0.test/p/1 | Page one | Ann | 2026-01-02T03:04:05Z | 12 | encrypted",
			"crawl-2 | http://h2.test/ | Two |  |  | 3 | ",
		}},
		"near_duplicates": {true, []string{`crawl-1 | http://h0.test/p/0 | 1 | ["http://h1.test/p/1"] | 2 | Page one of h1`}},
		// last attempts only: /p/1 of h0's timeout and /a's first two
		// connects are not counted
		"crawl_order": {true, []string{
			"crawl-1 | rule+inlinks | 10 and up | 51 | 1 | 1 | 1 | 1",
			"crawl-1 | inlinks | 1 to 9 | 2 | 1 | 1 | 1 | 1",
			"crawl-1 | (none) | 0 | 0 | 6 | 3 | 0 | 1",
			"crawl-1 | rule | below 0 | -5 | 1 | 0 | 2 | 2",
			"crawl-2 | (none) | 0 | 0 | 2 | 1 | 0 | 1",
		}},
		"in_links": {true, []string{
			"http://h0.test/p/0 | page one |  | 1",
			"http://h0.test/p/1 | one | ugc | 3",
		}},
		"host_anchor_texts": {true, []string{"page one | 2 | 1 | 2", "one | 1 | 1 | 1"}},
		"documents_found": {false, []string{
			`crawl-1 | h0.test | 2 | 3 | ["en"] | ` + m2,
			`crawl-1 | h1.test | 2 | 1 | ["de"] | ` + tm(at(12)),
			`crawl-2 | h2.test | 1 | 3 | ["fr"] | ` + tm(recent),
		}},
		"crawl_progress": {true, []string{
			"crawl-1 | 8 | 7 | 1 | 4 | 2 | 0 | " + m0 + " | " + m2,
			"crawl-2 | 3 | 2 | 1 | 1 | 1 | 1 | " + m0 + " | " + tm(recent),
		}},
		// crawl-1: /p/3 of h1 (the redirect's target) is pending; crawl-2:
		// /a failed after its last retry, /b was cancelled in the frontier
		"crawl_status": {true, []string{
			"crawl-1 | 8 | 7 | 1 | 0 | 4 | 1 | 2 | 0 | 0 | 0 | 4 | running",
			"crawl-2 | 3 | 3 | 0 | 0 | 1 | 0 | 0 | 1 | 1 | 0 | 0 | finished",
		}},
		"url_journey": {true, []string{
			"admitted | 0 | " + tm(b.Add(-10*time.Second)),
			"fetched | 200 | " + m0,
			"duplicate | duplicate | " + tm(at(30)),
			"fetched | 304 | " + m1,
			"fetched | 200 | " + m2,
		}},
		"url_change_history": {true, []string{
			m0 + " | 200 |  | 0 | 0 | 7 | 3600",
			m1 + " | 304 |  | 0 | 1 | 7 | 7200",
			m2 + " | 200 |  | 1 | 0 | 8 | 3600",
		}},
		// one change among the two re-visits of /p/0
		"host_change_rate": {true, []string{
			"crawl-1 | h0.test | 7 | 3 | 1 | 1 | 0.5",
			"crawl-2 | h2.test | 4 | 0 | 0 | 0 | 0",
			"crawl-1 | h1.test | 3 | 0 | 0 | 0 | 0",
		}},
		// newest first; f7's redelivered row and w1's listed twice count once
		"archived_responses": {true, []string{
			"http://h0.test/p/0 | 200 | " + m2 + " | " + w2 + " | /data/warc | 1500 | " + tm(at(180)),
			"http://h1.test/p/7 | 200 | " + tm(at(12)) + " | " + w1 + " | /data/warc | 4200 | " + m1,
			"http://h1.test/p/1 | 200 | " + tm(at(10)) + " | " + w1 + " | /data/warc | 0 | " + m1,
		}},
		"revisit_schedule": {true, []string{
			`http://h0.test/p/0 | 3 | 1 | 3600 | ` + tm(at(120+3600)) + ` | "v3" | `,
			"http://h0.test/p/1 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h0.test/p/5 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h0.test/p/6 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h1.test/p/1 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h1.test/p/2 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h1.test/p/3 | 0 | 0 | 0 | " + epoch + " |  | ",
			"http://h1.test/p/7 | 0 | 0 | 0 | " + epoch + " |  | ",
		}},
	}

	gone := ""
	if deleted != nil {
		gone = deleted()
		for name, w := range want {
			w.rows = slices.DeleteFunc(slices.Clone(w.rows), func(r string) bool { return strings.HasPrefix(r, gone+" | ") })
			want[name] = w
		}
	}
	names := map[string]bool{}
	for _, q := range qs {
		names[q.name] = true
		t.Run(q.name, func(t *testing.T) {
			if !strings.Contains(string(docs), q.sql) {
				t.Errorf("docs/analyst-queries.md lacks query %s verbatim", q.name)
			}
			w, ok := want[q.name]
			if !ok {
				t.Fatalf("no expected answer for query %s", q.name)
			}
			got := queryRows(ctx, t, s, q.sql)
			exp := slices.Clone(w.rows)
			if gone != "" && q.name == "duplicates" {
				// Its last two columns count raw rows, which merges
				// collapse; mutations need merges running.
				got, exp = firstColumns(got, 4), firstColumns(exp, 4)
			}
			if !w.ordered {
				slices.Sort(got)
				slices.Sort(exp)
			}
			if !slices.Equal(got, exp) {
				t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
			}
		})
	}
	for name := range want {
		if !names[name] {
			t.Errorf("expected answer for %s, which is not in testdata/analyst_queries.sql", name)
		}
	}
}

// firstColumns returns rows (columns joined by " | ") cut to their first n
// columns.
func firstColumns(rows []string, n int) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = strings.Join(strings.SplitN(r, " | ", n+1)[:min(n, strings.Count(r, " | ")+1)], " | ")
	}
	return out
}

// queryRows runs sql and returns its rows, each as its columns joined by
// " | " (see cell).
func queryRows(ctx context.Context, t *testing.T, s *chstore.Store, sql string) []string {
	t.Helper()
	rows, err := s.Conn().Query(ctx, strings.TrimSuffix(sql, ";"))
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var dest []any
		for _, ct := range rows.ColumnTypes() {
			dest = append(dest, reflect.New(ct.ScanType()).Interface())
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatalf("scan: %v", err)
		}
		cells := make([]string, len(dest))
		for i, d := range dest {
			cells[i] = cell(reflect.ValueOf(d).Elem().Interface())
		}
		out = append(out, strings.Join(cells, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v", err)
	}
	return out
}

// cell formats one value: times in UTC, arrays of strings quoted, numbers
// and the rest as fmt prints them.
func cell(v any) string {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.DateTime)
	case []string:
		return fmt.Sprintf("%q", x)
	default:
		return fmt.Sprint(x)
	}
}

func write[T any](ctx context.Context, t *testing.T, s *chstore.Store, tbl chstore.Table[T], rows []T) {
	t.Helper()
	w := chstore.NewBatchWriter(s, tbl, chstore.BatchOptions{MaxRows: len(rows)}, zaptest.NewLogger(t), nil)
	stop := runWriter(t, w)
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatalf("write %s: %v", tbl.Name, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
