package frontier

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// memStore is a Store in memory: a row is pending until a row of the same
// (crawl, fp) with another state is written.
type memStore struct {
	mu      sync.Mutex
	rows    []rows.FrontierRow
	queries int
}

func (m *memStore) Write(_ context.Context, rs ...rows.FrontierRow) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows = append(m.rows, rs...)
	return nil
}

func (m *memStore) Pending(_ context.Context, partition, perHost int, skip []string) ([]rows.FrontierRow, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queries++
	done := map[[2]any]bool{}
	for _, r := range m.rows {
		if r.State != rows.FrontierPending {
			done[[2]any{r.CrawlID, r.FP}] = true
		}
	}
	var out []rows.FrontierRow
	perHostN := map[string]int{}
	for _, r := range m.rows {
		if r.State != rows.FrontierPending || done[[2]any{r.CrawlID, r.FP}] || int(r.Partition) != partition ||
			slices.Contains(skip, r.CrawlID) || perHostN[r.Host] >= perHost {
			continue
		}
		perHostN[r.Host]++
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) count() (queries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.queries
}

type memProducer struct {
	mu   sync.Mutex
	urls []string
}

func (p *memProducer) Write(_ context.Context, msgs ...kafka.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		var fr crawlv1.FetchRequest
		if err := kafkaio.Decode(m, &fr); err != nil {
			return err
		}
		p.urls = append(p.urls, fr.GetUrl())
	}
	return nil
}

func (p *memProducer) released() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.urls)
}

type memEvents struct {
	mu     sync.Mutex
	events []rows.URLEventRow
}

func (e *memEvents) Write(_ context.Context, rs ...rows.URLEventRow) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, rs...)
	return nil
}

func pending(crawl, url, host string, fp uint64, depth uint16) rows.FrontierRow {
	return PendingRow(0, host, &crawlv1.FetchRequest{CrawlId: crawl, Url: url, UrlFp: fp, Depth: uint32(depth)}, time.Now())
}

