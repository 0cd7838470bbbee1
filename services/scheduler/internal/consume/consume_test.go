package consume

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/schedtest"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/sinks"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

const partitions = 4

// env is one test's broker, database and shared writers.
type env struct {
	t        *testing.T
	kafka    kafkaio.Config
	store    *chstore.Store
	producer *kafkaio.Writer
	// maxInFlight, when set, is the group's in-flight window (startWith).
	maxInFlight int
	seenW       *chstore.BatchWriter[chstore.SeenRow]
	eventsW     *chstore.BatchWriter[chstore.URLEventRow]
	frontW      *chstore.BatchWriter[chstore.FrontierRow]
	log         *zap.Logger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvFlush(t, 10*time.Millisecond)
}

// newEnvFlush is newEnv whose ClickHouse writers insert every flush.
func newEnvFlush(t *testing.T, flush time.Duration) *env {
	t.Helper()
	e := &env{t: t, kafka: kafkatest.Config(t, partitions), store: chtest.NewStore(t)}
	e.log = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	e.producer = kafkaio.NewWriter(e.kafka, e.log, prometheus.NewRegistry())
	t.Cleanup(func() { _ = e.producer.Close() })
	e.seenW = chstore.NewBatchWriter(e.store, chstore.URLSeen, chstore.BatchOptions{FlushInterval: flush}, e.log, prometheus.NewRegistry())
	e.eventsW = chstore.NewBatchWriter(e.store, chstore.URLEvents, chstore.BatchOptions{FlushInterval: flush}, e.log, prometheus.NewRegistry())
	e.frontW = chstore.NewBatchWriter(e.store, chstore.Frontier, chstore.BatchOptions{FlushInterval: flush}, e.log, prometheus.NewRegistry())
	// Cancelled by the cleanup, after the instances' (registered later,
	// run first): not by the test's end, which would stop them together.
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 3)
	go func() { done <- e.seenW.Run(ctx) }()
	go func() { done <- e.eventsW.Run(ctx) }()
	go func() { done <- e.frontW.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				t.Errorf("writer: %v", err)
			}
		}
	})
	return e
}

// instance is one running scheduler (a process, for the test).
type instance struct {
	s    *Scheduler
	stop func()
}

// start runs a scheduler instance in the group until stop or cleanup.
func (e *env) start(maxDepth uint32, maxPages int64) *instance {
	e.t.Helper()
	return e.startWith(Config{Depth: admit.FixedDepth(maxDepth)}, maxPages)
}

// startWith is start with more of the Config (topics and partitions are
// the env's).
func (e *env) startWith(cfg Config, maxPages int64) *instance {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Topics, cfg.Partitions = e.kafka.Topics(), e.kafka.Partitions
	s, err := New(cfg,
		e.producer, e.seenW, e.eventsW, sinks.Frontier{W: e.frontW, Store: e.store}, e.store, budget.NewTracker(budget.Fixed(maxPages)), time.Now, e.log, reg)
	if err != nil {
		e.t.Fatalf("New: %v", err)
	}
	g, err := kafkaio.NewGroup(e.kafka, kafkaio.GroupConfig{
		GroupID:        e.kafka.GroupFor("scheduler"),
		Topic:          e.kafka.Topics().Discovered,
		CommitInterval: 50 * time.Millisecond,
		MaxInFlight:    e.maxInFlight,
	}, s.Assign, e.log, reg)
	if err != nil {
		e.t.Fatalf("NewGroup: %v", err)
	}
	// Ended by stop (at the latest in a cleanup, before the writers'), not
	// by the test's end.
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.t.Context()))
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("group run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return &instance{s: s, stop: stop}
}

// rec is a DiscoveredURL to publish, with its record key (nil: the URL's key).
type rec struct {
	key []byte
	u   *crawlv1.DiscoveredURL
}

func disc(crawl, url string, depth uint32) rec {
	return rec{u: &crawlv1.DiscoveredURL{CrawlId: crawl, Url: url, Depth: depth, ParentUrl: "http://parent.example/", AnchorText: "anchor"}}
}

