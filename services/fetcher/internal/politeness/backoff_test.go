package politeness

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

func TestSlowsDown(t *testing.T) {
	tests := []struct {
		name   string
		status int
		kind   failure.Kind
		want   bool
	}{
		{"429", 429, failure.None, true},
		{"503", 503, failure.None, true},
		{"timeout", 0, failure.Timeout, true},
		{"connection refused", 0, failure.Connect, true},
		{"too slow", 200, failure.TooSlow, true},
		{"200", 200, failure.None, false},
		{"500", 500, failure.None, false},
		{"404", 404, failure.None, false},
		{"dns", 0, failure.DNS, false},
		{"body too large", 200, failure.BodyTooLarge, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SlowsDown(tt.status, tt.kind); got != tt.want {
				t.Fatalf("SlowsDown(%d, %q) = %v, want %v", tt.status, tt.kind, got, tt.want)
			}
		})
	}
}

// TestSlowDown scripts consecutive slow-downs of one host against a fake
// clock: Retry-After when longer, else 5 delays doubled per level, capped
// at MaxCrawlDelay; a normal answer resets the level.
func TestSlowDown(t *testing.T) {
	const delay = 100 * time.Millisecond
	type answer struct {
		slow       bool          // SlowDown, else Recovered
		retryAfter time.Duration // of a slow-down
		wantWait   time.Duration // from the end of the request to the host's next start
		wantLevel  int           // after the answer
	}
	tests := []struct {
		name     string
		maxCrawl time.Duration
		answers  []answer
	}{
		{name: "doubling per consecutive slow-down", maxCrawl: time.Minute, answers: []answer{
			{slow: true, wantWait: 500 * time.Millisecond, wantLevel: 1},
			{slow: true, wantWait: time.Second, wantLevel: 2},
			{slow: true, wantWait: 2 * time.Second, wantLevel: 3},
		}},
		{name: "Retry-After wins when longer", maxCrawl: time.Minute, answers: []answer{
			{slow: true, retryAfter: 3 * time.Second, wantWait: 3 * time.Second, wantLevel: 1},
			{slow: true, retryAfter: 200 * time.Millisecond, wantWait: time.Second, wantLevel: 2},
		}},
		{name: "capped at the max crawl delay", maxCrawl: 1500 * time.Millisecond, answers: []answer{
			{slow: true, retryAfter: time.Hour, wantWait: 1500 * time.Millisecond, wantLevel: 1},
			{slow: true, wantWait: time.Second, wantLevel: 2},
			{slow: true, wantWait: 1500 * time.Millisecond, wantLevel: 3},
		}},
		{name: "a normal answer resets the level", maxCrawl: time.Minute, answers: []answer{
			{slow: true, wantWait: 500 * time.Millisecond, wantLevel: 1},
			{slow: true, wantWait: time.Second, wantLevel: 2},
			{slow: false, wantWait: delay, wantLevel: 0},
			{slow: true, wantWait: 500 * time.Millisecond, wantLevel: 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := t0
			e := New[string](func() time.Time { return clock }, Options{Delay: delay, MaxCrawlDelay: tt.maxCrawl})
			for i, a := range tt.answers {
				e.Push("h", "u", time.Time{})
				start, ok := e.NextWakeup()
				if !ok {
					t.Fatalf("answer %d: nothing to wake for", i)
				}
				clock = start
				if _, _, ok := e.Next(clock); !ok {
					t.Fatalf("answer %d: host not eligible at its wake-up", i)
				}
				clock = clock.Add(10 * time.Millisecond) // the request
				end := clock
				if a.slow {
					e.SlowDown("h", end, a.retryAfter)
				} else {
					e.Recovered("h")
				}
				e.Done("h", end)
				e.Push("h", "next", time.Time{})
				next, _ := e.NextWakeup()
				if got := next.Sub(end); got != a.wantWait {
					t.Errorf("answer %d: next start %v after the end, want %v", i, got, a.wantWait)
				}
				if got := e.BackoffLevel("h"); got != a.wantLevel {
					t.Errorf("answer %d: level %d, want %d", i, got, a.wantLevel)
				}
				clock = next
				if _, _, ok := e.Next(clock); !ok {
					t.Fatalf("answer %d: host not eligible at its wake-up", i)
				}
				e.Release("h")
			}
		})
	}
}

// TestSlowDownLevelCap: the doubling stops at MaxSlowDownDoublings.
func TestSlowDownLevelCap(t *testing.T) {
	clock := t0
	e := New[string](func() time.Time { return clock }, Options{Delay: time.Nanosecond, MaxCrawlDelay: time.Hour})
	e.Restore("h", HostState{Delay: time.Nanosecond, BackoffLevel: MaxSlowDownDoublings + 5})
	e.SlowDown("h", clock, 0)
	_, _, next := e.HostQueue("h")
	if want := clock.Add((SlowDownDelays * time.Nanosecond) << MaxSlowDownDoublings); !next.Equal(want) {
		t.Fatalf("next %v, want %v", next.Sub(clock), want.Sub(clock))
	}
}