// TestPump runs a partition's pump in a synctest bubble (its ticker and
// clock are the bubble's): a quota of 2 per host per window releases a
// backlog two URLs a window, shallowest first; a cancelled crawl's URLs
// are dropped with a cancelled event, a paused crawl's stay; an idle pump
// does not query until a URL is deferred or the specifications change.
func TestPump(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 10 * time.Second
		store := &memStore{}
		prod := &memProducer{}
		events := &memEvents{}
		var mu sync.Mutex
		states := map[string]crawlv1.CrawlState{"gone": crawlv1.CrawlState_CRAWL_STATE_CANCELLED, "held": crawlv1.CrawlState_CRAWL_STATE_PAUSED}
		changed := make(chan struct{})
		released := prometheus.NewCounter(prometheus.CounterOpts{Name: "released_total", Help: "Frontier rows released."})
		cancelled := prometheus.NewCounter(prometheus.CounterOpts{Name: "cancelled_total", Help: "Frontier rows cancelled."})
		cfg := PumpConfig{
			Topic: "fetch", PerHost: 2, Window: window,
			Paused: func() []string {
				mu.Lock()
				defer mu.Unlock()
				if states["held"] == crawlv1.CrawlState_CRAWL_STATE_PAUSED {
					return []string{"held"}
				}
				return nil
			},
			Changed: func() <-chan struct{} {
				mu.Lock()
				defer mu.Unlock()
				return changed
			},
			State: func(id string) crawlv1.CrawlState {
				mu.Lock()
				defer mu.Unlock()
				return states[id]
			},
			Key:      func(u string) ([]byte, error) { return []byte(u), nil },
			Now:      time.Now,
			Released: released, Cancelled: cancelled,
		}
		_ = store.Write(t.Context(),
			pending("c", "http://a.example/3", "a.example", 3, 3),
			pending("c", "http://a.example/1", "a.example", 1, 1),
			pending("c", "http://a.example/2", "a.example", 2, 2),
			pending("gone", "http://b.example/x", "b.example", 10, 1),
			pending("held", "http://b.example/y", "b.example", 11, 1),
		)
		// The test store returns rows in insertion order; sort like the
		// table's query (host, depth).
		slices.SortStableFunc(store.rows, func(x, y rows.FrontierRow) int { return int(x.Depth) - int(y.Depth) })
		p := StartPump(cfg, 0, NewQuota(2, window, time.Now), store, prod, events, zap.NewNop())
		defer p.Stop()

		synctest.Wait() // the first pass
		if got := prod.released(); !slices.Equal(got, []string{"http://a.example/1", "http://a.example/2"}) {
			t.Fatalf("first window released %v, want the two shallowest of a.example", got)
		}
		if len(events.events) != 1 || events.events[0].CrawlID != "gone" || events.events[0].State != "cancelled" || events.events[0].Reason != "cancelled" {
			t.Fatalf("events %+v, want one cancelled event of crawl gone", events.events)
		}
		tick := time.NewTimer(window)
		<-tick.C
		synctest.Wait()
		if got := prod.released(); len(got) != 3 || got[2] != "http://a.example/3" {
			t.Fatalf("second window released %v, want a.example/3 next", got)
		}
		// Nothing releasable is left (held is paused): the pump goes idle.
		tick.Reset(window)
		<-tick.C
		synctest.Wait()
		q := store.count()
		tick.Reset(3 * window)
		<-tick.C
		synctest.Wait()
		if got := store.count(); got != q {
			t.Fatalf("idle pump queried %d times in three windows", got-q)
		}
		// The paused crawl resumes: the spec change wakes the pump at once.
		mu.Lock()
		states["held"] = crawlv1.CrawlState_CRAWL_STATE_RUNNING
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
		synctest.Wait()
		if got := prod.released(); len(got) != 4 || got[3] != "http://b.example/y" {
			t.Fatalf("after the resume released %v, want b.example/y at once", got)
		}
		// A deferral wakes an idle pump at its next window.
		tick.Reset(2 * window)
		<-tick.C
		synctest.Wait()
		q = store.count()
		_ = store.Write(t.Context(), pending("c", "http://c.example/1", "c.example", 20, 1))
		p.MarkDeferred(1)
		tick.Reset(window)
		<-tick.C
		synctest.Wait()
		if got := prod.released(); store.count() == q || len(got) != 5 || got[4] != "http://c.example/1" {
			t.Fatalf("after a deferral: %d queries, released %v", store.count()-q, got)
		}
		if testutil.ToFloat64(released) != 5 || testutil.ToFloat64(cancelled) != 1 {
			t.Fatalf("released %v, cancelled %v", testutil.ToFloat64(released), testutil.ToFloat64(cancelled))
		}
	})
}

// TestResumeWithTheTick: a crawl resumed at the instant the idle pump's
// window ticks still wakes it. The pump's select then has both the tick
// and the closed change channel ready and picks one at random; a pump
// that took the tick and a new channel lost the change, and the resumed
// crawl's URL stayed in the frontier; so did one that took a new channel
// between the tick and the change. Twenty rounds: each lost change had
// even odds or better.
func TestResumeWithTheTick(t *testing.T) {
	for round := range 20 {
		synctest.Test(t, func(t *testing.T) {
			const window = 10 * time.Second
			store, prod := &memStore{}, &memProducer{}
			var mu sync.Mutex
			paused := true
			changed := make(chan struct{})
			cfg := PumpConfig{
				Topic: "fetch", PerHost: 2, Window: window,
				Paused: func() []string {
					mu.Lock()
					defer mu.Unlock()
					if paused {
						return []string{"held"}
					}
					return nil
				},
				Changed: func() <-chan struct{} {
					mu.Lock()
					defer mu.Unlock()
					return changed
				},
				Key:       func(u string) ([]byte, error) { return []byte(u), nil },
				Now:       time.Now,
				Released:  prometheus.NewCounter(prometheus.CounterOpts{Name: "released_total", Help: "Released."}),
				Cancelled: prometheus.NewCounter(prometheus.CounterOpts{Name: "cancelled_total", Help: "Cancelled."}),
			}
			_ = store.Write(t.Context(), pending("held", "http://b.example/y", "b.example", 11, 1))
			p := StartPump(cfg, 0, NewQuota(2, window, time.Now), store, prod, &memEvents{}, zap.NewNop())
			defer p.Stop()
			synctest.Wait()               // the first pass: nothing releasable, the pump goes idle
			tick := time.NewTimer(window) // fires with the pump's tick
			<-tick.C
			mu.Lock()
			paused = false
			close(changed)
			changed = make(chan struct{})
			mu.Unlock()
			synctest.Wait()
			if got := prod.released(); len(got) != 1 {
				t.Fatalf("round %d: resumed at the tick, released %v, want b.example/y", round, got)
			}
		})
	}
}

