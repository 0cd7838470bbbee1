package budget

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

func TestTracker(t *testing.T) {
	type step struct {
		op        string // reserve, hold, release, refresh, unreserve
		partition int
		crawl     string
		counts    map[string]int64 // hold: loaded counts; refresh: global counts
		n         int64            // unreserve
		want      bool             // reserve
	}
	tests := []struct {
		name  string
		max   int64
		steps []step
		// wantEstimate is checked for crawl "a" at the end.
		wantEstimate int64
	}{
		{
			name: "unlimited never refuses",
			max:  0,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
			},
		},
		{
			name: "local admissions exhaust the budget",
			max:  2,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", partition: 1, crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
				{op: "reserve", crawl: "b", want: true},
			},
			wantEstimate: 2,
		},
		{
			name: "loaded partition counts",
			max:  3,
			steps: []step{
				{op: "hold", partition: 0, counts: map[string]int64{"a": 2, "b": 5}},
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
				{op: "reserve", crawl: "b", want: false},
			},
			wantEstimate: 3,
		},
		{
			name: "revoked partition no longer counts locally",
			max:  3,
			steps: []step{
				{op: "hold", partition: 0, counts: map[string]int64{"a": 3}},
				{op: "reserve", partition: 1, crawl: "a", want: false},
				{op: "release", partition: 0},
				{op: "reserve", partition: 1, crawl: "a", want: true},
			},
			wantEstimate: 1,
		},
		{
			name: "global count includes other instances",
			max:  10,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "refresh", counts: map[string]int64{"a": 9}}, // 1 ours + 8 elsewhere
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: false},
			},
			wantEstimate: 10,
		},
		{
			name: "refresh resets since",
			max:  100,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "refresh", counts: map[string]int64{"a": 5}},
				{op: "reserve", crawl: "a", want: true},
			},
			wantEstimate: 6,
		},
		{
			name: "unreserve gives pages back",
			max:  2,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "reserve", crawl: "a", want: true},
				{op: "unreserve", crawl: "a", n: 2},
				{op: "reserve", crawl: "a", want: true},
			},
			wantEstimate: 1,
		},
		{
			name: "hold replaces earlier state of the partition",
			max:  10,
			steps: []step{
				{op: "reserve", crawl: "a", want: true},
				{op: "hold", partition: 0, counts: map[string]int64{"a": 4}},
			},
			wantEstimate: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(Fixed(tt.max))
			for i, s := range tt.steps {
				switch s.op {
				case "reserve":
					if got := tr.Reserve(s.partition, s.crawl); got != s.want {
						t.Fatalf("step %d: Reserve(%d, %q) = %v, want %v", i, s.partition, s.crawl, got, s.want)
					}
				case "hold":
					tr.Hold(s.partition, s.counts)
				case "release":
					tr.Release(s.partition)
				case "unreserve":
					tr.Unreserve(s.partition, s.crawl, s.n)
				case "refresh":
					counts := s.counts
					err := tr.Refresh(t.Context(), func(context.Context, []string) (map[string]int64, error) {
						return counts, nil
					})
					if err != nil {
						t.Fatalf("step %d: Refresh: %v", i, err)
					}
				}
			}
			if got := tr.Estimate("a"); got != tt.wantEstimate {
				t.Fatalf("Estimate(a) = %d, want %d", got, tt.wantEstimate)
			}
		})
	}
}

