package pages_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestScopeDuplicatesSitemapsSERP runs the processor with a crawl spec:
// same-host-only, deny patterns and the trap guard drop links (counted in
// Prometheus and in ClickHouse links_dropped); only detail pages become
// documents (published and stored with their metadata); the second page
// with the same text is recorded as a duplicate and its links are not
// followed; a sitemap's URLs are published with lastmod; a result page
// yields only its result links.
func TestScopeDuplicatesSitemapsSERP(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	kc := kafkatest.Config(t, partitions)
	topics := kc.Topics()
	store := chtest.NewStore(t)
	reg := prometheus.NewRegistry()
	fetchedAt := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	now := time.Date(2026, 4, 1, 12, 0, 5, 0, time.UTC)

	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "s", Revision: 1, Scope: &crawlv1.Scope{
		SameHostOnly:        true,
		DenyPatterns:        []string{`/private/`},
		MaxRepeatedSegments: 2,
		DetailPatterns:      []string{`/item/\d+$`},
	}})
	const article = `<p>An article long enough to be a document, about crawling the web politely and well.</p>`
	page := func(u, ct, engine, body string) *crawlv1.FetchedPage {
		return &crawlv1.FetchedPage{CrawlId: "s", Url: u, Depth: 1, FetchedAt: timestamppb.New(fetchedAt),
			StatusCode: 200, ContentType: ct, Body: []byte(body), SerpEngine: engine}
	}
	inputs := []*crawlv1.FetchedPage{
		page("http://127.0.0.2/list.html", "text/html", "", `<title>List</title>
			<a href="/item/1">one</a> <a href="/item/2">two</a> <a href="http://127.0.0.3/other">other host</a>
			<a href="/private/x">private</a> <a href="/a/b/a/b/a/x">trap</a>`),
		page("http://127.0.0.2/item/1", "text/html", "", `<title>One</title><meta name="description" content="First item">`+article+`<a href="/from-one">next</a>`),
		page("http://127.0.0.2/item/2", "text/html", "", `<title>Two</title>`+article+`<a href="/from-two">next</a><a href="/from-two-b"><img src="x.png"></a>`),
		page("http://127.0.0.2/sitemap.xml", "application/xml", "", `<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
			<url><loc>http://127.0.0.2/mapped</loc><lastmod>2026-03-01</lastmod><priority>0.8</priority></url>
			<url><loc>http://127.0.0.3/elsewhere</loc></url></urlset>`),
		page("http://127.0.0.2/search?q=x", "text/html", "bing", `<ol><li class="b_algo"><h2><a href="http://127.0.0.4/result">Result</a></h2></li></ol>
			<a href="/search?q=x&first=11">next page</a>`),
	}
	w := kafkaio.NewWriter(kc, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for _, p := range inputs {
		key, err := kafkaio.Key(p.Url)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(topics.Fetched, key, p)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("produce fetched pages: %v", err)
	}

	opts := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, opts, log, reg)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, opts, log, reg)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, opts, log, reg)
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, opts, log, reg)
	metrics, err := pages.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	engines, err := serp.Load("")
	if err != nil {
		t.Fatal(err)
	}
	proc := pages.NewProcessor(pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, FollowDuplicates: true, PublishDocuments: true},
		topics, pages.Sinks{Publisher: w, Documents: docs, Meta: meta, ContentSeen: seen, Dropped: dropped, Seen: store},
		specs, engines, log, metrics, func() time.Time { return now })
	group, err := kafkaio.NewGroup(kc, kafkaio.GroupConfig{
		GroupID: kc.GroupFor("parser"), Topic: topics.Fetched, MaxBatch: 10, CommitInterval: 50 * time.Millisecond,
	}, proc.Assign, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	writerCtx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for _, run := range []func(context.Context) error{docs.Run, meta.Run, seen.Run, dropped.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- run(writerCtx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); defer stopWriters(); errs <- group.Run(runCtx) }()
	defer func() {
		stop()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("run: %v", err)
			}
		}
	}()
	waitFor(t, ctx, "fetched topic fully committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kc, kc.GroupFor("parser"), topics.Fetched)
		return err == nil && lag == 0
	})

	// Outlinks: the list page's two items, the first item's link (the
	// duplicate's are not followed), one sitemap URL, one search result.
	got := readDiscovered(t, ctx, kc, 5)
	sort.Slice(got, func(i, j int) bool { return got[i].url < got[j].url })
	want := []struct {
		url    string
		source crawlv1.Source
	}{
		{"http://127.0.0.2/from-one", crawlv1.Source_SOURCE_LINK},
		{"http://127.0.0.2/item/1", crawlv1.Source_SOURCE_LINK},
		{"http://127.0.0.2/item/2", crawlv1.Source_SOURCE_LINK},
		{"http://127.0.0.2/mapped", crawlv1.Source_SOURCE_SITEMAP},
		{"http://127.0.0.4/result", crawlv1.Source_SOURCE_LINK},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d discovered urls, want %d: %+v", len(got), len(want), got)
	}
	for i, g := range got {
		if g.url != want[i].url || g.source != want[i].source {
			t.Errorf("discovered %d = %s %v, want %s %v", i, g.url, g.source, want[i].url, want[i].source)
		}
		// The sitemap entry's <priority> goes with its URL; a link has none.
		wantPriority := float32(-1)
		if g.source == crawlv1.Source_SOURCE_SITEMAP {
			wantPriority = 0.8
		}
		if g.sitemapPriority != wantPriority {
			t.Errorf("discovered %s: sitemap priority %v, want %v (-1: unset)", g.url, g.sitemapPriority, wantPriority)
		}
	}

	// Documents topic: the two detail pages, the second marked duplicate.
	var gotDocs []*crawlv1.Document
	rctx, rcancel := context.WithCancel(ctx)
	err = kafkaio.Follow(rctx, kc, topics.Documents, func(m kafka.Message) {
		var d crawlv1.Document
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Errorf("decode document: %v", err)
			return
		}
		if key, _ := kafkaio.Key(d.Url); string(m.Key) != string(key) {
			t.Errorf("document %s keyed %q, want %q", d.Url, m.Key, key)
		}
		gotDocs = append(gotDocs, &d)
		if len(gotDocs) == 2 {
			time.AfterFunc(300*time.Millisecond, rcancel)
		}
	})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(gotDocs, func(i, j int) bool { return gotDocs[i].Url < gotDocs[j].Url })
	if len(gotDocs) != 2 {
		t.Fatalf("got %d documents on the topic, want 2", len(gotDocs))
	}
	d1, d2 := gotDocs[0], gotDocs[1]
	if d1.Url != "http://127.0.0.2/item/1" || d1.IsDuplicate || d1.Description != "First item" || d1.Outlinks != 1 {
		t.Errorf("first document = %v", d1)
	}
	// A duplicate's links are not followed, but the document still counts
	// the two links it has.
	if d2.Url != "http://127.0.0.2/item/2" || !d2.IsDuplicate || d2.DuplicateOf != d1.Url || d2.Outlinks != 2 {
		t.Errorf("second document = %v", d2)
	}
	if d1.ContentFp != d2.ContentFp || d1.Simhash == 0 || d1.Simhash != simhash.Sum64(d1.Text) {
		t.Errorf("fingerprints: content %x %x simhash %x (text %q)", d1.ContentFp, d2.ContentFp, d1.Simhash, d1.Text)
	}

	// ClickHouse: metadata and first-seen content of both, dropped links by reason.
	waitFor(t, ctx, "document_meta rows", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT count() FROM document_meta FINAL WHERE crawl_id = 's'").Scan(&n)
		return err == nil && n == 2
	})
	var dupOf string
	var isDup uint8
	if err := store.Conn().QueryRow(ctx, "SELECT is_duplicate, duplicate_of FROM document_meta FINAL WHERE url = 'http://127.0.0.2/item/2'").Scan(&isDup, &dupOf); err != nil {
		t.Fatal(err)
	}
	if isDup != 1 || dupOf != "http://127.0.0.2/item/1" {
		t.Errorf("document_meta item/2: is_duplicate %d duplicate_of %q", isDup, dupOf)
	}
	wantDropped := map[string]uint64{
		"out_of_scope":   2, // list page's other host, sitemap's other host
		"filtered":       1,
		"trap_guard":     1,
		"duplicate_page": 2,
	}
	gotDropped := make(map[string]uint64)
	waitFor(t, ctx, "links_dropped rows", func() bool {
		rows, err := store.Conn().Query(ctx, "SELECT reason, sum(n) FROM links_dropped_v2 WHERE crawl_id = 's' AND host = '127.0.0.2' GROUP BY reason")
		if err != nil {
			return false
		}
		defer rows.Close()
		clear(gotDropped)
		for rows.Next() {
			var (
				r string
				n uint64
			)
			if err := rows.Scan(&r, &n); err != nil {
				return false
			}
			gotDropped[r] = n
		}
		return len(gotDropped) >= len(wantDropped)
	})
	// Counted per hour: every row's hour is the start of one.
	var offHour uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM links_dropped_v2 WHERE crawl_id = 's' AND hour != toStartOfHour(hour)").Scan(&offHour); err != nil || offHour != 0 {
		t.Errorf("links_dropped_v2 rows not on the hour: %d (%v)", offHour, err)
	}
	for reason, n := range wantDropped {
		if gotDropped[reason] != n {
			t.Errorf("links_dropped %s = %d, want %d (all: %v)", reason, gotDropped[reason], n, gotDropped)
		}
		if got := counterValue(t, reg, "links_dropped_total", "reason", reason); got != float64(n) {
			t.Errorf("links_dropped_total{reason=%q} = %v, want %d", reason, got, n)
		}
	}
	for outcome, n := range map[string]float64{
		pages.OutcomeList: 1, pages.OutcomeDocument: 1, pages.OutcomeDuplicate: 1, pages.OutcomeSitemap: 1, pages.OutcomeSERP: 1,
	} {
		if got := counterValue(t, reg, "pages_parsed_total", "outcome", outcome); got != n {
			t.Errorf("pages_parsed_total{outcome=%q} = %v, want %v", outcome, got, n)
		}
	}
}
