package pages_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

const partitions = 4

// wantLink is one expected DiscoveredURL.
type wantLink struct {
	url, parent, anchor, rel string
	depth                    uint32
}

func TestConsumeFetchedPages(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	kc := kafkatest.Config(t, partitions)
	topics := kc.Topics()
	store := chtest.NewStore(t)
	reg := prometheus.NewRegistry()

	fetchedAt := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	html := func(crawl, u string, depth uint32, ct, body string) *crawlv1.FetchedPage {
		return &crawlv1.FetchedPage{
			CrawlId: crawl, Url: u, Depth: depth, FetchedAt: timestamppb.New(fetchedAt),
			StatusCode: 200, ContentType: ct, Body: []byte(body),
		}
	}
	inputs := []*crawlv1.FetchedPage{
		html("c1", "http://127.0.0.2/dir/a.html", 2, "text/html", `<html lang="en"><head><title>Page A</title></head><body>
			<p>Hello <b>world</b></p>
			<a href="b.html">Link B</a>
			<a href="http://127.0.0.3:8080/c">Link C</a>
			<a href="//127.0.0.4/d?x=1#frag" rel="noopener">Link D</a>
			<a href="javascript:void(0)">js</a>
			<a href="/skip" rel="nofollow">skip</a>
			<a href="b.html">duplicate</a>
		</body></html>`),
		html("c1", "http://127.0.0.5/noindex", 0, "text/html", `<meta name="robots" content="noindex"><a href="/e">Link E</a>`),
		html("c2", "https://127.0.0.6/x.xhtml", 5, "application/xhtml+xml", `<html xmlns="http://www.w3.org/1999/xhtml"><head><title>XHTML</title></head><body><a href="y">Y</a></body></html>`),
		html("c1", "http://127.0.0.2/report.pdf", 1, "application/pdf", `%PDF-1.4 <a href="/not-a-link">`),
		{CrawlId: "c1", Url: "http://127.0.0.7/", Depth: 1, ErrorKind: "timeout", ErrorMessage: "deadline exceeded"},
		{CrawlId: "c1", Url: "http://127.0.0.2/missing", Depth: 1, StatusCode: 404, ContentType: "text/html",
			Body: []byte(`<a href="/from-404">x</a>`)},
	}
	want := []wantLink{
		{url: "http://127.0.0.2/dir/b.html", parent: "http://127.0.0.2/dir/a.html", anchor: "Link B", depth: 3},
		{url: "http://127.0.0.3:8080/c", parent: "http://127.0.0.2/dir/a.html", anchor: "Link C", depth: 3},
		{url: "http://127.0.0.4/d?x=1", parent: "http://127.0.0.2/dir/a.html", anchor: "Link D", rel: "noopener", depth: 3},
		{url: "http://127.0.0.5/e", parent: "http://127.0.0.5/noindex", anchor: "Link E", depth: 1},
		{url: "https://127.0.0.6/y", parent: "https://127.0.0.6/x.xhtml", anchor: "Y", depth: 6},
	}

	// Produce the fetched pages plus one undecodable record.
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
	msgs = append(msgs, kafka.Message{Topic: topics.Fetched, Key: []byte("127.0.0.9"), Value: []byte{0xff, 0xff, 0xff}})
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("produce fetched pages: %v", err)
	}

	// Run the parser: batch writer and group, as main wires them.
	docs := chstore.NewBatchWriter(store, chstore.Documents, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	metrics, err := pages.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	proc := pages.NewProcessor(pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048},
		topics, pages.Sinks{Publisher: w, Documents: docs, Seen: store}, nil, nil, log, metrics, func() time.Time { return now })
	group, err := kafkaio.NewGroup(kc, kafkaio.GroupConfig{
		GroupID: kc.GroupFor("parser"), Topic: topics.Fetched, MaxBatch: 10, CommitInterval: 50 * time.Millisecond,
	}, proc.Assign, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	writerCtx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs <- docs.Run(writerCtx) }()
	go func() { defer wg.Done(); defer stopWriter(); errs <- group.Run(runCtx) }()
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

	// Every fetched record is eventually committed: all of them were acked.
	waitFor(t, ctx, "fetched topic fully committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kc, kc.GroupFor("parser"), topics.Fetched)
		return err == nil && lag == 0
	})

	got := readDiscovered(t, ctx, kc, len(want))
	sort.Slice(got, func(i, j int) bool { return got[i].url < got[j].url })
	if len(got) != len(want) {
		t.Fatalf("got %d discovered urls, want %d: %+v", len(got), len(want), got)
	}
	for i, g := range got {
		wl := want[i]
		if g.url != wl.url || g.parent != wl.parent || g.anchor != wl.anchor || g.rel != wl.rel || g.depth != wl.depth {
			t.Errorf("discovered %d = %+v, want %+v", i, g.wantLink, wl)
		}
		if g.source != crawlv1.Source_SOURCE_LINK || !g.at.Equal(now) {
			t.Errorf("%s: source %v at %v, want SOURCE_LINK at %v", g.url, g.source, g.at, now)
		}
		key, err := kafkaio.Key(g.url)
		if err != nil {
			t.Fatal(err)
		}
		if string(g.key) != string(key) {
			t.Errorf("%s: key %q, want %q", g.url, g.key, key)
		}
		if wantP := kafkaio.PartitionFor(key, partitions); g.partition != wantP {
			t.Errorf("%s: partition %d, want %d (host partition)", g.url, g.partition, wantP)
		}
	}

	// One document per indexable 2xx HTML page.
	type docRow struct {
		crawl, url, host, title, text, ct, lang string
		urlFP, contentFP                        uint64
		outlinks                                uint32
		status                                  uint16
		fetchedAt                               time.Time
	}
	rows, err := store.Conn().Query(ctx, `SELECT crawl_id, url, host, title, text, content_type, language,
		url_fp, content_fp, outlinks, status, fetched_at FROM documents ORDER BY url`)
	if err != nil {
		t.Fatal(err)
	}
	var gotDocs []docRow
	for rows.Next() {
		var d docRow
		if err := rows.Scan(&d.crawl, &d.url, &d.host, &d.title, &d.text, &d.ct, &d.lang,
			&d.urlFP, &d.contentFP, &d.outlinks, &d.status, &d.fetchedAt); err != nil {
			t.Fatal(err)
		}
		gotDocs = append(gotDocs, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	wantDocs := []docRow{
		{crawl: "c1", url: "http://127.0.0.2/dir/a.html", host: "127.0.0.2", title: "Page A", text: "Hello world\nLink B Link C Link D js skip duplicate",
			ct: "text/html", lang: "en", outlinks: 3, status: 200},
		{crawl: "c2", url: "https://127.0.0.6/x.xhtml", host: "127.0.0.6", title: "XHTML", text: "Y",
			ct: "application/xhtml+xml", outlinks: 1, status: 200},
	}
	if len(gotDocs) != len(wantDocs) {
		t.Fatalf("got %d documents, want %d: %+v", len(gotDocs), len(wantDocs), gotDocs)
	}
	for i, d := range gotDocs {
		wd := wantDocs[i]
		wd.urlFP = fingerprint.URL(wd.crawl, wd.url)
		wd.contentFP = fingerprint.String(wd.text)
		if !d.fetchedAt.Equal(fetchedAt) {
			t.Errorf("document %s fetched_at %v, want %v", d.url, d.fetchedAt, fetchedAt)
		}
		d.fetchedAt, wd.fetchedAt = time.Time{}, time.Time{}
		if d != wd {
			t.Errorf("document %d:\n got %+v\nwant %+v", i, d, wd)
		}
	}

	// Without --publish-documents the documents stay in ClickHouse only.
	offs, err := kafkaio.GroupOffsets(ctx, kc, "none", topics.Documents)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offs {
		if o.End != 0 {
			t.Errorf("documents topic partition %d holds %d records, want none", o.Partition, o.End)
		}
	}

	for outcome, n := range map[string]float64{
		pages.OutcomeDocument: 2, pages.OutcomeNoIndex: 1, pages.OutcomeNotHTML: 1,
		pages.OutcomeFetchError: 1, pages.OutcomeHTTPStatus: 1, pages.OutcomeUndecodable: 1,
	} {
		if got := counterValue(t, reg, "pages_parsed_total", "outcome", outcome); got != n {
			t.Errorf("pages_parsed_total{outcome=%q} = %v, want %v", outcome, got, n)
		}
	}
	// Every batch is timed at each step; publish only when it had
	// something to publish.
	steps := map[string]float64{}
	for _, st := range []string{pages.StepParse, pages.StepLookup, pages.StepPublish, pages.StepStore} {
		steps[st] = counterValue(t, reg, "batch_step_duration_seconds", "step", st)
	}
	if steps[pages.StepParse] < 1 || steps[pages.StepLookup] != steps[pages.StepParse] || steps[pages.StepStore] != steps[pages.StepParse] ||
		steps[pages.StepPublish] < 1 || steps[pages.StepPublish] > steps[pages.StepParse] {
		t.Errorf("batch steps timed %v: want every batch parsed, looked up and stored, and at least one published", steps)
	}
}

// discovered is a DiscoveredURL as read back from the topic.
type discovered struct {
	wantLink
	key       []byte
	partition int
	source    crawlv1.Source
	at        time.Time
	trap      string // DiscoveredURL.trap_family
	inLinks   uint32 // DiscoveredURL.in_links
	// sitemapPriority is DiscoveredURL.sitemap_priority, -1 when unset.
	sitemapPriority float32
}

// readDiscovered reads the discovered topic until n records arrived, then
// a little longer to catch unexpected extra records.
func readDiscovered(t *testing.T, ctx context.Context, kc kafkaio.Config, n int) []discovered {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var (
		out   []discovered
		extra *time.Timer
	)
	err := kafkaio.Follow(ctx, kc, kc.Topics().Discovered, func(m kafka.Message) {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Errorf("decode discovered record: %v", err)
			return
		}
		out = append(out, discovered{
			wantLink:  wantLink{url: d.Url, parent: d.ParentUrl, anchor: d.AnchorText, rel: d.Rel, depth: d.Depth},
			key:       m.Key,
			partition: m.Partition,
			source:    d.Source,
			at:        d.DiscoveredAt.AsTime(),
			trap:      d.TrapFamily,
			inLinks:   d.InLinks,
			sitemapPriority: func() float32 {
				if d.SitemapPriority == nil {
					return -1
				}
				return d.GetSitemapPriority()
			}(),
		})
		if len(out) == n && extra == nil {
			extra = time.AfterFunc(300*time.Millisecond, cancel)
		}
	})
	if err != nil {
		t.Fatalf("follow discovered: %v", err)
	}
	if extra != nil {
		extra.Stop()
	}
	return out
}

