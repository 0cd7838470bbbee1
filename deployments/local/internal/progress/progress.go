// Package progress watches a running crawl: pages fetched and errors from
// ClickHouse, records still queued from the consumer-group lags and the
// scheduler's frontier table, a one-line
// live display, drain detection, and the end-of-crawl summary.
package progress

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Groups are the services whose consumer-group lag counts as queued work.
var Groups = []string{"scheduler", "fetcher", "parser"}

// Snapshot is one poll of a crawl.
type Snapshot struct {
	Fetched int64            // requests of the crawl (fetch_status_minute; a re-inserted fetch_log row counts twice)
	Errors  int64            // of which failed (error kind other than redirect and robots_denied)
	Lags    map[string]int64 // per service group; -1 when unknown
	LagErr  error            // last error reading a lag
	// Frontier counts the crawl's URLs admitted but held in the
	// scheduler's frontier table (host quota, paused crawl): in no topic,
	// so no lag shows them.
	Frontier int64
	Elapsed  time.Duration // since the monitor started
}

// Queued returns the summed lag plus the frontier's pending URLs, or -1
// when a lag is unknown.
func (s Snapshot) Queued() int64 {
	n := s.Frontier
	for _, g := range Groups {
		l, ok := s.Lags[g]
		if !ok || l < 0 {
			return -1
		}
		n += l
	}
	return n
}

// Rate returns pages fetched per second since the start.
func (s Snapshot) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Fetched) / s.Elapsed.Seconds()
}

// Monitor polls one crawl.
type Monitor struct {
	kafka   kafkaio.Config
	offsets *kafkaio.OffsetReader // opened by the first Poll, kept: Close
	conn    driver.Conn
	crawlID string
	start   time.Time

	// The frontier count groups the crawl's whole frontier: it is read
	// when it can decide the drain (no lag) and otherwise at most every
	// frontierEvery for the display. Poll is called by one goroutine.
	frontier   int64
	frontierAt time.Time

	// Lags follows the parser behind the fetcher, a sample per poll.
	Lags LagTrack
	// maxLag is the most records each group had waiting at a poll.
	maxLag map[string]int64
}

// Stats returns the parser's lags (LagTrack.Stats) with the most records
// each group had waiting at a poll.
func (m *Monitor) Stats() LagStats {
	st := m.Lags.Stats()
	st.WaitingMax = maps.Clone(m.maxLag)
	return st
}

// frontierEvery is how stale the displayed frontier count may be while
// records are still queued in a topic.
const frontierEvery = 10 * time.Second

// NewMonitor returns a monitor of crawlID; elapsed time counts from now.
func NewMonitor(kc kafkaio.Config, conn driver.Conn, crawlID string) *Monitor {
	return &Monitor{kafka: kc, conn: conn, crawlID: crawlID, start: time.Now()}
}

// Close closes the monitor's broker connections.
func (m *Monitor) Close() {
	if m.offsets != nil {
		m.offsets.Close()
	}
}

// Poll reads the current state. Lag errors are reported in the snapshot
// (a group that has not joined yet is normal early on); a ClickHouse error
// is returned.
func (m *Monitor) Poll(ctx context.Context) (Snapshot, error) {
	s := Snapshot{Lags: make(map[string]int64, len(Groups)), Elapsed: time.Since(m.start)}
	topics := m.kafka.Topics()
	topicOf := map[string]string{"scheduler": topics.Discovered, "fetcher": topics.Fetch, "parser": topics.Fetched}
	if m.offsets == nil {
		r, err := kafkaio.NewOffsetReader(m.kafka)
		if err != nil {
			return s, fmt.Errorf("read lags: %w", err)
		}
		m.offsets = r
	}
	for _, g := range Groups {
		parts, err := m.offsets.GroupOffsets(ctx, m.kafka.GroupFor(g), topicOf[g])
		if err != nil {
			s.LagErr = fmt.Errorf("read %s lag: %w", g, err)
			s.Lags[g] = -1
			continue
		}
		var lag, produced, stored int64
		for _, p := range parts {
			lag += p.Lag()
			produced += p.End
			stored += max(p.Committed, p.First)
		}
		s.Lags[g] = lag
		if m.maxLag == nil {
			m.maxLag = make(map[string]int64, len(Groups))
		}
		m.maxLag[g] = max(m.maxLag[g], lag)
		if g == "parser" {
			m.Lags.Add(time.Now(), produced, stored)
		}
	}
	// Counted from the per-minute rollup, not from fetch_log FINAL: a
	// poll a second must not scan the whole log (a million-page crawl
	// would spend a second of ClickHouse CPU per poll). A fetch_log row
	// inserted twice (a retried insert) counts twice here; the summary
	// counts from fetch_log itself.
	var fetched, errs uint64
	err := m.conn.QueryRow(ctx,
		"SELECT sum(n), sumIf(n, error_kind NOT IN ('', 'redirect', 'robots_denied')) FROM fetch_status_minute WHERE crawl_id = ?", m.crawlID).
		Scan(&fetched, &errs)
	if err != nil {
		return s, fmt.Errorf("count fetches: %w", err)
	}
	s.Fetched, s.Errors = int64(fetched), int64(errs)
	if s.Queued() == 0 || time.Since(m.frontierAt) >= frontierEvery { // s.Frontier is 0 here: the lags alone
		var pending uint64
		err = m.conn.QueryRow(ctx, `SELECT count() FROM (
	SELECT 1 FROM frontier_v2 WHERE crawl_id = ? GROUP BY partition, host, fp HAVING max(state) = 0
)`, m.crawlID).Scan(&pending)
		if err != nil {
			return s, fmt.Errorf("count frontier: %w", err)
		}
		m.frontier, m.frontierAt = int64(pending), time.Now()
	}
	s.Frontier = m.frontier
	return s, nil
}