// TestFreshURLsWaitBehindBacklog: a host's fresh URLs do not overtake its
// backlog in the frontier. Quota 2 per 10 s window; at 0 s the handler
// admits two depth-1 URLs of a.example and defers two more; the pump runs
// from 0.5 s, so at 10.2 s a new window has begun and its pass has not yet
// come. Two depth-3 URLs admitted then would have taken that window's
// quota ahead of the depth-1 backlog (Take alone); Admit defers them, and
// the pump releases depth 1 at 10.5 s, then depth 3 at 20.5 s. Once the
// backlog is drained and settled, fresh URLs go straight out again.
func TestFreshURLsWaitBehindBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const window = 10 * time.Second
		store := &memStore{}
		prod := &memProducer{}
		q := NewQuota(2, window, time.Now)
		var order []string                 // fetch requests in the order they leave the partition
		advance := func(d time.Duration) { // the bubble's clock, once every goroutine is blocked
			tm := time.NewTimer(d)
			<-tm.C
		}
		admit := func(url string, depth uint16) {
			if q.Admit("a.example", uint32(depth)) {
				order = append(order, url)
				return
			}
			_ = store.Write(t.Context(), pending("c", url, "a.example", uint64(len(store.rows)+100), depth))
		}
		admit("http://a.example/1a", 1)
		admit("http://a.example/1b", 1)
		admit("http://a.example/1c", 1)
		admit("http://a.example/1d", 1)
		advance(500 * time.Millisecond)
		cfg := PumpConfig{
			Topic: "fetch", PerHost: 2, Window: window,
			Key: func(u string) ([]byte, error) { return []byte(u), nil }, Now: time.Now,
			Released:  prometheus.NewCounter(prometheus.CounterOpts{Name: "released_total", Help: "Frontier rows released."}),
			Cancelled: prometheus.NewCounter(prometheus.CounterOpts{Name: "cancelled_total", Help: "Frontier rows cancelled."}),
		}
		p := StartPump(cfg, 0, q, store, prod, &memEvents{}, zap.NewNop())
		defer p.Stop()
		synctest.Wait() // the first pass: the window's quota is spent
		advance(window - 300*time.Millisecond)
		admit("http://a.example/3a", 3) // 10.2 s
		admit("http://a.example/3b", 3)
		p.MarkDeferred(2)
		advance(300 * time.Millisecond)
		synctest.Wait() // 10.5 s
		advance(window)
		synctest.Wait() // 20.5 s
		order = append(order, prod.released()...)
		want := []string{"http://a.example/1a", "http://a.example/1b", "http://a.example/1c", "http://a.example/1d", "http://a.example/3a", "http://a.example/3b"}
		if !slices.Equal(order, want) {
			t.Fatalf("fetch requests left in the order %v, want %v", order, want)
		}
		if n := q.Backlogged(); n != 1 {
			t.Fatalf("%d hosts backlogged after the pass that read the last rows, want a.example until a read settles it", n)
		}
		advance(window)
		synctest.Wait() // 30.5 s: the read finds nothing and settles
		if n := q.Backlogged(); n != 0 {
			t.Fatalf("%d hosts backlogged after the backlog drained, want 0", n)
		}
		advance(window)
		admit("http://a.example/4a", 4)
		if order[len(order)-1] != "http://a.example/4a" {
			t.Fatalf("a fresh URL after the backlog drained was deferred: %v", order)
		}
	})
}
