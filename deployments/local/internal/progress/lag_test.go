package progress

import (
	"testing"
	"time"
)

// TestLagTrack: a parser two seconds behind a fetcher of 100 pages a
// second shows a two-second lag of 200 records, and its pages stored by
// quarter; a stall of the parser for the last 20 s shows in the maximum;
// a pause of the fetcher with nothing waiting is no lag.
func TestLagTrack(t *testing.T) {
	var l LagTrack
	t0 := time.Unix(1000, 0)
	l.Add(t0.Add(-time.Second), 0, 0) // before the first page: not a poll
	for i := range 100 {
		produced := int64(100 * (i + 1))
		stored := max(produced-200, 0)
		if i >= 80 {
			stored = 7_800 // produced by 77 s
		}
		l.Add(t0.Add(time.Duration(i)*time.Second), produced, stored)
	}
	st := l.Stats()
	if st.Polls != 100 {
		t.Errorf("%d polls, want 100", st.Polls)
	}
	if st.P50 != 2*time.Second || st.RecordsP50 != 200 {
		t.Errorf("median lag %v, %d records; want 2s, 200", st.P50, st.RecordsP50)
	}
	if st.Max != 22*time.Second || st.RecordsMax != 2_200 {
		t.Errorf("max lag %v, %d records; want 22s (at 99 s, what was produced at 77 s), 2 200", st.Max, st.RecordsMax)
	}
	var sum int64
	for _, n := range st.StoredByQuarter {
		sum += n
	}
	if sum != 7_800 || st.StoredByQuarter[0] != 2_300 || st.StoredByQuarter[3] != 7_800-7_300 {
		t.Errorf("stored by quarter %v (sum %d), want 2 300 first (stored at 24 s), 500 last (7 300 stored at 74 s) and 7 800 in all", st.StoredByQuarter, sum)
	}
	// A fetcher paused for 30 s with every page stored: nothing waits,
	// no lag, however long ago the last page was fetched.
	var paused LagTrack
	for i := range 40 {
		produced := min(int64(100*(i+1)), 1_000)
		paused.Add(t0.Add(time.Duration(i)*time.Second), produced, produced)
	}
	if s := paused.Stats(); s.Max != 0 || s.RecordsMax != 0 {
		t.Errorf("paused fetcher, everything stored: max lag %v, %d records; want none", s.Max, s.RecordsMax)
	}
	var empty LagTrack
	if s := empty.Stats(); s.Polls != 0 || s.Max != 0 {
		t.Errorf("empty track: %+v", s)
	}
}
