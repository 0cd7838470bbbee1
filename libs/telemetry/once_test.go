package telemetry

import (
	"fmt"
	"sync"
	"testing"
)

// TestOnce: a key is first once, concurrently too; past MaxOnce keys no
// new key is first, and the table stops growing.
func TestOnce(t *testing.T) {
	var o Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 8 {
		wg.Go(func() {
			if o.First("crawl", "host") {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("(crawl, host) first %d times, want once", firsts)
	}
	if !o.First("crawl", "") || !o.First("other", "host") {
		t.Fatal("another pair is not first")
	}
	for i := range MaxOnce {
		o.First(fmt.Sprint("c", i), "")
	}
	if o.First("one more", "") || len(o.seen) > MaxOnce {
		t.Fatalf("past MaxOnce: a new key is first, or the table holds %d keys", len(o.seen))
	}
}