func TestRefreshError(t *testing.T) {
	tr := NewTracker(Fixed(5))
	tr.Reserve(0, "a")
	boom := errors.New("boom")
	err := tr.Refresh(t.Context(), func(context.Context, []string) (map[string]int64, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Refresh error = %v, want wrapping %v", err, boom)
	}
	if got := tr.Estimate("a"); got != 1 {
		t.Fatalf("Estimate after failed refresh = %d, want 1", got)
	}
}

// TestConcurrentReserve checks that concurrent partitions never admit more
// than the budget in total.
func TestConcurrentReserve(t *testing.T) {
	const budget, workers = 500, 8
	tr := NewTracker(Fixed(budget))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	for w := range workers {
		wg.Go(func() {
			n := 0
			for range 200 {
				if tr.Reserve(w, "a") {
					n++
				}
			}
			mu.Lock()
			granted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if granted != budget {
		t.Fatalf("granted %d pages, want exactly %d", granted, budget)
	}
}

// TestSpecLimits: each crawl is held to its own ceiling (the resolved
// one: its spec's max_pages, else the fleet's; crawlsettings.Resolve and
// config.SpecPages choose it), 0 leaves a crawl unlimited, and crawls do
// not share a count.
func TestSpecLimits(t *testing.T) {
	limits := func(fleet int64) func(string) int64 {
		return func(id string) int64 {
			switch id {
			case "tight":
				return 1
			case "loose":
				return 4
			}
			return fleet
		}
	}
	tests := []struct {
		name     string
		fleet    int64
		crawl    string
		wantTook int
	}{
		{name: "tighter than the fleet", fleet: 3, crawl: "tight", wantTook: 1},
		{name: "looser than the fleet", fleet: 3, crawl: "loose", wantTook: 4},
		{name: "the fleet's", fleet: 3, crawl: "plain", wantTook: 3},
		{name: "unlimited", fleet: 0, crawl: "plain", wantTook: 10},
		{name: "own ceiling in an unlimited fleet", fleet: 0, crawl: "tight", wantTook: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(limits(tt.fleet))
			if !tr.Reserve(0, "other") {
				t.Fatal("another crawl's first page refused")
			}
			took := 0
			for range 10 {
				if tr.Reserve(0, tt.crawl) {
					took++
				}
			}
			if took != tt.wantTook {
				t.Errorf("reserved %d of 10, want %d", took, tt.wantTook)
			}
		})
	}
	if NewTracker(Fixed(0)).Limited() || !NewTracker(Fixed(2)).Limited() {
		t.Error("Fixed(0) must leave the tracker unlimited, Fixed(2) limited")
	}
}

// TestRefreshCountsBudgetedCrawls: a refresh counts the crawls with a page
// budget only (the count reads all of a crawl's fingerprints); a crawl
// given a budget later is counted from then on.
func TestRefreshCountsBudgetedCrawls(t *testing.T) {
	budgets := map[string]int64{"bounded": 5}
	tr := NewTracker(func(id string) int64 { return budgets[id] })
	for _, id := range []string{"bounded", "open"} {
		if !tr.Reserve(0, id) {
			t.Fatalf("reserve %s refused", id)
		}
	}
	var asked []string
	count := func(_ context.Context, ids []string) (map[string]int64, error) {
		asked = append(asked[:0], ids...)
		return map[string]int64{"bounded": 3, "open": 3}, nil
	}
	if err := tr.Refresh(t.Context(), count); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []string{"bounded"}) {
		t.Errorf("counted %v, want [bounded]", asked)
	}
	if got := tr.Estimate("bounded"); got != 3 {
		t.Errorf("estimate of bounded = %d, want 3 (the count)", got)
	}
	if got := tr.Estimate("open"); got != 1 {
		t.Errorf("estimate of open = %d, want 1 (its local charge)", got)
	}
	budgets["open"] = 2
	if err := tr.Refresh(t.Context(), count); err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"bounded", "open"}) {
		t.Errorf("counted %v once open has a budget, want both", asked)
	}
	if tr.Reserve(0, "open") {
		t.Errorf("open reserved past its budget of 2 (counted 3)")
	}
}

func TestReserveBest(t *testing.T) {
	tests := []struct {
		name string
		max  int64
		// ops: 'r' Reserve, 'b' ReserveBest, 'u' Unreserve one; want
		// holds the results of the reserves, in order.
		ops  string
		want []bool
	}{
		{name: "unlimited", max: 0, ops: "bbb", want: []bool{true, true, true}},
		{name: "within the ceiling it is Reserve", max: 2, ops: "br", want: []bool{true, true}},
		{name: "past the ceiling a second allowance", max: 2, ops: "rrrbbb", want: []bool{true, true, false, true, true, false}},
		{name: "ordinary urls stay stopped", max: 2, ops: "rrbr", want: []bool{true, true, true, false}},
		{name: "given back", max: 1, ops: "rbbub", want: []bool{true, true, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker(Fixed(tt.max))
			var got []bool
			for _, op := range tt.ops {
				switch op {
				case 'r':
					got = append(got, tr.Reserve(0, "a"))
				case 'b':
					got = append(got, tr.ReserveBest(0, "a"))
				case 'u':
					tr.Unreserve(0, "a", 1)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("reserves %v, want %v", got, tt.want)
			}
		})
	}
}
