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
	"github.com/trawl-crawler/trawl/libs/chtest"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/kafkatest"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestLinksPublishedOnce: a link that many pages repeat is published once
// per depth it is first seen at; the repeats are counted as dropped
// "published", and the document still counts every link it has.
func TestLinksPublishedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := zaptest.NewLogger(t)
	kc := kafkatest.Config(t, partitions)
	topics := kc.Topics()
	store := chtest.NewStore(t)
	reg := prometheus.NewRegistry()
	now := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)

	w := kafkaio.NewWriter(kc, log, prometheus.NewRegistry())
	defer w.Close()
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	metrics, err := pages.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	proc := pages.NewProcessor(pages.Config{MaxOutlinks: 100, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, RecentLinks: 1024},
		topics, pages.Sinks{Publisher: w, Dropped: dropped}, nil, nil, log, metrics, func() time.Time { return now })
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
	go func() { defer wg.Done(); errs <- dropped.Run(writerCtx) }()
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

	page := func(u string, depth uint32, hrefs ...string) *crawlv1.FetchedPage {
		body := "<html><body>"
		for _, h := range hrefs {
			body += `<a href="` + h + `">x</a>`
		}
		return &crawlv1.FetchedPage{CrawlId: "c", Url: u, Depth: depth, FetchedAt: timestamppb.New(now),
			StatusCode: 200, ContentType: "text/html", Body: []byte(body + "</body></html>")}
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
		var msgs []kafka.Message
		for _, p := range round {
			m, err := kafkaio.NewMessage(topics.Fetched, []byte("127.0.0.2"), p)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ctx, "round parsed", func() bool {
			lag, err := kafkaio.Lag(ctx, kc, kc.GroupFor("parser"), topics.Fetched)
			return err == nil && lag == 0
		})
		t.Logf("round %d parsed", i+1)
	}

	want := []string{"http://127.0.0.2/w@3", "http://127.0.0.2/x@1", "http://127.0.0.2/x@3", "http://127.0.0.2/y@3", "http://127.0.0.2/z@3"}
	var got []string
	for _, d := range readDiscovered(t, ctx, kc, len(want)) {
		got = append(got, d.url+"@"+string(rune('0'+d.depth)))
	}
	sort.Strings(got)
	if len(got) != len(want) {
		t.Fatalf("published %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("published %v, want %v", got, want)
			break
		}
	}
	if n := counterValue(t, reg, "links_dropped_total", "reason", pages.DropPublished); n != 3 {
		t.Errorf("links_dropped_total{reason=published} = %v, want 3 (x by p2, y by p3, w by p2 or p4)", n)
	}
	waitFor(t, ctx, "links_dropped rows", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT sum(n) FROM links_dropped WHERE crawl_id = 'c' AND reason = ?", pages.DropPublished).Scan(&n)
		return err == nil && n == 3
	})
}
