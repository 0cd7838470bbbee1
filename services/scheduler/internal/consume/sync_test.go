package consume

import (
	"context"
	"slices"
	"sync"
	"testing"
)

// TestSyncSpecBeforeAdmission: the scheduler waits for a crawl's
// specification (SyncSpec) before it decides on the crawl's URLs, once per
// crawl and batch: here the depth limit arrives only with the sync, and
// the deep URL is dropped by it instead of admitted on the default.
func TestSyncSpecBeforeAdmission(t *testing.T) {
	e := newEnv(t)
	var (
		mu     sync.Mutex
		limits = map[string]uint32{}
		calls  []string
	)
	cfg := Config{
		Depth: func(crawlID string) uint32 { // a spec's depth, else the fleet's 16
			mu.Lock()
			defer mu.Unlock()
			if d, ok := limits[crawlID]; ok {
				return d
			}
			return 16
		},
		SyncSpec: func(_ context.Context, crawlID string) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, crawlID)
			if crawlID == "late" {
				limits["late"] = 1 // the specification, read by the sync
			}
			return nil
		},
	}
	e.startWith(cfg, 0)
	// One host: one partition, so one batch sees both records.
	e.publish(disc("late", "http://sync.example/shallow", 1), disc("late", "http://sync.example/deep", 3))
	e.drain()
	var admitted []string
	for _, f := range e.fetches() {
		admitted = append(admitted, f.req.GetUrl())
	}
	if !slices.Equal(admitted, []string{"http://sync.example/shallow"}) {
		t.Errorf("admitted %v, want only the URL within the specification's depth limit", admitted)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) == 0 || slices.ContainsFunc(calls, func(c string) bool { return c != "late" }) {
		t.Errorf("SyncSpec calls %v, want the crawl's", calls)
	}
	if len(calls) > 2 {
		t.Errorf("SyncSpec called %d times for 2 URLs: want once per crawl and batch", len(calls))
	}
}
