package budget

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// store is the global count as fetch_log would answer it: pages recorded
// per crawl by every fetcher.
type store struct {
	mu      sync.Mutex
	pages   map[string]int64
	fail    bool
	queries [][]string
}

func (s *store) count(_ context.Context, ids []string) (map[string]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, slices.Clone(ids))
	if s.fail {
		return nil, errors.New("clickhouse down")
	}
	out := map[string]int64{}
	for _, id := range ids {
		if n, ok := s.pages[id]; ok {
			out[id] = n
		}
	}
	return out, nil
}

func TestTracker(t *testing.T) {
	type step struct {
		op      string // reserve, exhausted, unreserve, refresh, record (n pages recorded by anyone), fail, heal
		crawl   string
		n       int64
		want    bool // reserve: a page was left
		wantErr bool // reserve, refresh
	}
	limits := map[string]int64{"a": 3, "b": 0}
	tests := []struct {
		name         string
		stored       map[string]int64 // fetch_log at the start
		steps        []step
		wantEstimate int64 // of crawl "a" at the end
		wantQueries  int
	}{
		{
			name: "a crawl without a budget is never refused nor counted",
			steps: []step{
				{op: "reserve", crawl: "b", want: true},
				{op: "reserve", crawl: "b", want: true},
				{op: "refresh"},
			},
			wantQueries: 0,
		},
		{
			name: "local charges spend the budget",
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 1,
		},
		{
			name:   "a restarted fetcher starts from what fetch_log holds",
			stored: map[string]int64{"a": 2},
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 1,
		},
		{
			name: "the refresh brings what the other fetchers charged",
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "record", crawl: "a", n: 1}, // this fetcher's own page, now in fetch_log
				{op: "record", crawl: "a", n: 2}, // another fetcher's
				{op: "refresh"},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 2,
		},
		{
			name: "own pages recorded after the count are not counted twice",
			steps: []step{
				{op: "reserve", crawl: "a", want: true}, // first count: 0
				{op: "reserve", crawl: "a", want: true},
				{op: "refresh"},                         // both still in flight: remote 0, since 0, local 2
				{op: "record", crawl: "a", n: 2},        // now recorded
				{op: "refresh"},                         // remote 2
				{op: "reserve", crawl: "a", want: true}, // the third page
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 3,
		},
		{
			name: "a failed first count leaves the local view, the refresh repairs it",
			steps: []step{
				{op: "fail"},
				{op: "reserve", crawl: "a", want: true, wantErr: true},
				{op: "record", crawl: "a", n: 3},
				{op: "reserve", crawl: "a", want: true}, // no second first count
				{op: "heal"},
				{op: "refresh"},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 2,
		},
		{
			name: "a failed refresh keeps the previous count",
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "record", crawl: "a", n: 3},
				{op: "fail"},
				{op: "refresh", wantErr: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 2,
		},
		{
			name: "a page given back is charged again",
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "unreserve", crawl: "a"},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 1,
		},
		{
			name:   "Exhausted counts a crawl first",
			stored: map[string]int64{"a": 3},
			steps: []step{
				{op: "exhausted", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 1,
		},
		{
			name:   "a spent budget is not counted again",
			stored: map[string]int64{"a": 5},
			steps: []step{
				{op: "reserve", crawl: "a", want: false},
				{op: "refresh"},
				{op: "refresh"},
			},
			wantEstimate: 5, wantQueries: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &store{pages: map[string]int64{}}
			for id, n := range tt.stored {
				s.pages[id] = n
			}
			tr := NewTracker(func(id string) int64 { return limits[id] }, s.count)
			ctx := t.Context()
			for i, st := range tt.steps {
				switch st.op {
				case "reserve":
					ok, err := tr.Reserve(ctx, st.crawl)
					if ok != st.want || (err != nil) != st.wantErr {
						t.Fatalf("step %d: Reserve(%s) = %v, %v; want %v, error %v", i, st.crawl, ok, err, st.want, st.wantErr)
					}
				case "exhausted":
					if spent, err := tr.Exhausted(ctx, st.crawl); spent != st.want || (err != nil) != st.wantErr {
						t.Fatalf("step %d: Exhausted(%s) = %v, %v; want %v, error %v", i, st.crawl, spent, err, st.want, st.wantErr)
					}
				case "unreserve":
					tr.Unreserve(st.crawl)
				case "refresh":
					if err := tr.Refresh(ctx); (err != nil) != st.wantErr {
						t.Fatalf("step %d: Refresh = %v, want error %v", i, err, st.wantErr)
					}
				case "record":
					s.mu.Lock()
					s.pages[st.crawl] += st.n
					s.mu.Unlock()
				case "fail", "heal":
					s.mu.Lock()
					s.fail = st.op == "fail"
					s.mu.Unlock()
				}
			}
			if got := tr.Estimate("a"); got != tt.wantEstimate {
				t.Errorf("Estimate(a) = %d, want %d", got, tt.wantEstimate)
			}
			if len(s.queries) != tt.wantQueries {
				t.Errorf("%d counts %v, want %d", len(s.queries), s.queries, tt.wantQueries)
			}
			if spent, _ := tr.Exhausted(ctx, "a"); spent != (tt.wantEstimate >= limits["a"]) {
				t.Errorf("Exhausted(a) = %v with estimate %d of %d", spent, tt.wantEstimate, limits["a"])
			}
		})
	}
}

// TestTrackerConcurrent charges one crawl from many goroutines at once,
// with refreshes running: exactly the budget is handed out.
func TestTrackerConcurrent(t *testing.T) {
	const budget, workers, tries = 100, 16, 50
	s := &store{pages: map[string]int64{}}
	tr := NewTracker(func(string) int64 { return budget }, s.count)
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range tries {
				if ok, _ := tr.Reserve(t.Context(), "c"); ok {
					granted.Add(1)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_ = tr.Refresh(t.Context())
		}
	})
	wg.Wait()
	if granted.Load() != budget {
		t.Errorf("%d pages granted, want the budget of %d", granted.Load(), budget)
	}
}