func (e *env) publish(recs ...rec) {
	e.t.Helper()
	msgs := make([]kafka.Message, 0, len(recs))
	for _, r := range recs {
		key := r.key
		if key == nil {
			k, err := kafkaio.Key(r.u.Url)
			if err != nil {
				k = []byte("unkeyable")
			}
			key = k
		}
		m, err := kafkaio.NewMessage(e.kafka.Topics().Discovered, key, r.u)
		if err != nil {
			e.t.Fatalf("NewMessage: %v", err)
		}
		msgs = append(msgs, m)
	}
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	if err := e.producer.Write(ctx, msgs...); err != nil {
		e.t.Fatalf("publish: %v", err)
	}
}

// drain waits until the scheduler group committed every Discovered record
// (so everything they caused is produced and persisted).
func (e *env) drain() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), 30*time.Second)
	defer cancel()
	for {
		lag, err := kafkaio.Lag(ctx, e.kafka, e.kafka.GroupFor("scheduler"), e.kafka.Topics().Discovered)
		if err == nil && lag == 0 {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("discovered topic not drained: lag %d, err %v", lag, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fetched is one record read back from the Fetch topic.
type fetched struct {
	partition int
	key       string
	req       *crawlv1.FetchRequest
}

// fetches reads every record of the Fetch topic.
func (e *env) fetches() []fetched {
	e.t.Helper()
	var out []fetched
	for _, f := range schedtest.Fetches(e.t, e.kafka) {
		out = append(out, fetched{partition: f.Partition, key: f.Key, req: f.Req})
	}
	return out
}

type seenRow struct {
	crawl     string
	partition int
	fp        uint64
	url       string
	depth     int
}

func (e *env) seenRows() []seenRow {
	e.t.Helper()
	rows, err := e.store.Conn().Query(e.t.Context(),
		"SELECT crawl_id, partition, fp, url, depth FROM url_seen FINAL ORDER BY crawl_id, url")
	if err != nil {
		e.t.Fatalf("query url_seen: %v", err)
	}
	defer rows.Close()
	var out []seenRow
	for rows.Next() {
		var (
			r     seenRow
			p, d  uint16
			crawl string
		)
		if err := rows.Scan(&crawl, &p, &r.fp, &r.url, &d); err != nil {
			e.t.Fatalf("scan url_seen: %v", err)
		}
		r.crawl, r.partition, r.depth = crawl, int(p), int(d)
		out = append(out, r)
	}
	return out
}

// partitionOf is the pipeline's partition of a canonical URL.
func partitionOf(t *testing.T, url string) (string, int) {
	t.Helper()
	return schedtest.PartitionOf(t, url, partitions)
}

// checkFetches asserts that the Fetch topic holds exactly one request per
// wanted (crawl, canonical url), each on its host's partition and keyed by
// its host, and that url_seen holds the same set.
func checkFetches(t *testing.T, e *env, want map[[2]string]uint32) {
	t.Helper()
	got := make(map[[2]string]int)
	for _, f := range e.fetches() {
		id := [2]string{f.req.CrawlId, f.req.Url}
		got[id]++
		depth, ok := want[id]
		if !ok {
			t.Errorf("unexpected fetch request %v", f.req)
			continue
		}
		key, p := partitionOf(t, f.req.Url)
		if f.partition != p || f.key != key {
			t.Errorf("%s on partition %d key %q, want partition %d key %q", f.req.Url, f.partition, f.key, p, key)
		}
		if f.req.UrlFp != fingerprint.URL(f.req.CrawlId, f.req.Url) || f.req.Depth != depth {
			t.Errorf("%s: fp %x depth %d, want fp %x depth %d", f.req.Url, f.req.UrlFp, f.req.Depth,
				fingerprint.URL(f.req.CrawlId, f.req.Url), depth)
		}
		if f.req.ScheduledAt == nil || f.req.ParentUrl != "http://parent.example/" || f.req.AnchorText != "anchor" {
			t.Errorf("%s: metadata not carried: %v", f.req.Url, f.req)
		}
	}
	for id := range want {
		if got[id] != 1 {
			t.Errorf("%v fetched %d times, want once", id, got[id])
		}
	}
	seen := e.seenRows()
	if len(seen) != len(want) {
		t.Errorf("url_seen has %d rows, want %d: %v", len(seen), len(want), seen)
	}
	for _, r := range seen {
		_, p := partitionOf(t, r.url)
		depth, ok := want[[2]string{r.crawl, r.url}]
		if !ok || r.partition != p || r.fp != fingerprint.URL(r.crawl, r.url) || r.depth != int(depth) {
			t.Errorf("url_seen row %+v does not match a fetch request on partition %d", r, p)
		}
	}
}

// hostOnOtherPartition returns a key that hashes to a partition other than
// url's, to simulate a producer that keyed a record wrongly.
func hostOnOtherPartition(t *testing.T, url string) []byte {
	t.Helper()
	_, p := partitionOf(t, url)
	for i := range 100 {
		k := []byte(fmt.Sprintf("wrong%d.example", i))
		if kafkaio.PartitionFor(k, partitions) != p {
			return k
		}
	}
	t.Fatal("no key on another partition")
	return nil
}

func dropped(s *Scheduler, r admit.Reason) int {
	return int(testutil.ToFloat64(s.metrics.dropped.WithLabelValues(string(r))))
}

func TestSchedulesEachCanonicalURLOnce(t *testing.T) {
	e := newEnv(t)
	inst := e.start(16, 0)
	var recs []rec
	want := make(map[[2]string]uint32)
	// The same URL written five ways: one fetch.
	for _, u := range []string{"http://a.example/x", "HTTP://A.EXAMPLE/x", "http://a.example:80/x#frag", "http://a.example/./x#other", "http://a.example/y/../x"} {
		recs = append(recs, disc("c1", u, 1))
	}
	want[[2]string{"c1", "http://a.example/x"}] = 1
	// Many hosts, so that every partition is used; https is another URL.
	for i := range 12 {
		u := fmt.Sprintf("http://h%d.example/page", i)
		recs = append(recs, disc("c1", u, 2), disc("c1", u, 3))
		want[[2]string{"c1", u}] = 2
	}
	recs = append(recs, disc("c1", "https://h1.example/page", 0))
	want[[2]string{"c1", "https://h1.example/page"}] = 0
	// At the depth limit and beyond it.
	recs = append(recs, disc("c1", "http://deep.example/16", 16), disc("c1", "http://deep.example/17", 17))
	want[[2]string{"c1", "http://deep.example/16"}] = 16
	// Invalid.
	recs = append(recs, disc("c1", "not a url", 0), disc("c1", "mailto:someone@example.com", 0), disc("", "http://nocrawl.example/", 0))
	// Keyed for the wrong partition: re-keyed, then admitted once by its owner.
	wrong := disc("c1", "http://rekeyed.example/p", 1)
	wrong.key = hostOnOtherPartition(t, "http://rekeyed.example/p")
	recs = append(recs, wrong)
	want[[2]string{"c1", "http://rekeyed.example/p"}] = 1
	// A record that is not a DiscoveredURL at all.
	e.publish(recs...)
	if err := e.producer.Write(t.Context(), kafka.Message{Topic: e.kafka.Topics().Discovered, Key: []byte("x"), Value: []byte{0xff, 0xff}}); err != nil {
		t.Fatalf("publish garbage: %v", err)
	}
	e.drain()
	checkFetches(t, e, want)

	s := inst.s
	for _, tt := range []struct {
		reason admit.Reason
		want   int
	}{
		{admit.Duplicate, 4 + 12},
		{admit.TooDeep, 1},
		{admit.InvalidURL, 1},
		{admit.UnsupportedScheme, 1},
		{admit.InvalidCrawl, 1},
		{admit.WrongPartition, 1},
		{Malformed, 1},
	} {
		if got := dropped(s, tt.reason); got != tt.want {
			t.Errorf("dropped{%s} = %d, want %d", tt.reason, got, tt.want)
		}
	}
	if got := int(testutil.ToFloat64(s.metrics.admitted)); got != len(want) {
		t.Errorf("admitted = %d, want %d", got, len(want))
	}
	if got := int(testutil.ToFloat64(s.metrics.received)); got != len(recs)+2 { // + garbage + re-keyed copy
		t.Errorf("received = %d, want %d", got, len(recs)+2)
	}
	if got := int(testutil.ToFloat64(s.metrics.seenSize)); got != len(want) {
		t.Errorf("seen_set_size = %d, want %d", got, len(want))
	}

	// Every URL not admitted has its terminal state in url_events (a
	// duplicate URL once, however often it was rediscovered).
	events := map[string]uint64{}
	rows, err := e.store.Conn().Query(t.Context(),
		"SELECT concat(state, '/', reason), count() FROM url_events FINAL GROUP BY state, reason")
	if err != nil {
		t.Fatalf("query url_events: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k string
			n uint64
		)
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatalf("scan url_events: %v", err)
		}
		events[k] = n
	}
	wantEvents := map[string]uint64{
		"duplicate/duplicate":        1 + 12,
		"out_of_scope/too_deep":      1,
		"invalid/invalid_url":        1,
		"invalid/unsupported_scheme": 1,
		"invalid/invalid_crawl":      1,
	}
	if fmt.Sprint(events) != fmt.Sprint(wantEvents) {
		t.Errorf("url_events = %v, want %v", events, wantEvents)
	}
	// ... and inserted once: the rediscoveries of a URL add no rows.
	var raw uint64
	if err := e.store.Conn().QueryRow(t.Context(), "SELECT count() FROM url_events WHERE state = 'duplicate'").Scan(&raw); err != nil {
		t.Fatalf("count url_events: %v", err)
	}
	if raw != wantEvents["duplicate/duplicate"] {
		t.Errorf("%d duplicate rows inserted, want one per URL: %d", raw, wantEvents["duplicate/duplicate"])
	}
}

// TestRepeatsDoNotWaitForTheFlush: a record that caused no row (a repeat
// of a duplicate already recorded) is acked without waiting for the
// batch's insert, so repeats do not fill the in-flight window: with a
// window of 8 records and inserts every 5 s, 60 repeats of one URL are all
// decided before the first insert.
func TestRepeatsDoNotWaitForTheFlush(t *testing.T) {
	e := newEnvFlush(t, 5*time.Second)
	e.maxInFlight = 8
	inst := e.start(16, 0)
	recs := []rec{disc("c1", "http://a.example/x", 1)}
	for i := range 60 {
		recs = append(recs, disc("c1", fmt.Sprintf("http://a.example/x#%d", i), 1))
	}
	e.publish(recs...)
	waitFor(t, "60 repeats decided", func() bool { return dropped(inst.s, admit.Duplicate) == 60 })
	if rows := e.seenRows(); len(rows) != 0 {
		t.Fatalf("%d url_seen rows already inserted: the 5s flush came before the repeats were decided, the test proves nothing", len(rows))
	}
	e.drain()
	checkFetches(t, e, map[[2]string]uint32{{"c1", "http://a.example/x"}: 1})
}

func TestRestartReloadsSeenSet(t *testing.T) {
	e := newEnv(t)
	var recs []rec
	want := make(map[[2]string]uint32)
	for i := range 10 {
		u := fmt.Sprintf("http://r%d.example/", i)
		recs = append(recs, disc("c1", u, 1))
		want[[2]string{"c1", u}] = 1
	}
	first := e.start(16, 0)
	e.publish(recs...)
	e.drain()
	first.stop()
	if got := testutil.ToFloat64(first.s.metrics.seenSize); got != 0 {
		t.Errorf("seen_set_size after stop = %v, want 0 (sets dropped on revoke)", got)
	}
	checkFetches(t, e, want)

	// A new process: nothing in memory, the same URLs again plus a new one.
	e.publish(append(recs, disc("c1", "http://r0.example/new", 1))...)
	want[[2]string{"c1", "http://r0.example/new"}] = 1
	second := e.start(16, 0)
	e.drain()
	checkFetches(t, e, want)
	if got := dropped(second.s, admit.Duplicate); got != len(recs) {
		t.Errorf("second instance dropped %d duplicates, want %d", got, len(recs))
	}
	if got := testutil.CollectAndCount(second.s.metrics.seenLoad); got != 1 {
		t.Errorf("seen_load_seconds collected %d series, want 1", got)
	}
	if got := int(testutil.ToFloat64(second.s.metrics.seenSize)); got != len(want) {
		t.Errorf("seen_set_size = %d, want %d", got, len(want))
	}
}

func TestCrawlsDeduplicateSeparately(t *testing.T) {
	e := newEnv(t)
	e.start(16, 0)
	e.publish(disc("crawl-a", "http://same.example/p", 0), disc("crawl-b", "http://same.example/p", 0),
		disc("crawl-a", "http://same.example/p#dup", 1))
	e.drain()
	checkFetches(t, e, map[[2]string]uint32{
		{"crawl-a", "http://same.example/p"}: 0,
		{"crawl-b", "http://same.example/p"}: 0,
	})
}

func TestMaxPagesBudget(t *testing.T) {
	e := newEnv(t)
	const maxPages = 5
	inst := e.start(16, maxPages)
	var recs []rec
	for i := range 12 {
		recs = append(recs, disc("big", fmt.Sprintf("http://b%d.example/", i), 1))
	}
	for i := range 3 {
		recs = append(recs, disc("small", fmt.Sprintf("http://s%d.example/", i), 1))
	}
	e.publish(recs...)
	e.drain()
	count := func() map[string]int {
		n := make(map[string]int)
		for _, f := range e.fetches() {
			n[f.req.CrawlId]++
		}
		return n
	}
	if n := count(); n["big"] != maxPages || n["small"] != 3 {
		t.Fatalf("fetch requests per crawl = %v, want big:%d small:3", n, maxPages)
	}
	if got := dropped(inst.s, admit.BudgetExhausted); got != 12-maxPages {
		t.Errorf("dropped{budget_exhausted} = %d, want %d", got, 12-maxPages)
	}

	// After a restart the budget is rebuilt from url_seen.
	inst.stop()
	e.publish(disc("big", "http://b-after-restart.example/", 1), disc("small", "http://s-after-restart.example/", 1))
	e.start(16, maxPages)
	e.drain()
	if n := count(); n["big"] != maxPages || n["small"] != 4 {
		t.Fatalf("after restart fetch requests per crawl = %v, want big:%d small:4", n, maxPages)
	}

	counts, err := sinks.CountSeen(e.store)(t.Context(), []string{"big", "small", "none"})
	if err != nil {
		t.Fatalf("CountSeen: %v", err)
	}
	if counts["big"] != maxPages || counts["small"] != 4 || counts["none"] != 0 {
		t.Fatalf("CountSeen = %v, want big:%d small:4", counts, maxPages)
	}
}

func TestConfigValidate(t *testing.T) {
	topics := kafkaio.Topics{Discovered: "d", Fetch: "f", Control: "c"}
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "valid", cfg: Config{Topics: topics, Partitions: 4, Depth: admit.FixedDepth(16)}},
		{name: "no topics", cfg: Config{Partitions: 4}, wantErr: true},
		{name: "no control topic", cfg: Config{Topics: kafkaio.Topics{Discovered: "d", Fetch: "f"}, Partitions: 4}, wantErr: true},
		{name: "no partitions", cfg: Config{Topics: topics}, wantErr: true},
		{name: "negative retry", cfg: Config{Topics: topics, Partitions: 1, LoadRetry: -time.Second}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
}

// TestHostQuotaDefersAndReleases: a host over its quota gets at most the
// quota of fetch requests at once; the rest waits in the frontier table and
// the pump releases it, shallowest first, each URL exactly once, while the
// other host of the crawl is not held back.
func TestHostQuotaDefersAndReleases(t *testing.T) {
	e := newEnv(t)
	inst := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 2, QuotaWindow: 200 * time.Millisecond}, 0)
	var recs []rec
	want := make(map[[2]string]uint32)
	for i := range 10 {
		depth := uint32(3)
		if i >= 5 {
			depth = 1 // discovered later, but shallower: released first
		}
		u := fmt.Sprintf("http://big.example/p%d", i)
		recs = append(recs, disc("c1", u, depth))
		want[[2]string{"c1", u}] = depth
	}
	for i := range 2 {
		u := fmt.Sprintf("http://small.example/p%d", i)
		recs = append(recs, disc("c1", u, 2))
		want[[2]string{"c1", u}] = 2
	}
	e.publish(recs...)
	e.drain()
	waitFor(t, "8 deferred URLs released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) >= 8 })
	// a wrong second release would show
	holdsFor(t, 500*time.Millisecond, "8 deferred URLs released", func() bool { return testutil.ToFloat64(inst.s.metrics.released) <= 8 })
	checkFetches(t, e, want)
	if got := testutil.ToFloat64(inst.s.metrics.deferred); got != 8 {
		t.Errorf("deferred = %v, want 8", got)
	}
	var depths []uint32
	for _, f := range e.fetches() {
		if strings.HasPrefix(f.req.Url, "http://big.example/") {
			depths = append(depths, f.req.Depth)
		}
	}
	// Two admitted at once (the first two read, depth 3), then the
	// frontier shallowest first.
	if fmt.Sprint(depths) != "[3 3 1 1 1 1 1 3 3 3]" {
		t.Errorf("big.example fetch requests by depth in topic order = %v, want [3 3 1 1 1 1 1 3 3 3]", depths)
	}
}

// TestFrontierSurvivesRestart: URLs deferred by one instance are released
// by the next owner of the partition, each exactly once; a URL of the
// crawl's previous crawl keeps its validators and document crawl through
// the frontier table.
func TestFrontierSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	first := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 2, QuotaWindow: time.Hour}, 0)
	var recs []rec
	want := make(map[[2]string]uint32)
	for i := range 6 {
		u := fmt.Sprintf("http://flood.example/p%d", i)
		r := disc("c1", u, 1)
		r.u.Source, r.u.Etag, r.u.LastModified, r.u.DocumentCrawlId = crawlv1.Source_SOURCE_PREVIOUS_CRAWL, fmt.Sprintf(`"e%d"`, i), "Thu, 01 Jan 2026 00:00:00 GMT", "c0"
		recs = append(recs, r)
		want[[2]string{"c1", u}] = 1
	}
	e.publish(recs...)
	e.drain()
	first.stop()
	if got := testutil.ToFloat64(first.s.metrics.deferred); got != 4 {
		t.Fatalf("first instance deferred %v URLs, want 4", got)
	}
	if got := len(e.fetches()); got != 2 {
		t.Fatalf("%d fetch requests before the restart, want 2 (the quota)", got)
	}
	second := e.startWith(Config{Depth: admit.FixedDepth(16), HostQuota: 2, QuotaWindow: 100 * time.Millisecond}, 0)
	waitFor(t, "4 deferred URLs released by the second instance", func() bool { return testutil.ToFloat64(second.s.metrics.released) >= 4 })
	// a wrong second release would show
	holdsFor(t, 400*time.Millisecond, "4 deferred URLs released by the second instance", func() bool { return testutil.ToFloat64(second.s.metrics.released) <= 4 })
	checkFetches(t, e, want)
	for _, f := range e.fetches() {
		i := strings.TrimPrefix(f.req.Url, "http://flood.example/p")
		if f.req.Etag != `"e`+i+`"` || f.req.LastModified != "Thu, 01 Jan 2026 00:00:00 GMT" || f.req.DocumentCrawlId != "c0" {
			t.Errorf("%s released with validators %q %q and document crawl %q, want \"e%s\", the date and c0",
				f.req.Url, f.req.Etag, f.req.LastModified, f.req.DocumentCrawlId, i)
		}
	}
}

