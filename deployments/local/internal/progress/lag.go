package progress

import (
	"slices"
	"sync"
	"time"
)

// LagTrack follows how far the stored documents trail the fetched pages:
// per poll, the records produced to the fetched-pages topic (the fetcher's
// pages) and those the parser committed (stored: the parser commits a
// batch once its documents are inserted). Safe for concurrent use.
type LagTrack struct {
	mu      sync.Mutex
	samples []lagSample
}

type lagSample struct {
	at               time.Time
	produced, stored int64
}

// Add records one poll.
func (l *LagTrack) Add(at time.Time, produced, stored int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if produced <= 0 && len(l.samples) == 0 {
		return // nothing fetched yet
	}
	l.samples = append(l.samples, lagSample{at: at, produced: produced, stored: min(stored, produced)})
}

// LagStats are the lags of a crawl, over its polls from the first page
// fetched.
type LagStats struct {
	Polls int
	// Seconds: at each poll, how long ago the fetcher had produced the
	// page the parser stored last (the pages taken in the order fetched).
	P50, P99, Max time.Duration
	// Records waiting for the parser at each poll.
	RecordsP50, RecordsP99, RecordsMax int64
	// StoredByQuarter are the pages stored in each quarter of the time
	// from the first poll to the last.
	StoredByQuarter [4]int64
	// WaitingMax is the most records each group (Groups) had waiting on
	// its topic at a poll (Monitor.Stats): the scheduler's are links
	// discovered and not decided yet.
	WaitingMax map[string]int64 `json:",omitempty"`
}

// Stats returns the lags recorded so far.
func (l *LagTrack) Stats() LagStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.samples
	st := LagStats{Polls: len(s)}
	if len(s) == 0 {
		return st
	}
	secs := make([]time.Duration, len(s))
	recs := make([]int64, len(s))
	j := 0 // the first poll whose produced count reached the stored one
	for i, x := range s {
		for j < i && s[j].produced < x.stored {
			j++
		}
		if x.stored < x.produced {
			secs[i] = x.at.Sub(s[j].at)
		} // else nothing waits: no lag, however long ago the last page was fetched (a fetcher paused)
		recs[i] = x.produced - x.stored
	}
	slices.Sort(secs)
	slices.Sort(recs)
	st.P50, st.P99, st.Max = secs[len(secs)/2], secs[len(secs)*99/100], secs[len(secs)-1]
	st.RecordsP50, st.RecordsP99, st.RecordsMax = recs[len(recs)/2], recs[len(recs)*99/100], recs[len(recs)-1]
	first, last := s[0].at, s[len(s)-1].at
	span := last.Sub(first)
	if span <= 0 {
		return st
	}
	var prev int64
	for q := range 4 {
		end := first.Add(span * time.Duration(q+1) / 4)
		at := prev
		for _, x := range s {
			if !x.at.After(end) {
				at = x.stored
			}
		}
		st.StoredByQuarter[q] = at - prev
		prev = at
	}
	return st
}
