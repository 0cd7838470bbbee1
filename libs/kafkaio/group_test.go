package kafkaio_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func nopLogger(t *testing.T) *zap.Logger { return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)) }

// recordID names a record by partition and offset.
type recordID struct {
	partition int
	offset    int64
}

// recorder is a test handler factory: it remembers every record handed out,
// and acks according to hold (records for which hold returns true are kept
// unacked in held).
type recorder struct {
	hold func(kafka.Message) bool

	mu      sync.Mutex
	seen    []recordID
	values  map[string]int
	held    []kafka.Message
	acks    map[int]func(kafka.Message)
	closed  int
	handled chan struct{} // signalled after each Handle
}

func newRecorder(hold func(kafka.Message) bool) *recorder {
	return &recorder{hold: hold, values: map[string]int{}, acks: map[int]func(kafka.Message){}, handled: make(chan struct{}, 1)}
}

func (r *recorder) assign(_ context.Context, _ string, partition int) (kafkaio.Handler, error) {
	return &recorderHandler{r: r, partition: partition}, nil
}

type recorderHandler struct {
	r         *recorder
	partition int
}

func (h *recorderHandler) Handle(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	r := h.r
	r.mu.Lock()
	r.acks[h.partition] = ack
	var toAck []kafka.Message
	for _, m := range batch {
		r.seen = append(r.seen, recordID{m.Partition, m.Offset})
		r.values[string(m.Value)]++
		if r.hold != nil && r.hold(m) {
			r.held = append(r.held, m)
		} else {
			toAck = append(toAck, m)
		}
	}
	r.mu.Unlock()
	for _, m := range toAck {
		ack(m)
	}
	select {
	case r.handled <- struct{}{}:
	default:
	}
	return nil
}

func (h *recorderHandler) Close(context.Context) error {
	h.r.mu.Lock()
	h.r.closed++
	h.r.mu.Unlock()
	return nil
}

// distinct returns how many distinct values were handled.
func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.values)
}

func (r *recorder) seenIDs() []recordID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// produce writes n records with values "<prefix>-<i>" and keys spread over
// hosts, and returns the values.
func produce(t *testing.T, c kafkaio.Config, topic, prefix string, n int) []string {
	t.Helper()
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", prefix, i)
		values = append(values, v)
		msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte(fmt.Sprintf("host%d.example", i%13)), Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return values
}

// runGroup starts g.Run and returns a stop func that cancels it and
// returns Run's error (failing the test if Run does not return in time).
func runGroup(t *testing.T, g *kafkaio.Group) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- g.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(20 * time.Second):
				t.Fatalf("group run did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// pollInterval is how often eventually, consistently and stableFor look
// at state kept by the broker, another process.
const pollInterval = 20 * time.Millisecond

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	stableFor(t, timeout, 0, what, cond)
}