// TestFailedPersistLeavesBatchUnacked: the fetch requests of a batch go out
// before its fingerprints are inserted; when the insert fails the batch is
// never acked (nothing committed, redelivered to the next owner) and the
// partition's next batch fails the group run.
func TestFailedPersistLeavesBatchUnacked(t *testing.T) {
	e := newEnv(t)
	broken := chstore.NewBatchWriter(e.store, chstore.URLSeen, chstore.BatchOptions{}, e.log, nil)
	stopped, stopBroken := context.WithCancel(t.Context())
	stopBroken()
	if err := broken.Run(stopped); err != nil { // stopped: every Write fails
		t.Fatal(err)
	}
	cfg := Config{Depth: admit.FixedDepth(5), Topics: e.kafka.Topics(), Partitions: e.kafka.Partitions}
	s, err := New(cfg, e.producer, broken, e.eventsW, sinks.Frontier{W: e.frontW, Store: e.store}, e.store,
		budget.NewTracker(budget.Fixed(0)), time.Now, e.log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g, err := kafkaio.NewGroup(e.kafka, kafkaio.GroupConfig{
		GroupID: e.kafka.GroupFor("scheduler"), Topic: e.kafka.Topics().Discovered, CommitInterval: 20 * time.Millisecond,
	}, s.Assign, e.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()

	e.publish(disc("c", "http://127.0.0.2/a", 1))
	// The request is out although its fingerprint is not persisted.
	for len(e.fetches()) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("no fetch request produced")
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.publish(disc("c", "http://127.0.0.2/b", 1))
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "persist seen urls") {
			t.Fatalf("group run = %v, want the persist failure", err)
		}
	case <-ctx.Done():
		t.Fatal("group run did not fail")
	}
	lag, err := kafkaio.Lag(ctx, e.kafka, e.kafka.GroupFor("scheduler"), e.kafka.Topics().Discovered)
	if err != nil || lag != 2 {
		t.Errorf("lag after the failure = %d (%v), want 2: nothing committed", lag, err)
	}
}

