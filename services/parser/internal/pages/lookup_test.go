package pages

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// mapIndex is a ContentIndex over a map that counts its queries.
type mapIndex struct {
	first   map[string]map[uint64]string
	queries atomic.Int32
	err     error
}

func (m *mapIndex) SeenContent(_ context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	m.queries.Add(1)
	if m.err != nil {
		return nil, m.err
	}
	out := make(map[uint64]string)
	for _, fp := range fps {
		if u, ok := m.first[crawlID][fp]; ok {
			out[fp] = u
		}
	}
	return out, nil
}

// TestCoalescedLookups: twenty batches of two crawls asking at once make
// one round of one query per crawl, and each gets the answer for its own
// fingerprints. In a synctest bubble the window's clock stands still until
// every batch waits, so all twenty are sure to join the first round.
func TestCoalescedLookups(t *testing.T) {
	synctest.Test(t, testCoalescedLookups)
}

func testCoalescedLookups(t *testing.T) {
	idx := &mapIndex{first: map[string]map[uint64]string{
		"a": {1: "http://a/1", 3: "http://a/3"},
		"b": {1: "http://b/1"},
	}}
	c := newCoalescedIndex(idx, 200*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 20 {
		crawl := []string{"a", "b"}[i%2]
		wg.Go(func() {
			got, err := c.SeenContent(t.Context(), crawl, []uint64{1, uint64(i + 2)})
			if err != nil {
				t.Errorf("batch %d: %v", i, err)
				return
			}
			want := map[uint64]string{1: "http://" + crawl + "/1"}
			if i+2 == 3 && crawl == "a" {
				want[3] = "http://a/3"
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("batch %d of %s: %v, want %v", i, crawl, got, want)
			}
		})
	}
	wg.Wait()
	if q := idx.queries.Load(); q != 2 {
		t.Errorf("%d queries for 20 batches of 2 crawls, want 2 (one round)", q)
	}
}

// TestCoalescedLookupsErrors: a failed query fails every batch of its
// round; a follower whose context ends stops waiting; a leader whose
// context ended still answers its round (the query has a context of its
// own), and itself. Run in a synctest bubble: synctest.Wait returns when
// the leader waits on its window's timer, the round open.
func TestCoalescedLookupsErrors(t *testing.T) {
	synctest.Test(t, testCoalescedLookupsErrors)
}

func testCoalescedLookupsErrors(t *testing.T) {
	boom := errors.New("clickhouse down")
	c := newCoalescedIndex(&mapIndex{err: boom}, 10*time.Millisecond)
	if _, err := c.SeenContent(t.Context(), "a", []uint64{1}); !errors.Is(err, boom) {
		t.Errorf("error = %v, want the query's", err)
	}

	idx := &mapIndex{first: map[string]map[uint64]string{"a": {1: "http://a/1"}}}
	c = newCoalescedIndex(idx, 200*time.Millisecond)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	leader := make(chan error, 1)
	go func() {
		got, err := c.SeenContent(cancelled, "a", []uint64{1})
		if err == nil && got[1] != "http://a/1" {
			err = fmt.Errorf("answer %v", got)
		}
		leader <- err
	}()
	synctest.Wait() // the leader waits on the round's window
	c.c.mu.Lock()
	open := c.c.next != nil
	c.c.mu.Unlock()
	if !open {
		t.Fatal("no round opened")
	}
	if _, err := c.SeenContent(cancelled, "a", []uint64{1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled follower: %v, want its context's error", err)
	}
	got, err := c.SeenContent(t.Context(), "a", []uint64{1})
	if err != nil || got[1] != "http://a/1" {
		t.Errorf("follower of a cancelled leader: %v, %v", got, err)
	}
	if err := <-leader; err != nil {
		t.Errorf("cancelled leader: %v, want the round's answer", err)
	}
}

// blockIndex is a ContentIndex whose query lasts until its context ends
// (a ClickHouse that is down, waited for), and says when it starts and
// how it ended.
type blockIndex struct {
	started chan struct{}
	ended   chan error
}

func (b *blockIndex) SeenContent(ctx context.Context, _ string, _ []uint64) (map[uint64]string, error) {
	close(b.started)
	<-ctx.Done()
	b.ended <- ctx.Err()
	return nil, ctx.Err()
}

// TestCoalescedLookupWaitsForItsBatches: a round's query has no timeout
// of its own: it waits (for a ClickHouse that is down) for as long as a
// batch of the round waits for it, ten minutes here on the bubble's
// clock, and is cancelled when the last one has gone.
func TestCoalescedLookupWaitsForItsBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		idx := &blockIndex{started: make(chan struct{}), ended: make(chan error, 1)}
		c := newCoalescedIndex(idx, 10*time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := c.SeenContent(ctx, "a", []uint64{1})
			done <- err
		}()
		<-idx.started
		outage := time.NewTimer(10 * time.Minute) // on the bubble's clock
		<-outage.C
		synctest.Wait()
		select {
		case err := <-idx.ended:
			t.Fatalf("the query ended (%v) while its batch still waited", err)
		default:
		}
		cancel()
		if err := <-idx.ended; !errors.Is(err, context.Canceled) {
			t.Errorf("query ended with %v once its batch had gone, want context.Canceled", err)
		}
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("batch: %v, want its context's error", err)
		}
	})
}