// stableFor polls cond until it has held at every poll for window, or
// fails the test when timeout passes first.
func stableFor(t *testing.T, timeout, window time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var since time.Time // when cond started to hold; zero while it does not
	for {
		if !cond() {
			since = time.Time{}
		} else if since.IsZero() {
			since = time.Now()
		}
		if !since.IsZero() && time.Since(since) >= window {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// consistently polls cond for window and fails the test the first time it
// does not hold.
func consistently(t *testing.T, window time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.NewTimer(window)
	defer end.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		select {
		case <-end.C:
			return
		case <-tick.C:
		}
	}
}

func groupConfig(c kafkaio.Config, topic string) kafkaio.GroupConfig {
	return kafkaio.GroupConfig{
		GroupID:        c.GroupFor("test"),
		Topic:          topic,
		MaxBatch:       16,
		BatchWait:      10 * time.Millisecond,
		CommitInterval: 50 * time.Millisecond,
	}
}

func lagOf(t *testing.T, c kafkaio.Config, group, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lag, err := kafkaio.Lag(ctx, c, group, topic)
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	return lag
}

func committed(t *testing.T, c kafkaio.Config, group, topic string) map[int]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	parts, err := kafkaio.GroupOffsets(ctx, c, group, topic)
	if err != nil {
		t.Fatalf("group offsets: %v", err)
	}
	out := make(map[int]int64, len(parts))
	for _, p := range parts {
		out[p.Partition] = p.Committed
	}
	return out
}

func TestGroupConsumesAndCommitsEverything(t *testing.T) {
	c := kafkatest.Config(t, 4)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	const n = 500
	produce(t, c, topic, "a", n)
	if lag := lagOf(t, c, gc.GroupID, topic); lag != n {
		t.Fatalf("lag before consuming = %d, want %d", lag, n)
	}

	rec := newRecorder(nil)
	reg := prometheus.NewRegistry()
	g, err := kafkaio.NewGroup(c, gc, rec.assign, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records handled", func() bool { return rec.distinct() == n })
	if got := g.Assigned(); !slices.Equal(got, []int{0, 1, 2, 3}) {
		t.Errorf("Assigned() = %v, want all 4 partitions", got)
	}
	eventually(t, 10*time.Second, "lag 0", func() bool { return lagOf(t, c, gc.GroupID, topic) == 0 })
	// More records after the first commit are consumed too.
	produce(t, c, topic, "b", 50)
	eventually(t, 20*time.Second, "late records handled", func() bool { return rec.distinct() == n+50 })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if lag := lagOf(t, c, gc.GroupID, topic); lag != 0 {
		t.Errorf("lag after stop = %d, want 0", lag)
	}
	if got := g.Assigned(); len(got) != 0 {
		t.Errorf("Assigned() after stop = %v, want none", got)
	}
	if rec.closed != 4 {
		t.Errorf("handlers closed = %d, want 4", rec.closed)
	}
	if err := g.Run(t.Context()); !errors.Is(err, kafkaio.ErrClosed) {
		t.Errorf("second Run = %v, want ErrClosed", err)
	}
	if got := testutilValue(t, reg, "kafka_consumed_total", topic); got < n+50 {
		t.Errorf("kafka_consumed_total = %v, want >= %d", got, n+50)
	}
	if got := testutilValue(t, reg, "kafka_inflight", topic); got != 0 {
		t.Errorf("kafka_inflight = %v, want 0", got)
	}
}

// TestGroupCommitsLowestUnacked holds the ack of one record while acking
// later ones: the committed offset stops at the held record, and a new
// member of the group resumes exactly there.
func TestGroupCommitsLowestUnacked(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Fetch
	gc := groupConfig(c, topic)
	const n, heldOffset = 20, 7
	produce(t, c, topic, "r", n)

	rec := newRecorder(func(m kafka.Message) bool { return m.Offset == heldOffset })
	g, err := kafkaio.NewGroup(c, gc, rec.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records handled", func() bool { return rec.distinct() == n })
	eventually(t, 10*time.Second, "commit at the held record", func() bool {
		return committed(t, c, gc.GroupID, topic)[0] == heldOffset
	})
	// It must not move past the held record, even after more intervals.
	consistently(t, 5*gc.CommitInterval, "commit at the held record", func() bool {
		if got := committed(t, c, gc.GroupID, topic)[0]; got != heldOffset {
			t.Fatalf("committed = %d with offset %d unacked, want %d", got, heldOffset, heldOffset)
		}
		return true
	})
	if lag := lagOf(t, c, gc.GroupID, topic); lag != n-heldOffset {
		t.Errorf("lag = %d, want %d", lag, n-heldOffset)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}

	// A new member starts at the held record: it and everything after it
	// is redelivered, nothing before it.
	rec2 := newRecorder(nil)
	g2, err := kafkaio.NewGroup(c, gc, rec2.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop2 := runGroup(t, g2)
	eventually(t, 20*time.Second, "redelivery", func() bool { return rec2.distinct() == n-heldOffset })
	eventually(t, 10*time.Second, "lag 0", func() bool { return lagOf(t, c, gc.GroupID, topic) == 0 })
	if err := stop2(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	ids := rec2.seenIDs()
	if len(ids) != n-heldOffset || ids[0].offset != heldOffset || ids[len(ids)-1].offset != n-1 {
		t.Errorf("redelivered %v, want offsets %d..%d once", ids, heldOffset, n-1)
	}
}

// TestGroupOutOfOrderAcks acks a batch in reverse: the commit only moves
// once the lowest record is acked.
func TestGroupOutOfOrderAcks(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Fetched
	gc := groupConfig(c, topic)
	gc.MaxBatch = 100
	gc.BatchWait = 500 * time.Millisecond
	const n = 10
	produce(t, c, topic, "o", n)

	rec := newRecorder(func(kafka.Message) bool { return true }) // hold everything
	g, err := kafkaio.NewGroup(c, gc, rec.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records handled", func() bool { return rec.distinct() == n })

	rec.mu.Lock()
	held := slices.Clone(rec.held)
	ack := rec.acks[0]
	rec.mu.Unlock()
	slices.Reverse(held)
	// Ack n-1 .. 1: offset 0 is still unacked, nothing may be committed.
	for _, m := range held[:n-1] {
		ack(m)
	}
	consistently(t, 5*gc.CommitInterval, "no commit", func() bool {
		if got := committed(t, c, gc.GroupID, topic)[0]; got > 0 {
			t.Fatalf("committed = %d with offset 0 unacked, want 0 or none", got)
		}
		return true
	})
	ack(held[n-1]) // offset 0
	eventually(t, 10*time.Second, "commit of all", func() bool { return committed(t, c, gc.GroupID, topic)[0] == n })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// keptBatches is a handler factory that keeps every batch it is handed,
// the slice itself, with the offsets and values it held then.
type keptBatches struct {
	mu      sync.Mutex
	batches [][]kafka.Message
	want    [][]string // "offset=value" of each batch when handed over
	records int
}

func (k *keptBatches) assign(context.Context, string, int) (kafkaio.Handler, error) { return k, nil }

func (k *keptBatches) Handle(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	var w []string
	for _, m := range batch {
		w = append(w, fmt.Sprintf("%d=%s", m.Offset, m.Value))
	}
	k.mu.Lock()
	k.batches = append(k.batches, batch)
	k.want = append(k.want, w)
	k.records += len(batch)
	k.mu.Unlock()
	for _, m := range batch {
		ack(m)
	}
	return nil
}

func (k *keptBatches) Close(context.Context) error { return nil }

func (k *keptBatches) handled() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.records
}

// TestGroupBatchIsTheHandlers keeps every batch a handler was handed,
// the slice itself: the batches read after it (into the reader's scratch
// slice) must not write over it.
func TestGroupBatchIsTheHandlers(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Fetched
	gc := groupConfig(c, topic)
	gc.MaxBatch = 8
	const n = 200
	values := produce(t, c, topic, "k", n)

	k := &keptBatches{}
	g, err := kafkaio.NewGroup(c, gc, k.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records handled", func() bool { return k.handled() == n })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.batches) < 2 {
		t.Fatalf("%d batches for %d records of at most %d, want several", len(k.batches), n, gc.MaxBatch)
	}
	var handed []string
	for _, w := range k.want {
		handed = append(handed, w...)
	}
	for i, v := range values { // one partition: offset i is the i-th record
		if want := fmt.Sprintf("%d=%s", i, v); i >= len(handed) || handed[i] != want {
			t.Fatalf("record %d handed over as %q, want %q", i, handed[min(i, len(handed)-1)], want)
		}
	}
	for i, b := range k.batches {
		var got []string
		for _, m := range b {
			got = append(got, fmt.Sprintf("%d=%s", m.Offset, m.Value))
		}
		if !slices.Equal(got, k.want[i]) {
			t.Fatalf("batch %d holds %v after later reads, was handed %v", i, got, k.want[i])
		}
	}
}

// TestGroupMaxInFlight checks that a handler never holds more than
// MaxInFlight unacked records of its partition, and that reading resumes
// as acks arrive.
func TestGroupMaxInFlight(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	gc.MaxInFlight = 5
	gc.MaxBatch = 4
	const n = 60
	produce(t, c, topic, "m", n)

	var (
		mu          sync.Mutex
		outstanding []kafka.Message
		maxSeen     int
		handled     int
		ack         func(kafka.Message)
	)
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return handlerFunc(func(_ context.Context, batch []kafka.Message, a func(kafka.Message)) error {
			mu.Lock()
			defer mu.Unlock()
			ack = a
			outstanding = append(outstanding, batch...)
			handled += len(batch)
			maxSeen = max(maxSeen, len(outstanding))
			return nil
		}), nil
	}
	g, err := kafkaio.NewGroup(c, gc, assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		mu.Lock()
		done := handled == n && len(outstanding) == 0
		stalled := len(outstanding) == gc.MaxInFlight
		var m kafka.Message
		if len(outstanding) > 0 && (stalled || handled == n) {
			// Ack the oldest only when reading has paused: proves the
			// pause and the resume.
			m = outstanding[0]
			outstanding = outstanding[1:]
		}
		a := ack
		mu.Unlock()
		if done {
			break
		}
		if m.Value != nil {
			a(m)
		}
		select {
		case <-deadline.C:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("timed out: handled %d of %d", handled, n)
		case <-tick.C:
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if maxSeen > gc.MaxInFlight {
		t.Errorf("handler saw %d unacked records, MaxInFlight %d", maxSeen, gc.MaxInFlight)
	}
	if maxSeen < gc.MaxInFlight {
		t.Errorf("handler saw at most %d unacked records; the test never reached the limit %d", maxSeen, gc.MaxInFlight)
	}
}

// releasingHandler releases every record it is handed and acks none
// until told to (a fetcher whose outcomes wait for a batched insert).
type releasingHandler struct {
	mu      sync.Mutex
	release func(kafka.Message)
	ack     func(kafka.Message)
	got     []kafka.Message
}

func (h *releasingHandler) SetRelease(release func(kafka.Message)) { h.release = release }

func (h *releasingHandler) Handle(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	h.mu.Lock()
	h.ack = ack
	h.got = append(h.got, batch...)
	h.mu.Unlock()
	for _, m := range batch {
		h.release(m)
	}
	return nil
}

func (*releasingHandler) Close(context.Context) error { return nil }

func (h *releasingHandler) handled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

// TestGroupReleaser: records a Releaser releases leave the window
// (MaxInFlight) but count against MaxSettling, so reading goes on past the
// window and pauses below MaxInFlight + MaxSettling; a released record
// holds the commit until it is acked; acked, every record is read and
// committed.
func TestGroupReleaser(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	gc.MaxInFlight = 5
	gc.MaxSettling = 10
	gc.MaxBatch = 4
	const n = 60
	produce(t, c, topic, "m", n)
	h := &releasingHandler{}
	g, err := kafkaio.NewGroup(c, gc, func(context.Context, string, int) (kafkaio.Handler, error) { return h, nil },
		zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	limit := gc.MaxInFlight + gc.MaxSettling
	eventually(t, 10*time.Second, "reading past the window", func() bool { return h.handled() >= gc.MaxSettling })
	consistently(t, 500*time.Millisecond, "reading paused below MaxInFlight + MaxSettling", func() bool { return h.handled() < limit })
	if off, ok := committed(t, c, gc.GroupID, topic)[0]; ok && off > 0 {
		t.Fatalf("committed offset %d with every record released and none acked, want none", off)
	}
	acked := 0
	eventually(t, 20*time.Second, "every record read and acked", func() bool {
		h.mu.Lock()
		pending := h.got[acked:]
		ack := h.ack
		h.mu.Unlock()
		if len(pending) > limit {
			t.Fatalf("%d records unacked, want below %d", len(pending), limit)
		}
		for _, m := range pending {
			ack(m)
		}
		acked += len(pending)
		return acked == n
	})
	eventually(t, 10*time.Second, "commit of all", func() bool { return committed(t, c, gc.GroupID, topic)[0] == n })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestGroupOnFull: a handler that acks only when told its partition's
// window is full (a service flushing its batched writes in OnFull) reads
// the whole topic, each call coming with MaxInFlight records unacked.
func TestGroupOnFull(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	gc.MaxInFlight = 5
	gc.MaxBatch = 5
	const n = 40
	produce(t, c, topic, "m", n)

	var (
		mu          sync.Mutex
		outstanding []kafka.Message
		handled     int
		calls       int
		short       []int // unacked records at a call below the window
		ack         func(kafka.Message)
		all         = make(chan struct{})
	)
	gc.OnFull = func() {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if len(outstanding) != gc.MaxInFlight {
			short = append(short, len(outstanding))
		}
		flushed, a := outstanding, ack
		outstanding = nil
		go func() { // the insert completes later
			for _, m := range flushed {
				a(m)
			}
		}()
	}
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return handlerFunc(func(_ context.Context, batch []kafka.Message, a func(kafka.Message)) error {
			mu.Lock()
			defer mu.Unlock()
			ack = a
			outstanding = append(outstanding, batch...)
			if handled += len(batch); handled == n {
				close(all)
			}
			return nil
		}), nil
	}
	g, err := kafkaio.NewGroup(c, gc, assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("timed out: handled %d of %d, OnFull called %d times", handled, n, calls)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := n/gc.MaxInFlight - 1; calls < want {
		t.Errorf("OnFull called %d times, want at least %d (every full window but the last)", calls, want)
	}
	if len(short) > 0 {
		t.Errorf("OnFull called with %v records unacked, want %d each time", short, gc.MaxInFlight)
	}
}

// TestGroupOnClose: a handler whose acks wait for a flush that comes only
// when asked (a batched writer with a long interval) has its records acked
// and committed when the group stops: OnClose flushes before Close, which
// waits for the acks, instead of Close giving up at its deadline and
// leaving them to the next owner.
func TestGroupOnClose(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	gc.CloseTimeout = 5 * time.Second
	const n = 12
	produce(t, c, topic, "m", n)

	var (
		mu          sync.Mutex
		outstanding []kafka.Message
		handled     int
		closes      int
		ack         func(kafka.Message)
		all         = make(chan struct{})
		flushed     = make(chan struct{})
	)
	gc.OnClose = func() {
		mu.Lock()
		defer mu.Unlock()
		closes++
		pending, a := outstanding, ack
		outstanding = nil
		go func() { // the insert completes later
			for _, m := range pending {
				a(m)
			}
			close(flushed)
		}()
	}
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return closeWaiter{handle: func(_ context.Context, batch []kafka.Message, a func(kafka.Message)) error {
			mu.Lock()
			defer mu.Unlock()
			ack = a
			outstanding = append(outstanding, batch...)
			if handled += len(batch); handled == n {
				close(all)
			}
			return nil
		}, flushed: flushed}, nil
	}
	g, err := kafkaio.NewGroup(c, gc, assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		t.Fatal("timed out before every record was handled")
	}
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if took := time.Since(start); took >= gc.CloseTimeout {
		t.Errorf("the group took %v to stop: Close waited out its deadline", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if closes != 1 {
		t.Errorf("OnClose called %d times, want once", closes)
	}
	if lag := lagOf(t, c, gc.GroupID, topic); lag != 0 {
		t.Errorf("lag after the stop = %d, want 0: the records acked at close are committed", lag)
	}
}

// closeWaiter is a handler whose Close waits for flushed (its in-flight
// inserts) or its deadline, as kafkaio.Later does.
type closeWaiter struct {
	handle  handlerFunc
	flushed <-chan struct{}
}

func (h closeWaiter) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	return h.handle(ctx, batch, ack)
}

func (h closeWaiter) Close(ctx context.Context) error {
	select {
	case <-h.flushed:
	case <-ctx.Done():
	}
	return nil
}

type handlerFunc func(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error

func (f handlerFunc) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	return f(ctx, batch, ack)
}
func (handlerFunc) Close(context.Context) error { return nil }

// TestGroupTwoMembers runs two members of one group: they split the
// partitions, and when one leaves the other takes its partitions over with
// no record lost. A never acks some records: B must get them again.
func TestGroupTwoMembers(t *testing.T) {
	c := kafkatest.Config(t, 4)
	topic := c.Topics().Fetch
	gc := groupConfig(c, topic)

	neverAcked := func(m kafka.Message) bool { return strings.HasSuffix(string(m.Value), "7") }
	recA, recB := newRecorder(neverAcked), newRecorder(nil)
	gA, err := kafkaio.NewGroup(c, gc, recA.assign, zaptest.NewLogger(t).Named("a"), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	gB, err := kafkaio.NewGroup(c, gc, recB.assign, zaptest.NewLogger(t).Named("b"), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stopA := runGroup(t, gA)
	eventually(t, 20*time.Second, "A owns all partitions", func() bool { return len(gA.Assigned()) == 4 })
	stopB := runGroup(t, gB)
	eventually(t, 30*time.Second, "A and B share the partitions", func() bool {
		a, b := gA.Assigned(), gB.Assigned()
		return len(a) > 0 && len(b) > 0 && len(a)+len(b) == 4
	})
	first := produce(t, c, topic, "first", 200)
	union := func() map[string]bool {
		u := map[string]bool{}
		for _, r := range []*recorder{recA, recB} {
			r.mu.Lock()
			for v := range r.values {
				u[v] = true
			}
			r.mu.Unlock()
		}
		return u
	}
	eventually(t, 20*time.Second, "first records handled", func() bool { return len(union()) == len(first) })
	if recA.distinct() == 0 || recB.distinct() == 0 {
		t.Errorf("records handled by A: %d, by B: %d; want both > 0", recA.distinct(), recB.distinct())
	}

	// A leaves; its partitions go to B; records produced meanwhile are
	// not lost.
	second := produce(t, c, topic, "second", 200)
	if err := stopA(); err != nil {
		t.Fatalf("run A: %v", err)
	}
	eventually(t, 30*time.Second, "B owns all partitions", func() bool { return len(gB.Assigned()) == 4 })
	third := produce(t, c, topic, "third", 200)
	all := append(append(append([]string{}, first...), second...), third...)
	eventually(t, 30*time.Second, "every record handled", func() bool { return len(union()) == len(all) })
	u := union()
	for _, v := range all {
		if !u[v] {
			t.Fatalf("record %s lost", v)
		}
	}
	eventually(t, 10*time.Second, "lag 0", func() bool { return lagOf(t, c, gc.GroupID, topic) == 0 })
	if err := stopB(); err != nil {
		t.Fatalf("run B: %v", err)
	}
	recA.mu.Lock()
	held := slices.Clone(recA.held)
	recA.mu.Unlock()
	if len(held) == 0 {
		t.Fatal("A held no record; the test proves nothing")
	}
	recB.mu.Lock()
	defer recB.mu.Unlock()
	for _, m := range held {
		if recB.values[string(m.Value)] == 0 {
			t.Errorf("record %s, never acked by A, was not redelivered to B", m.Value)
		}
	}
}

func TestGroupHandlerErrorFailsRun(t *testing.T) {
	c := kafkatest.Config(t, 2)
	topic := c.Topics().Fetch
	produce(t, c, topic, "e", 10)
	boom := errors.New("boom")
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return handlerFunc(func(context.Context, []kafka.Message, func(kafka.Message)) error { return boom }), nil
	}
	g, err := kafkaio.NewGroup(c, groupConfig(c, topic), assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := g.Run(ctx); !errors.Is(err, boom) {
		t.Fatalf("run = %v, want %v", err, boom)
	}
	if ctx.Err() != nil {
		t.Fatal("run returned only at the deadline")
	}
	if lag := lagOf(t, c, c.GroupFor("test"), topic); lag != 10 {
		t.Errorf("lag = %d after failed handling, want 10 (nothing committed)", lag)
	}
}

func TestGroupAssignErrorFailsRun(t *testing.T) {
	c := kafkatest.Config(t, 2)
	boom := errors.New("load state")
	assign := func(context.Context, string, int) (kafkaio.Handler, error) { return nil, boom }
	g, err := kafkaio.NewGroup(c, groupConfig(c, c.Topics().Fetch), assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := g.Run(ctx); !errors.Is(err, boom) {
		t.Fatalf("run = %v, want %v", err, boom)
	}
}

func TestNewGroupValidates(t *testing.T) {
	c := kafkaio.DefaultConfig()
	assign := func(context.Context, string, int) (kafkaio.Handler, error) { return nil, nil }
	tests := []struct {
		name   string
		gc     kafkaio.GroupConfig
		assign kafkaio.AssignFunc
		ok     bool
	}{
		{"defaults", kafkaio.GroupConfig{GroupID: "g", Topic: "t"}, assign, true},
		{"no group id", kafkaio.GroupConfig{Topic: "t"}, assign, false},
		{"no topic", kafkaio.GroupConfig{GroupID: "g"}, assign, false},
		{"negative in flight", kafkaio.GroupConfig{GroupID: "g", Topic: "t", MaxInFlight: -1}, assign, false},
		{"negative batch", kafkaio.GroupConfig{GroupID: "g", Topic: "t", MaxBatch: -1}, assign, false},
		{"nil assign", kafkaio.GroupConfig{GroupID: "g", Topic: "t"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := kafkaio.NewGroup(c, tt.gc, tt.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
			if (err == nil) != tt.ok {
				t.Errorf("NewGroup err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestGroupCommittedOffsetOutOfRange starts a group whose committed offset
// lies past the end of the partition (the topic was recreated): it resets
// to the first offset instead of stalling.
func TestGroupCommittedOffsetOutOfRange(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Fetch
	gc := groupConfig(c, topic)
	produce(t, c, topic, "x", 10)

	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Transport: tr}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID:      gc.GroupID,
		GenerationID: -1,
		Topics:       map[string][]kafka.OffsetCommit{topic: {{Partition: 0, Offset: 1000}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("commit: %v", p.Error)
		}
	}

	rec := newRecorder(nil)
	g, err := kafkaio.NewGroup(c, gc, rec.assign, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "records read from the first offset", func() bool { return rec.distinct() == 10 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := committed(t, c, gc.GroupID, topic)[0]; got != 10 {
		t.Errorf("committed = %d, want 10", got)
	}
}

// TestGroupLagGauge: kafka_lag counts the records of the member's
// partitions it has not read: with reading paused at MaxInFlight it is the
// rest of the topic, once everything is acked and read it is 0, and it
// leaves with the partitions when the member stops.
func TestGroupLagGauge(t *testing.T) {
	c := kafkatest.Config(t, 1)
	topic := c.Topics().Discovered
	gc := groupConfig(c, topic)
	gc.MaxInFlight = 10
	gc.MaxBatch = 10
	const n = 100
	produce(t, c, topic, "lag", n)
	var (
		mu   sync.Mutex
		held []kafka.Message
		ack  func(kafka.Message)
	)
	assign := func(context.Context, string, int) (kafkaio.Handler, error) {
		return handlerFunc(func(_ context.Context, batch []kafka.Message, a func(kafka.Message)) error {
			mu.Lock()
			defer mu.Unlock()
			ack, held = a, append(held, batch...)
			return nil
		}), nil
	}
	reg := prometheus.NewRegistry()
	g, err := kafkaio.NewGroup(c, gc, assign, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	lag := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "kafka_lag" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}
	eventually(t, 20*time.Second, "reading paused at MaxInFlight", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(held) == gc.MaxInFlight
	})
	// The reader may have decoded a few records ahead of the batch loop:
	// at most the read-ahead more than the held ones are read.
	if l := lag(); l > n-float64(gc.MaxInFlight) || l < n-float64(gc.MaxInFlight)-16 {
		t.Errorf("kafka_lag with %d of %d records held = %v, want about %d", gc.MaxInFlight, n, l, n-gc.MaxInFlight)
	}
	// Ack as records arrive until all are read and acked.
	eventually(t, 20*time.Second, "every record read and acked", func() bool {
		mu.Lock()
		pending := held
		held = nil
		a := ack
		mu.Unlock()
		for _, m := range pending {
			a(m)
		}
		return lag() == 0 && len(pending) == 0
	})
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if l := lag(); l != 0 {
		t.Errorf("kafka_lag after the member stopped = %v, want 0", l)
	}
}

// TestGroupReadsBatchLargerThanFetchMax consumes, with a fetch maximum of
// 64 KiB, records of 3 MiB (random bytes, which compression cannot
// shrink) between small ones: a broker returns a record batch larger than
// the fetch maximum whole when it is the first of a fetch, so a small
// fetch maximum bounds what a fetch carries without stalling a partition
// on a large record.
func TestGroupReadsBatchLargerThanFetchMax(t *testing.T) {
	c := kafkatest.Config(t, 1)
	c.FetchMaxBytes = 64 << 10
	topic := c.Topics().Fetched
	gc := groupConfig(c, topic)

	rng := rand.New(rand.NewPCG(1, 2))
	var msgs []kafka.Message
	for i := range 12 {
		v := []byte(fmt.Sprintf("small-%d", i))
		if i%4 == 1 {
			v = make([]byte, 3<<20)
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte("host.example"), Value: v})
	}
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for _, m := range msgs { // one record per produce: each its own batch
		if err := w.Write(ctx, m); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	rec := newRecorder(nil)
	g, err := kafkaio.NewGroup(c, gc, rec.assign, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records handled", func() bool { return rec.distinct() == len(msgs) })
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, m := range msgs {
		if n := rec.values[string(m.Value)]; n == 0 {
			t.Errorf("record of %d bytes not handled intact", len(m.Value))
		}
	}
}
