package previous_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/previous"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestPublish: the pages a crawl fetched (2xx and 304 final outcomes, more
// than one batch of them) are published as URLs of the next crawl with
// their depth and validators, each on its host's partition; failures,
// robots-denied URLs, redirects, retried attempts and other crawls' pages
// are not; a page the previous crawl carried over itself keeps the crawl
// holding its text.
func TestPublish(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	fetchLog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	carried := chstore.NewBatchWriter(store, chstore.DocumentsCarried, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	wctx, stopWriters := context.WithCancel(ctx)
	writersDone := make(chan struct{}, 2)
	for _, run := range []func(context.Context) error{fetchLog.Run, carried.Run} {
		go func() {
			_ = run(wctx)
			writersDone <- struct{}{}
		}()
	}
	defer func() {
		stopWriters()
		<-writersDone
		<-writersDone
	}()

	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	row := func(crawl, url string, status uint16, kind string, final bool) chstore.FetchLogRow {
		key, _ := kafkaio.Key(url)
		return chstore.FetchLogRow{CrawlID: crawl, URL: url, URLFP: fingerprint.URL(crawl, url), Host: string(key), FetchedAt: at,
			Status: status, ErrorKind: kind, Depth: 2, Final: final}
	}
	var rows []chstore.FetchLogRow
	n := publish.BatchSize + 5
	for i := range n {
		r := row("p1", fmt.Sprintf("http://127.0.%d.1/page/%d", i%3, i), 200, "", true)
		r.ETag = fmt.Sprintf(`"e%d"`, i)
		rows = append(rows, r)
	}
	unchanged := row("p1", "http://127.0.0.1/unchanged", 304, "", true)
	unchanged.LastModified = "Thu, 01 Jan 2026 00:00:00 GMT"
	plain := row("p1", "http://127.0.0.1/plain", 200, "", true) // no validators: fetched in full again
	rows = append(rows, unchanged, plain,
		row("p1", "http://127.0.0.1/gone", 404, "", true),
		row("p1", "http://127.0.0.1/denied", 0, "robots_denied", true),
		row("p1", "http://127.0.0.1/moved", 301, "", true),
		row("p1", "http://127.0.0.1/flaky", 200, "", false), // an attempt retried: its last outcome decides
		row("other", "http://127.0.0.1/elsewhere", 200, "", true),
	)
	if err := fetchLog.Write(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	if err := carried.Write(ctx, chstore.CarriedRow{CrawlID: "p1", URL: unchanged.URL, URLFP: unchanged.URLFP, Host: unchanged.Host,
		FromCrawl: "p0", FromURLFP: fingerprint.URL("p0", unchanged.URL), CheckedAt: at}); err != nil {
		t.Fatal(err)
	}

	const partitions = 3
	kc := kafkatest.Config(t, partitions)
	w := kafkaio.NewWriter(kc, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	now := at.Add(time.Hour)
	serp := row("p1", "http://127.0.0.1/search?q=x", 200, "", true) // a result-page seed: published with its engine instead
	if err := fetchLog.Write(ctx, serp); err != nil {
		t.Fatal(err)
	}
	sum, err := previous.Publish(ctx, store, w, kc.Topics().Discovered, "p2", "p1", map[string]bool{serp.URL: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := n + 2
	if sum != (previous.Summary{Published: want, Validators: n + 1, CarriedOver: 1}) {
		t.Errorf("summary %+v, want %d published, %d with validators, 1 carried over", sum, want, n+1)
	}

	got := make(map[string]*crawlv1.DiscoveredURL)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	_ = kafkaio.Follow(rctx, kc, kc.Topics().Discovered, func(m kafka.Message) {
		d := &crawlv1.DiscoveredURL{}
		if err := kafkaio.Decode(m, d); err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		if key, _ := kafkaio.Key(d.Url); m.Partition != kafkaio.PartitionFor(key, partitions) {
			t.Errorf("%s on partition %d, want its host's", d.Url, m.Partition)
		}
		got[d.Url] = d
		if len(got) == want {
			rcancel()
		}
	})
	if len(got) != want {
		t.Fatalf("read %d urls, want %d", len(got), want)
	}
	if _, ok := got[serp.URL]; ok {
		t.Errorf("the result-page seed %s was published", serp.URL)
	}
	for _, r := range rows {
		d, ok := got[r.URL]
		publishedWant := r.CrawlID == "p1" && r.Final && r.ErrorKind == "" && (r.Status == 200 || r.Status == 304)
		if ok != publishedWant {
			t.Errorf("%s (status %d, %q, final %v): published %v, want %v", r.URL, r.Status, r.ErrorKind, r.Final, ok, publishedWant)
			continue
		}
		if !ok {
			continue
		}
		doc := "p1"
		if r.URL == unchanged.URL {
			doc = "p0"
		}
		if d.CrawlId != "p2" || d.Depth != 2 || d.Source != crawlv1.Source_SOURCE_PREVIOUS_CRAWL || d.Etag != r.ETag ||
			d.LastModified != r.LastModified || d.DocumentCrawlId != doc || !d.DiscoveredAt.AsTime().Equal(now) {
			t.Errorf("%s published as %v, want crawl p2, depth 2, source PREVIOUS_CRAWL, validators %q %q, document crawl %s", r.URL, d, r.ETag, r.LastModified, doc)
		}
	}
}

// TestPublishBadInput: a run needs another crawl to seed from.
func TestPublishBadInput(t *testing.T) {
	store := chtest.NewStore(t)
	for _, prev := range []string{"", "c1"} {
		if _, err := previous.Publish(t.Context(), store, nil, "topic", "c1", prev, nil, time.Now()); err == nil {
			t.Errorf("Publish from %q into c1: no error", prev)
		}
	}
}
