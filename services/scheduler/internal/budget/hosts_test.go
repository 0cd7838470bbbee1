package budget

import (
	"context"
	"errors"
	"testing"
)

// TestHosts: a crawl's counts are loaded once, on its first limited
// admission; the limit holds per host; Give returns a page; unlimited
// crawls load nothing; a failed load is retried at the next Take.
func TestHosts(t *testing.T) {
	ctx := t.Context()
	loads := map[string]int{}
	fail := true
	h := NewHosts(3, func(crawl string) int64 {
		if crawl == "free" {
			return 0
		}
		return 2
	}, func(_ context.Context, partition int, crawl string) (map[string]int64, error) {
		if partition != 3 {
			t.Fatalf("loaded partition %d, want 3", partition)
		}
		loads[crawl]++
		if crawl == "flaky" && fail {
			fail = false
			return nil, errors.New("unreachable")
		}
		if crawl == "c" {
			return map[string]int64{"a.example": 1}, nil
		}
		return nil, nil
	})
	type step struct {
		crawl, host string
		give        bool
		want        bool
		wantErr     bool
	}
	steps := []step{
		{crawl: "c", host: "a.example", want: true},  // 1 stored + 1
		{crawl: "c", host: "a.example", want: false}, // 2 of 2
		{crawl: "c", host: "b.example", want: true},  // another host
		{crawl: "c", host: "a.example", give: true},  // a batch failed
		{crawl: "c", host: "a.example", want: true},  // the page given back
		{crawl: "free", host: "a.example", want: true},
		{crawl: "free", host: "a.example", want: true},
		{crawl: "free", host: "a.example", give: true}, // nothing loaded: nothing to give
		{crawl: "flaky", host: "a.example", wantErr: true},
		{crawl: "flaky", host: "a.example", want: true},
	}
	for i, s := range steps {
		if s.give {
			h.Give(s.crawl, s.host)
			continue
		}
		got, err := h.Take(ctx, s.crawl, s.host)
		if (err != nil) != s.wantErr || got != s.want {
			t.Fatalf("step %d: Take(%s, %s) = %v, %v; want %v (error: %v)", i, s.crawl, s.host, got, err, s.want, s.wantErr)
		}
	}
	if loads["c"] != 1 || loads["free"] != 0 || loads["flaky"] != 2 {
		t.Fatalf("loads %v, want c once, free never, flaky twice", loads)
	}
}
