package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/revisit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/schedtest"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestMain runs the tests against a real ClickHouse (chtest) and fails
// the package when a test leaves a group, a pump or a writer running.
func TestMain(m *testing.M) {
	code := chtest.Main(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

const partitions = 4

// env is one test's broker, database and producer.
type env struct {
	t        *testing.T
	kafka    kafkaio.Config
	store    *chstore.Store
	producer *kafkaio.Writer
	log      *zap.Logger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, kafka: kafkatest.Config(t, partitions), store: chtest.NewStore(t)}
	e.log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	e.producer = kafkaio.NewWriter(e.kafka, e.log, prometheus.NewRegistry())
	t.Cleanup(func() { _ = e.producer.Close() })
	return e
}

func (e *env) fetches() []schedtest.Fetched { return schedtest.Fetches(e.t, e.kafka) }

func partitionOf(t *testing.T, url string) (string, int) {
	return schedtest.PartitionOf(t, url, partitions)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	schedtest.WaitFor(t, what, cond)
}

// startRevisiter runs a revisit consumer on the env's Fetched topic.
func (e *env) startRevisiter(policy func(string) (revisit.Policy, bool)) (*Revisiter, func()) {
	e.t.Helper()
	revW := chstore.NewBatchWriter(e.store, chstore.Revisits, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, e.log, prometheus.NewRegistry())
	chW := chstore.NewBatchWriter(e.store, chstore.ChangeHistory, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, e.log, prometheus.NewRegistry())
	reg := prometheus.NewRegistry()
	r, err := New(Config{Topics: e.kafka.Topics(), Partitions: e.kafka.Partitions, Policy: policy, Tick: 100 * time.Millisecond},
		e.producer, sinks.Revisits{Revisits: revW, Changes: chW, Store: e.store}, time.Now, e.log, reg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	g, err := kafkaio.NewGroup(e.kafka, kafkaio.GroupConfig{
		GroupID: e.kafka.GroupFor("scheduler-revisit"), Topic: e.kafka.Topics().Fetched, CommitInterval: 50 * time.Millisecond,
	}, r.Assign, e.log, reg)
	if err != nil {
		e.t.Fatalf("NewGroup: %v", err)
	}
	ctx, cancel := context.WithCancel(e.t.Context())
	wctx, wcancel := context.WithCancel(e.t.Context())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = revW.Run(wctx) }()
	go func() { defer wg.Done(); _ = chW.Run(wctx) }()
	go func() {
		defer wg.Done()
		defer wcancel()
		if err := g.Run(ctx); err != nil {
			e.t.Errorf("revisit group: %v", err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	e.t.Cleanup(stop)
	return r, stop
}

func (e *env) publishFetched(pages ...*crawlv1.FetchedPage) {
	e.t.Helper()
	var msgs []kafka.Message
	for _, p := range pages {
		k, err := kafkaio.Key(p.Url)
		if err != nil {
			e.t.Fatalf("key: %v", err)
		}
		m, err := kafkaio.NewMessage(e.kafka.Topics().Fetched, k, p)
		if err != nil {
			e.t.Fatalf("NewMessage: %v", err)
		}
		msgs = append(msgs, m)
	}
	if err := e.producer.Write(e.t.Context(), msgs...); err != nil {
		e.t.Fatalf("publish fetched: %v", err)
	}
}

// TestRevisitSchedule: fetch outcomes of a revisiting crawl are scheduled
// (revisits, change_history); due URLs come back as revisit fetch requests
// with the stored validators, on their host's partition; a crawl without a
// policy and a failed fetch are not scheduled; a restarted consumer
// reloads the schedule and keeps the interval history.
func TestRevisitSchedule(t *testing.T) {
	e := newEnv(t)
	pol := revisit.Policy{Min: time.Second, Max: 8 * time.Second, Initial: time.Second}
	policy := func(id string) (revisit.Policy, bool) { return pol, id == "rv" }
	r, stop := e.startRevisiter(policy)
	now := time.Now()
	page := func(crawl, url string, status uint32, body string) *crawlv1.FetchedPage {
		return &crawlv1.FetchedPage{CrawlId: crawl, Url: url, UrlFp: fingerprint.URL(crawl, url), Depth: 1, StatusCode: status,
			FetchedAt: timestamppb.New(now), Body: []byte(body),
			Headers: map[string]string{"etag": `"` + body + `"`, "last-modified": "Thu, 01 Jan 2026 00:00:00 GMT"}}
	}
	e.publishFetched(
		page("rv", "http://r1.example/a", 200, "a1"),
		page("rv", "http://r2.example/b", 200, "b1"),
		page("rv", "http://r1.example/gone", 404, ""),
		page("other", "http://r1.example/a", 200, "a1"),
	)
	waitFor(t, "two revisits produced", func() bool { return testutil.ToFloat64(r.m.scheduled) >= 2 })
	// The pump leases a state as soon as it is folded, before its batch
	// is inserted and acked: stop once it is committed, so that the
	// restarted consumer below starts from the committed state
	// (a redelivery would be skipped: TestRedeliveredOutcomeFoldedOnce).
	waitFor(t, "first outcomes committed", func() bool {
		offs, err := kafkaio.GroupOffsets(t.Context(), e.kafka, e.kafka.GroupFor("scheduler-revisit"), e.kafka.Topics().Fetched)
		if err != nil {
			return false
		}
		for _, o := range offs {
			if o.Lag() > 0 {
				return false
			}
		}
		return true
	})
	stop()
	got := make(map[string]*crawlv1.FetchRequest)
	for _, f := range e.fetches() {
		if !f.Req.Revisit {
			t.Errorf("fetch request %v not marked revisit", f.Req)
		}
		key, p := partitionOf(t, f.Req.Url)
		if f.Partition != p || f.Key != key {
			t.Errorf("%s on partition %d key %q, want %d %q", f.Req.Url, f.Partition, f.Key, p, key)
		}
		got[f.Req.CrawlId+" "+f.Req.Url] = f.Req
	}
	for _, u := range []string{"http://r1.example/a", "http://r2.example/b"} {
		req := got["rv "+u]
		if req == nil {
			t.Fatalf("no revisit of %s: %v", u, got)
		}
		if req.Etag == "" || req.LastModified != "Thu, 01 Jan 2026 00:00:00 GMT" || req.UrlFp != fingerprint.URL("rv", u) || req.Depth != 1 {
			t.Errorf("revisit %v lacks validators or identity", req)
		}
	}
	if len(got) != 2 {
		t.Errorf("revisits of %d URLs, want 2 (no 404, no crawl without policy): %v", len(got), got)
	}

	// A changed and an unchanged outcome, read by a restarted consumer.
	later := now.Add(2 * time.Second)
	changed := page("rv", "http://r1.example/a", 200, "a2")
	changed.FetchedAt = timestamppb.New(later)
	same := &crawlv1.FetchedPage{CrawlId: "rv", Url: "http://r2.example/b", UrlFp: fingerprint.URL("rv", "http://r2.example/b"), Depth: 1,
		StatusCode: 304, Unchanged: true, FetchedAt: timestamppb.New(later)}
	e.publishFetched(changed, same)
	_, stop2 := e.startRevisiter(policy)
	var n uint64
	waitFor(t, "second visits recorded", func() bool {
		err := e.store.Conn().QueryRow(t.Context(), "SELECT count() FROM change_history FINAL WHERE crawl_id = 'rv' AND visit = 2").Scan(&n)
		return err == nil && n == 2
	})
	stop2()
	rows, err := e.store.Conn().Query(t.Context(),
		"SELECT url, visits, changes, interval_s, etag FROM revisits FINAL WHERE crawl_id = 'rv' ORDER BY url")
	if err != nil {
		t.Fatalf("query revisits: %v", err)
	}
	defer rows.Close()
	want := map[string][2]uint32{ // visits, interval
		"http://r1.example/a": {2, 1}, // changed: 1s halved, floored at 1s
		"http://r2.example/b": {2, 2}, // 304: doubled
	}
	seen := 0
	for rows.Next() {
		var (
			url, etag                 string
			visits, changes, interval uint32
		)
		if err := rows.Scan(&url, &visits, &changes, &interval, &etag); err != nil {
			t.Fatalf("scan revisits: %v", err)
		}
		seen++
		if w := want[url]; visits != w[0] || interval != w[1] {
			t.Errorf("%s: visits %d interval %ds, want %d %ds", url, visits, interval, w[0], w[1])
		}
		if url == "http://r1.example/a" && (changes != 1 || etag != `"a2"`) {
			t.Errorf("%s: changes %d etag %s, want 1 \"a2\"", url, changes, etag)
		}
		if url == "http://r2.example/b" && (changes != 0 || etag != `"b1"`) {
			t.Errorf("%s: changes %d etag %s, want 0 and the stored \"b1\"", url, changes, etag)
		}
	}
	if seen != 2 {
		t.Errorf("revisits has %d URLs of crawl rv, want 2", seen)
	}
}

// TestWaitRevisiting: the revisit group waits until a followed crawl has a
// revisit policy; crawls without one, or with it disabled, do not start it.
func TestWaitRevisiting(t *testing.T) {
	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "plain", Revision: 1})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "off", Revision: 1, Revisit: &crawlv1.Revisit{Enabled: false}})
	short, cancelShort := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelShort()
	if err := WaitRevisiting(short, specs); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRevisiting with no revisiting crawl = %v, want the deadline", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- WaitRevisiting(ctx, specs) }()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "off", Revision: 2, Revisit: &crawlv1.Revisit{Enabled: true}})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitRevisiting = %v", err)
		}
	case <-ctx.Done():
		t.Fatal("not released by a revisiting crawl")
	}
	// Already revisiting: at once.
	if err := WaitRevisiting(ctx, specs); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(t.Context())
	stop()
	if err := WaitRevisiting(stopped, crawlcontrol.NewSpecs()); err == nil {
		t.Error("a cancelled wait returned nil")
	}
}

