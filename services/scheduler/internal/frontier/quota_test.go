package frontier

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/priority"
)

func TestQuota(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	tests := []struct {
		name  string
		limit int
		steps []struct {
			advance time.Duration
			host    string
			want    bool
		}
	}{
		{"unlimited", 0, []struct {
			advance time.Duration
			host    string
			want    bool
		}{{0, "a", true}, {0, "a", true}, {0, "a", true}}},
		{"two per window, per host", 2, []struct {
			advance time.Duration
			host    string
			want    bool
		}{
			{0, "a", true}, {0, "a", true}, {0, "a", false}, {0, "b", true},
			{5 * time.Second, "a", false},
			{5 * time.Second, "a", true}, // new window
			{0, "a", true}, {0, "a", false}, {0, "b", true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQuota(tt.limit, 10*time.Second, clock)
			for i, s := range tt.steps {
				now = now.Add(s.advance)
				if got := q.Take(s.host); got != s.want {
					t.Errorf("step %d: Take(%s) = %v, want %v", i, s.host, got, s.want)
				}
			}
		})
	}
}

// TestQuotaBacklog: a host with URLs deferred has a backlog at their
// shallowest depth; a fresh URL as deep or deeper is refused even when the
// window has room, a shallower one may go; Settle moves the backlog to
// what a pump read left, or drops it, unless a deferral came after the
// read's generation.
func TestQuotaBacklog(t *testing.T) {
	now := time.Unix(1000, 0)
	q := NewQuota(2, 10*time.Second, func() time.Time { return now })
	admit := func(host string, depth uint32, want bool) {
		t.Helper()
		if got := q.Admit(host, depth); got != want {
			t.Fatalf("Admit(%s, %d) = %v, want %v", host, depth, got, want)
		}
	}
	admit("a", 2, true)
	admit("a", 2, true)
	admit("a", 2, false) // over quota: deferred, backlog at depth 2
	now = now.Add(10 * time.Second)
	admit("a", 3, false) // room in the new window, but deeper than the backlog
	admit("a", 2, false) // as deep
	admit("a", 1, true)  // shallower: goes ahead
	admit("b", 5, true)  // b has no backlog
	if n := q.Backlogged(); n != 1 {
		t.Fatalf("%d hosts backlogged, want a", n)
	}
	gen := q.Generation()
	q.Settle(nil, gen-1) // a read from before a's last deferral: kept
	if q.Backlogged() != 1 {
		t.Fatal("a read older than the last deferral dropped the backlog")
	}
	q.Settle(map[string]uint32{"a": 4}, gen) // the read left depth 4 pending
	now = now.Add(10 * time.Second)
	admit("a", 3, true)
	admit("a", 4, false)
	q.Settle(map[string]uint32{"a": 4}, gen) // the deferral at 4 came after gen
	admit("a", 4, false)
	q.Settle(nil, q.Generation()) // drained
	if q.Backlogged() != 0 {
		t.Fatal("a drained backlog was kept")
	}
	now = now.Add(10 * time.Second)
	admit("a", 9, true)
	q.Settle(map[string]uint32{"c": 0}, q.Generation()) // a previous owner's rows
	admit("c", 0, false)

	u := NewQuota(0, time.Second, func() time.Time { return now })
	for range 3 {
		if !u.Admit("a", 0) {
			t.Fatal("unlimited quota refused")
		}
	}
	if u.Backlogged() != 0 {
		t.Fatal("unlimited quota keeps a backlog")
	}
}

// TestQuotaBacklogByRank: the backlog is kept by priority.Rank, so a
// fresh URL of a higher priority goes ahead of a host's backlog however
// deep it is, and a shallow one of a lower priority waits behind it.
func TestQuotaBacklogByRank(t *testing.T) {
	now := time.Unix(1000, 0)
	q := NewQuota(1, 10*time.Second, func() time.Time { return now })
	tests := []struct {
		name            string
		advance         time.Duration
		priority, depth uint32
		want            bool
	}{
		{name: "first in the window", depth: 1, want: true},
		{name: "over quota: backlog at priority 0, depth 2", depth: 2},
		{name: "new window, deeper than the backlog", advance: 10 * time.Second, depth: 3},
		{name: "raised by a rule, deep", priority: 50, depth: 9, want: true},
		{name: "new window, priority 5 goes ahead", advance: 10 * time.Second, priority: 5, depth: 9, want: true},
		{name: "over quota: backlog at priority 5", priority: 5, depth: 9},
		{name: "new window, shallow but lower", advance: 10 * time.Second, depth: 0},
		{name: "higher than the backlog", priority: 6, depth: 12, want: true},
	}
	for _, tt := range tests {
		now = now.Add(tt.advance)
		if got := q.Admit("a", priority.Rank(int32(tt.priority), tt.depth)); got != tt.want {
			t.Fatalf("%s: Admit(priority %d, depth %d) = %v, want %v", tt.name, tt.priority, tt.depth, got, tt.want)
		}
	}
}