// TestRevokeDoesNotCutProduceShort: a batch handled as its partition is
// revoked (its context already ended) still produces its fetch requests
// and records their fingerprints, then acks its records. A produce cut
// short by the revoke may have sent its requests anyway (kafka-go sends a
// batch whose write returned the context's error), and a batch that then
// kept no seen row and no ack was redelivered and requested the same URLs
// again: a crawl interrupted and resumed fetched pages twice.
func TestRevokeDoesNotCutProduceShort(t *testing.T) {
	e := newEnv(t)
	cfg := Config{Depth: admit.FixedDepth(5), Topics: e.kafka.Topics(), Partitions: e.kafka.Partitions}
	s, err := New(cfg, e.producer, e.seenW, e.eventsW, sinks.Frontier{W: e.frontW, Store: e.store}, e.store,
		budget.NewTracker(budget.Fixed(0)), time.Now, e.log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	const url = "http://127.0.0.2/revoked"
	_, p := partitionOf(t, url)
	h, err := s.Assign(t.Context(), e.kafka.Topics().Discovered, p)
	if err != nil {
		t.Fatal(err)
	}
	key, err := kafkaio.Key(url)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := kafkaio.NewMessage(e.kafka.Topics().Discovered, key, disc("c", url, 1).u)
	if err != nil {
		t.Fatal(err)
	}
	msg.Partition, msg.Offset = p, 7
	revoked, revoke := context.WithCancel(t.Context())
	revoke()
	acked := make(chan int64, 1)
	if err := h.Handle(revoked, []kafka.Message{msg}, func(m kafka.Message) { acked <- m.Offset }); err != nil {
		t.Fatalf("Handle after the revoke = %v, want its batch produced", err)
	}
	closing, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := h.Close(closing); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case off := <-acked:
		if off != 7 {
			t.Errorf("acked offset %d, want 7", off)
		}
	default:
		t.Error("the record was not acked once its rows were in")
	}
	checkFetches(t, e, map[[2]string]uint32{{"c", url}: 1})
}