func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// firstSightings returns the records of got that are no in-link
// republish (in_links 0 or 1), in order.
func firstSightings(got []discovered) []discovered {
	var out []discovered
	for _, d := range got {
		if d.inLinks <= 1 {
			out = append(out, d)
		}
	}
	return out
}

// counterValue returns the value of the registered counter name whose
// labels include the given name, value pairs (a pair named "" asks
// nothing: a plain counter); the test fails when there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if labels[i] != "" && !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
					return l.GetName() == labels[i] && l.GetValue() == labels[i+1]
				}) {
					continue metrics
				}
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s%q not found", name, labels)
	return 0
}

func TestIsHTML(t *testing.T) {
	tests := []struct {
		contentType string
		want        bool
	}{
		{"text/html", true},
		{"TEXT/HTML; charset=UTF-8", true},
		{" application/xhtml+xml ", true},
		{"text/html;", true},
		{"text/plain", false},
		{"application/pdf", false},
		{"", false},
		{"text/htmlx", false},
	}
	for _, tt := range tests {
		t.Run(tt.contentType, func(t *testing.T) {
			if got := pages.IsHTML(tt.contentType); got != tt.want {
				t.Errorf("IsHTML(%q) = %v, want %v", tt.contentType, got, tt.want)
			}
		})
	}
}