// Line formats a snapshot as the one-line progress display.
func (s Snapshot) Line() string {
	q := "?"
	if n := s.Queued(); n >= 0 {
		q = fmt.Sprint(n)
	}
	return fmt.Sprintf("%6.0fs  fetched %d  errors %d  queued %s  %.1f pages/s",
		s.Elapsed.Seconds(), s.Fetched, s.Errors, q, s.Rate())
}

// Display writes progress lines: rewritten in place on a terminal, one
// line per update otherwise. Its methods are safe for concurrent use.
type Display struct {
	Out io.Writer
	TTY bool

	mu   sync.Mutex
	n    int    // length of the line in place
	last string // the line in place
}

// Show writes a snapshot.
func (d *Display) Show(s Snapshot) {
	if d.Out == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	line := s.Line()
	if d.TTY {
		d.last = line
		pad := ""
		if len(line) < d.n {
			pad = strings.Repeat(" ", d.n-len(line))
		}
		fmt.Fprint(d.Out, "\r"+line+pad)
		d.n = len(line)
		return
	}
	fmt.Fprintln(d.Out, line)
}

// Note writes a line of its own (a service restarted) without breaking
// the progress line: on a terminal the line in place is cleared, the note
// written, and the progress line redrawn under it.
func (d *Display) Note(line string) {
	if d.Out == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.TTY || d.n == 0 {
		fmt.Fprintln(d.Out, line)
		return
	}
	pad := ""
	if len(line) < d.n {
		pad = strings.Repeat(" ", d.n-len(line))
	}
	fmt.Fprint(d.Out, "\r"+line+pad+"\n"+d.last)
	d.n = len(d.last)
}

// Done ends the in-place line.
func (d *Display) Done() {
	if d.Out == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.TTY && d.n > 0 {
		fmt.Fprintln(d.Out)
		d.n = 0
	}
}

// DrainConfig says when a crawl counts as drained.
type DrainConfig struct {
	Interval    time.Duration   // between polls (default 1s)
	StablePolls int             // consecutive polls with every lag 0 (default 3)
	SeederDone  <-chan struct{} // drain is only checked after it is closed; nil means already done
	IdleTimeout time.Duration   // drained without any fetch after this long past SeederDone (default 30s)
	Check       func() error    // called every poll; an error aborts (a crashed service)
	Display     *Display        // optional
}

// WaitDrained polls until the crawl is drained: the seeder finished and
// every group lag was 0 for StablePolls consecutive polls, with at least
// one fetch recorded (or IdleTimeout passed since the seeder finished).
func (m *Monitor) WaitDrained(ctx context.Context, dc DrainConfig) (Snapshot, error) {
	if dc.Interval <= 0 {
		dc.Interval = time.Second
	}
	if dc.StablePolls <= 0 {
		dc.StablePolls = 3
	}
	if dc.IdleTimeout <= 0 {
		dc.IdleTimeout = 30 * time.Second
	}
	seederDone := dc.SeederDone
	if seederDone == nil {
		c := make(chan struct{})
		close(c)
		seederDone = c
	}
	var seededAt time.Time
	stable := 0
	t := time.NewTicker(dc.Interval)
	defer t.Stop()
	var (
		last         Snapshot
		pollErrSince time.Time // when polls began to fail (zero: they answer)
	)
	for {
		if dc.Check != nil {
			if err := dc.Check(); err != nil {
				return last, err
			}
		}
		s, err := m.Poll(ctx)
		if err != nil && ctx.Err() != nil {
			return last, fmt.Errorf("wait for drain: %w", ctx.Err())
		}
		// A poll that fails (ClickHouse or the broker unavailable) is
		// said once, and its end once; the crawl waits, as the services do.
		switch {
		case err != nil && pollErrSince.IsZero():
			pollErrSince = time.Now()
			if dc.Display != nil {
				dc.Display.Note(fmt.Sprintf("progress unavailable, waiting: %v", err))
			}
		case err == nil && !pollErrSince.IsZero():
			if dc.Display != nil {
				dc.Display.Note(fmt.Sprintf("progress available again after %s", time.Since(pollErrSince).Round(time.Second)))
			}
			pollErrSince = time.Time{}
		}
		if err == nil {
			last = s
			if dc.Display != nil {
				dc.Display.Show(s)
			}
			select {
			case <-seederDone:
				if seededAt.IsZero() {
					seededAt = time.Now()
				}
				if s.Queued() == 0 {
					stable++
				} else {
					stable = 0
				}
				if stable >= dc.StablePolls && (s.Fetched > 0 || time.Since(seededAt) > dc.IdleTimeout) {
					return s, nil
				}
			default:
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("wait for drain: %w", ctx.Err())
		case <-t.C:
		}
	}
}
