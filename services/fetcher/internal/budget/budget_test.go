package budget

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// store is the global count as fetch_log would answer it: pages recorded
// by every fetcher, each with the time its attempt started.
type store struct {
	mu      sync.Mutex
	pages   []page
	fail    bool
	queries [][]string
	during  func() // called while a count runs, if set (once)
}

type page struct {
	crawl string
	at    time.Time
}

func (s *store) record(crawl string, n int64, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.pages = append(s.pages, page{crawl, at})
	}
}

func (s *store) count(_ context.Context, ids []string, before time.Time) (map[string]int64, error) {
	s.mu.Lock()
	during := s.during
	s.during = nil
	s.mu.Unlock()
	if during != nil {
		during()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, slices.Clone(ids))
	if s.fail {
		return nil, errors.New("clickhouse down")
	}
	out := map[string]int64{}
	for _, p := range s.pages {
		if slices.Contains(ids, p.crawl) && p.at.Before(before) {
			out[p.crawl]++
		}
	}
	return out, nil
}

func TestTracker(t *testing.T) {
	type step struct {
		op      string // reserve, exhausted, unreserve, refresh, record (n pages recorded by anyone, started now), fail, heal, tick (the clock moves 1s), race (the next count sees a page charged and recorded while it runs)
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
				{op: "tick"},
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
				{op: "refresh"},                  // both still in flight: remote 0, since 0, local 2
				{op: "record", crawl: "a", n: 2}, // now recorded (started before that count)
				{op: "tick"},
				{op: "refresh"},                         // remote 2
				{op: "reserve", crawl: "a", want: true}, // the third page
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 3,
		},
		{
			name: "a page charged and recorded while a count runs is counted once",
			steps: []step{
				{op: "reserve", crawl: "a", want: true}, // first count
				{op: "tick"},
				{op: "record", crawl: "a", n: 1},
				{op: "tick"},
				{op: "race", crawl: "a"}, // a second page, charged after the count started, in fetch_log before it reads
				{op: "refresh"},
				{op: "reserve", crawl: "a", want: true}, // the third: 2 used, not 3
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 3, wantQueries: 2,
		},
		{
			name: "a failed first count leaves the local view, the refresh repairs it",
			steps: []step{
				{op: "fail"},
				{op: "reserve", crawl: "a", want: true, wantErr: true},
				{op: "record", crawl: "a", n: 3},
				{op: "reserve", crawl: "a", want: true}, // no second first count
				{op: "heal"},
				{op: "tick"},
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
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			s := &store{}
			for id, n := range tt.stored {
				s.record(id, n, clock.Add(-time.Hour))
			}
			tr := NewTracker(func(id string) int64 { return limits[id] }, s.count, func() time.Time { return clock })
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
					s.record(st.crawl, st.n, clock)
				case "tick":
					clock = clock.Add(time.Second)
				case "race":
					crawl := st.crawl
					s.during = func() {
						clock = clock.Add(time.Millisecond)
						if ok, err := tr.Reserve(ctx, crawl); !ok || err != nil {
							t.Errorf("step %d: Reserve during a count = %v, %v", i, ok, err)
						}
						s.record(crawl, 1, clock)
					}
				case "fail", "heal":
					s.mu.Lock()
					s.fail = st.op == "fail"
					s.mu.Unlock()
				}
			}
			if got := tr.Estimate("a"); got != tt.wantEstimate {
				t.Errorf("Estimate(a) = %d, want %d", got, tt.wantEstimate)
			}
			if got, want := tr.Remaining("a"), max(limits["a"]-tt.wantEstimate, 0); got != want {
				t.Errorf("Remaining(a) = %d, want %d", got, want)
			}
			if got := tr.Remaining("b"); got >= 0 {
				t.Errorf("Remaining(b) = %d for a crawl without a budget, want negative", got)
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
	s := &store{}
	tr := NewTracker(func(string) int64 { return budget }, s.count, time.Now)
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