// gatedProducer is the real writer with a gate: each Write announces
// itself on started and waits for release before it produces, so that a
// test can act while the pump is between taking its leases and
// persisting them.
type gatedProducer struct {
	w       *kafkaio.Writer
	started chan struct{}
	release chan struct{}
}

func (p *gatedProducer) Write(ctx context.Context, msgs ...kafka.Message) error {
	select {
	case p.started <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-p.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.w.Write(ctx, msgs...)
}

// TestLeaseNeverOverwritesNewerOutcome: a fetch outcome folded while the
// pump is producing a lease of the URL's previous state stays the stored
// state. The clock stands still, so that the outcome and the lease fall in
// the same second of updated_at, the version of revisits: the stored order
// must not depend on which row is inserted last (the flake of
// TestRevisitSchedule, where the lease of visit 1 was inserted after the
// state of visit 2 and replaced it).
func TestLeaseNeverOverwritesNewerOutcome(t *testing.T) {
	e := newEnv(t)
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	pol := revisit.Policy{Min: time.Second, Max: time.Minute, Initial: time.Second}
	revW := chstore.NewBatchWriter(e.store, chstore.Revisits, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, e.log, prometheus.NewRegistry())
	chW := chstore.NewBatchWriter(e.store, chstore.ChangeHistory, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, e.log, prometheus.NewRegistry())
	wctx, wcancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = revW.Run(wctx) }()
	go func() { defer wg.Done(); _ = chW.Run(wctx) }()
	var once sync.Once
	stopWriters := func() { once.Do(func() { wcancel(); wg.Wait() }) }
	defer stopWriters()
	prod := &gatedProducer{w: e.producer, started: make(chan struct{}), release: make(chan struct{})}
	r, err := New(Config{Topics: e.kafka.Topics(), Partitions: e.kafka.Partitions, Tick: 10 * time.Millisecond,
		Policy: func(string) (revisit.Policy, bool) { return pol, true }},
		prod, sinks.Revisits{Revisits: revW, Changes: chW, Store: e.store}, now, e.log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	const url = "http://lease.example/a"
	key, partition := partitionOf(t, url)
	h, err := r.Assign(t.Context(), e.kafka.Topics().Fetched, partition)
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	closeHandler := func() { closeOnce.Do(func() { _ = h.Close(t.Context()) }) }
	defer closeHandler()
	outcome := func(body string, at time.Time) []kafka.Message {
		m, err := kafkaio.NewMessage(e.kafka.Topics().Fetched, []byte(key), &crawlv1.FetchedPage{
			CrawlId: "c", Url: url, UrlFp: fingerprint.URL("c", url), Depth: 1, StatusCode: 200,
			FetchedAt: timestamppb.New(at), Body: []byte(body), Headers: map[string]string{"etag": `"` + body + `"`},
		})
		if err != nil {
			t.Fatal(err)
		}
		return []kafka.Message{m}
	}
	noAck := func(kafka.Message) {}

	// Visit 1, fetched long enough ago to be due at once: the pump takes
	// its lease and produces it, held at the gate.
	if err := h.Handle(t.Context(), outcome("v1", clock.Add(-time.Minute)), noAck); err != nil {
		t.Fatal(err)
	}
	<-prod.started
	// Visit 2 is folded and stored while the lease of visit 1 is in flight.
	if err := h.Handle(t.Context(), outcome("v2", clock), noAck); err != nil {
		t.Fatal(err)
	}
	close(prod.release)
	waitFor(t, "the lease produced", func() bool { return testutil.ToFloat64(r.m.scheduled) >= 1 })
	// Closing the handler waits for the pump, which queues the lease (if
	// it keeps it) before it returns; stopping the writers inserts what
	// they queued.
	closeHandler()
	stopWriters()
	var (
		visits uint32
		etag   string
	)
	if err := e.store.Conn().QueryRow(t.Context(),
		"SELECT visits, etag FROM revisits FINAL WHERE url = ?", url).Scan(&visits, &etag); err != nil {
		t.Fatal(err)
	}
	if visits != 2 || etag != `"v2"` {
		t.Errorf("stored state: visit %d etag %s, want visit 2 etag \"v2\" (the lease of visit 1 replaced it)", visits, etag)
	}
}

// TestRedeliveredOutcomeFoldedOnce: an outcome read again (a batch
// redelivered after a crash or a rebalance, or a stale one) is not folded
// a second time, neither by the consumer that folded it nor by one that
// reloaded the schedule from ClickHouse; a newer fetch still is.
func TestRedeliveredOutcomeFoldedOnce(t *testing.T) {
	e := newEnv(t)
	pol := revisit.Policy{Min: time.Second, Max: time.Hour, Initial: time.Hour}
	policy := func(id string) (revisit.Policy, bool) { return pol, id == "rd" }
	const u = "http://rd.example/a"
	t0 := time.Now().Truncate(time.Second).Add(-time.Minute)
	page := func(at time.Time, body string) *crawlv1.FetchedPage {
		return &crawlv1.FetchedPage{CrawlId: "rd", Url: u, UrlFp: fingerprint.URL("rd", u), Depth: 1, StatusCode: 200,
			FetchedAt: timestamppb.New(at), Body: []byte(body)}
	}
	state := func() (visits, changes uint32, history uint64) {
		t.Helper()
		if err := e.store.Conn().QueryRow(t.Context(),
			"SELECT visits, changes FROM revisits FINAL WHERE crawl_id = 'rd'").Scan(&visits, &changes); err != nil {
			t.Fatalf("query revisits: %v", err)
		}
		if err := e.store.Conn().QueryRow(t.Context(),
			"SELECT count() FROM change_history FINAL WHERE crawl_id = 'rd'").Scan(&history); err != nil {
			t.Fatalf("query change_history: %v", err)
		}
		return visits, changes, history
	}

	r, stop := e.startRevisiter(policy)
	e.publishFetched(page(t0, "v1"))
	waitFor(t, "first visit folded", func() bool { return testutil.ToFloat64(r.m.observed) == 1 })
	// The same outcome again (its fetch time is the fetch's), and an older one.
	e.publishFetched(page(t0, "v1"), page(t0.Add(-time.Second), "v0"))
	waitFor(t, "repeats skipped", func() bool { return testutil.ToFloat64(r.m.refolded) == 2 })
	if n := testutil.ToFloat64(r.m.observed); n != 1 {
		t.Errorf("visits folded %v, want 1", n)
	}
	waitFor(t, "state stored", func() bool {
		var n uint64
		err := e.store.Conn().QueryRow(t.Context(), "SELECT count() FROM revisits WHERE crawl_id = 'rd'").Scan(&n)
		return err == nil && n >= 1
	})
	stop()

	// A restarted consumer reloads last_visit: the repeat is skipped
	// again, the next fetch (changed) is folded.
	r2, stop2 := e.startRevisiter(policy)
	e.publishFetched(page(t0, "v1"), page(t0.Add(2*time.Second), "v2"))
	waitFor(t, "second visit folded", func() bool {
		return testutil.ToFloat64(r2.m.observed) == 1 && testutil.ToFloat64(r2.m.refolded) == 1
	})
	waitFor(t, "second visit stored", func() bool {
		var n uint64
		err := e.store.Conn().QueryRow(t.Context(), "SELECT count() FROM change_history WHERE crawl_id = 'rd' AND visit = 2").Scan(&n)
		return err == nil && n == 1
	})
	stop2()
	if visits, changes, history := state(); visits != 2 || changes != 1 || history != 2 {
		t.Errorf("visits %d changes %d history rows %d, want 2, 1, 2 (each fetch folded once)", visits, changes, history)
	}
}