// countingFrontier is the ClickHouse frontier, counting its reads.
type countingFrontier struct {
	sinks.Frontier
	reads atomic.Int32
}

func (f *countingFrontier) Pending(ctx context.Context, partition, perHost int, skip []string) ([]chstore.FrontierRow, error) {
	f.reads.Add(1)
	return f.Frontier.Pending(ctx, partition, perHost, skip)
}

// TestIdlePumpsDoNotQuery: without a quota and with nothing deferred, each
// partition's pump reads the frontier once (what a previous owner left)
// and not every window; a URL deferred for a paused crawl wakes its pump,
// and the crawl's resume releases it.
func TestIdlePumpsDoNotQuery(t *testing.T) {
	e := newEnv(t)
	specs := crawlcontrol.NewSpecs()
	setState(t, specs, "p", 1, crawlv1.CrawlState_CRAWL_STATE_PAUSED)
	fr := &countingFrontier{Frontier: sinks.Frontier{W: e.frontW, Store: e.store}}
	cfg := specsConfig(specs)
	cfg.QuotaWindow = 50 * time.Millisecond
	cfg.Topics, cfg.Partitions = e.kafka.Topics(), e.kafka.Partitions
	s, err := New(cfg, e.producer, e.seenW, e.eventsW, fr, e.store, budget.NewTracker(budget.Fixed(0)), time.Now, e.log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	g, err := kafkaio.NewGroup(e.kafka, kafkaio.GroupConfig{
		GroupID: e.kafka.GroupFor("scheduler"), Topic: e.kafka.Topics().Discovered, CommitInterval: 50 * time.Millisecond,
	}, s.Assign, e.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("group run: %v", err)
		}
	}()
	e.publish(disc("run", "http://a.example/x", 1))
	e.drain()
	waitFor(t, "every pump's first read", func() bool { return fr.reads.Load() >= partitions })
	// twenty windows
	holdsFor(t, time.Second, fmt.Sprintf("%d frontier reads over twenty windows of %d idle pumps", partitions, partitions), func() bool {
		return fr.reads.Load() == partitions
	})
	before := fr.reads.Load()
	e.publish(disc("p", "http://b.example/held", 1))
	e.drain()
	waitFor(t, "the deferring partition's pump woken", func() bool { return fr.reads.Load() > before })
	setState(t, specs, "p", 2, crawlv1.CrawlState_CRAWL_STATE_RUNNING)
	waitFor(t, "the held url released", func() bool { return testutil.ToFloat64(s.metrics.released) == 1 })
}
