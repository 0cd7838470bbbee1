package frontier

import (
	"testing"
	"time"
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
