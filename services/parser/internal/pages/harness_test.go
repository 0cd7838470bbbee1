package pages_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// parserRun is one parser consumer group over a test's own topics.
type parserRun struct {
	t    *testing.T
	kc   kafkaio.Config
	w    *kafkaio.Writer
	reg  *prometheus.Registry
	done chan error // the group run's result
	stop context.CancelFunc
}

// startParser runs a processor with cfg and sinks (Publisher is the run's
// own writer) in a consumer group until cleanup; the group's error is on
// done.
func startParser(t *testing.T, cfg pages.Config, sinks pages.Sinks, now time.Time) *parserRun {
	t.Helper()
	return startParserSpecs(t, cfg, sinks, nil, now)
}

// startParserSpecs is startParser with the crawls' specifications.
func startParserSpecs(t *testing.T, cfg pages.Config, sinks pages.Sinks, specs pages.SpecSource, now time.Time) *parserRun {
	t.Helper()
	log := zaptest.NewLogger(t)
	r := &parserRun{t: t, kc: kafkatest.Config(t, partitions), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	r.w = kafkaio.NewWriter(r.kc, log, prometheus.NewRegistry())
	t.Cleanup(func() { _ = r.w.Close() })
	sinks.Publisher = r.w
	metrics, err := pages.NewMetrics(r.reg)
	if err != nil {
		t.Fatal(err)
	}
	proc := pages.NewProcessor(cfg, r.kc.Topics(), sinks, specs, nil, log, metrics, func() time.Time { return now })
	t.Cleanup(func() { _ = proc.Close() }) // after the group has stopped (cleanups run last first)
	group, err := kafkaio.NewGroup(r.kc, kafkaio.GroupConfig{
		GroupID: r.kc.GroupFor("parser"), Topic: r.kc.Topics().Fetched, MaxBatch: 10, CommitInterval: 50 * time.Millisecond,
	}, proc.Assign, log, r.reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r.stop = cancel
	exited := make(chan struct{})
	go func() {
		r.done <- group.Run(ctx)
		close(exited)
	}()
	// The group stops before the test ends: it logs as it stops, and a
	// log line after the test is a panic.
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	return r
}

// runWriters runs batch writers until cleanup.
func runWriters(t *testing.T, ws ...interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, len(ws))
	for _, w := range ws {
		go func() { done <- w.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		for range ws {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("writer: %v", err)
			}
		}
	})
}

// produce publishes fetched pages keyed by their host.
func (r *parserRun) produce(ctx context.Context, pages ...*crawlv1.FetchedPage) {
	r.t.Helper()
	var msgs []kafka.Message
	for _, p := range pages {
		key, err := kafkaio.Key(p.Url)
		if err != nil {
			r.t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(r.kc.Topics().Fetched, key, p)
		if err != nil {
			r.t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := r.w.Write(ctx, msgs...); err != nil {
		r.t.Fatal(err)
	}
}

// lag is the parser group's uncommitted records.
func (r *parserRun) lag(ctx context.Context) int64 {
	r.t.Helper()
	lag, err := kafkaio.Lag(ctx, r.kc, r.kc.GroupFor("parser"), r.kc.Topics().Fetched)
	if err != nil {
		r.t.Fatal(err)
	}
	return lag
}

// htmlPage is a 200 text/html fetched page of crawl c.
func htmlPage(u string, depth uint32, body string, at time.Time) *crawlv1.FetchedPage {
	return &crawlv1.FetchedPage{CrawlId: "c", Url: u, Depth: depth, FetchedAt: timestamppb.New(at),
		StatusCode: 200, ContentType: "text/html", Body: []byte(body)}
}

// startDocumentParser runs a processor with cfg whose documents, their
// metadata and their content fingerprints go into a real ClickHouse
// through batch writers that flush every 20 ms, as the service's do.
func startDocumentParser(t *testing.T, cfg pages.Config, now time.Time) (*parserRun, *chstore.Store) {
	t.Helper()
	return startDocumentParserSpecs(t, cfg, nil, now)
}

// startDocumentParserSpecs is startDocumentParser with the crawls'
// specifications.
func startDocumentParserSpecs(t *testing.T, cfg pages.Config, specs pages.SpecSource, now time.Time) (*parserRun, *chstore.Store) {
	t.Helper()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, fast, log, nil)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, fast, log, nil)
	runWriters(t, docs, meta, seen)
	r := startParserSpecs(t, cfg, pages.Sinks{Documents: docs, Meta: meta, ContentSeen: seen, Seen: store}, specs, now)
	return r, store
}

// storedByURL waits until query, whose first column is a URL and whose
// others are Strings, returns n rows, and returns each URL's other
// columns.
func storedByURL(t *testing.T, ctx context.Context, store *chstore.Store, query string, n int) map[string][]string {
	t.Helper()
	got := make(map[string][]string)
	waitFor(t, ctx, "stored rows", func() bool {
		rows, err := store.Conn().Query(ctx, query)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		defer rows.Close()
		clear(got)
		cols := len(rows.Columns())
		for rows.Next() {
			vals := make([]string, cols)
			dst := make([]any, cols)
			for i := range vals {
				dst[i] = &vals[i]
			}
			if err := rows.Scan(dst...); err != nil {
				t.Fatalf("scan: %v", err)
			}
			got[vals[0]] = vals[1:]
		}
		return len(got) == n
	})
	return got
}
