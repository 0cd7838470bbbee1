package progress

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Summary is the end-of-crawl report, read from ClickHouse.
type Summary struct {
	CrawlID   string
	Fetched   int64            // fetch_log rows
	ByStatus  map[uint16]int64 // HTTP status (0 when no response) -> rows
	ByError   map[string]int64 // error kind -> rows
	Documents int64
	// Unchanged is the fetches answered 304 (of a re-crawl: pages not
	// fetched again), Carried the documents carried over from an earlier
	// crawl by such answers (documents_carried), From that crawl (the
	// latest when there are several).
	Unchanged int64
	Carried   int64
	From      string
	Bytes     int64
	Duration  time.Duration // wall time measured by the caller (seeding to drain)
	Active    time.Duration // first to last fetch_log row (millisecond resolution)
	// Restarts is, per service process, how often it was restarted during
	// the crawl (set by the caller; nil prints nothing).
	Restarts map[string]int
	// Joined are the sites that joined the crawl's scope because a seed
	// redirected to them (its scope grants, read from the control topic
	// by the caller), in the order they joined.
	Joined []Joined
}

// Joined is one site a seed's redirect chain added to the crawl's scope.
type Joined struct {
	From, To string // the redirect: the URL that redirected and its target
	Hops     uint32 // redirects from the seed to To (1: From is the seed)
	Site     string // the host or registrable domain that joined
}

// String is the summary's line for the site, e.g. "seed http://a/
// redirected to http://b/, b joined the scope".
func (j Joined) String() string {
	from := "seed " + j.From
	if j.Hops > 1 {
		plural := "s"
		if j.Hops == 2 {
			plural = ""
		}
		from = fmt.Sprintf("%s (%d redirect%s from a seed)", j.From, j.Hops-1, plural)
	}
	return fmt.Sprintf("%s redirected to %s, %s joined the scope", from, j.To, j.Site)
}

// ReadSummary reads the summary of crawlID; duration is the crawl's wall
// time as measured by the caller.
func ReadSummary(ctx context.Context, conn driver.Conn, crawlID string, duration time.Duration) (Summary, error) {
	s := Summary{CrawlID: crawlID, ByStatus: map[uint16]int64{}, ByError: map[string]int64{}, Duration: duration}
	rows, err := conn.Query(ctx,
		"SELECT status, error_kind, count(), sum(bytes) FROM fetch_log FINAL WHERE crawl_id = ? GROUP BY status, error_kind", crawlID)
	if err != nil {
		return s, fmt.Errorf("read fetch summary: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status uint16
			kind   string
			n, b   uint64
		)
		if err := rows.Scan(&status, &kind, &n, &b); err != nil {
			return s, fmt.Errorf("scan fetch summary: %w", err)
		}
		s.Fetched += int64(n)
		s.Bytes += int64(b)
		s.ByStatus[status] += int64(n)
		if kind != "" {
			s.ByError[kind] += int64(n)
		}
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read fetch summary: %w", err)
	}
	var firstMs, lastMs uint64
	err = conn.QueryRow(ctx,
		"SELECT min(toUInt64(fetched_at) * 1000 + fetched_at_ms), max(toUInt64(fetched_at) * 1000 + fetched_at_ms) FROM fetch_log WHERE crawl_id = ?", crawlID).
		Scan(&firstMs, &lastMs)
	if err != nil {
		return s, fmt.Errorf("read fetch span: %w", err)
	}
	if s.Fetched > 0 && lastMs >= firstMs {
		s.Active = time.Duration(lastMs-firstMs) * time.Millisecond
	}
	var docs uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM documents FINAL WHERE crawl_id = ?", crawlID).Scan(&docs); err != nil {
		return s, fmt.Errorf("count documents: %w", err)
	}
	s.Documents = int64(docs)
	s.Unchanged = s.ByStatus[304]
	var carried uint64
	if err := conn.QueryRow(ctx, "SELECT count(), argMax(from_crawl, checked_at) FROM documents_carried FINAL WHERE crawl_id = ?", crawlID).
		Scan(&carried, &s.From); err != nil {
		return s, fmt.Errorf("count carried-over documents: %w", err)
	}
	s.Carried = int64(carried)
	return s, nil
}

// Print writes the summary in a human-readable form.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "crawl %s\n", s.CrawlID)
	fmt.Fprintf(w, "  fetches     %d (%.1f MiB) in %s, %.1f pages/s\n",
		s.Fetched, float64(s.Bytes)/(1<<20), s.Duration.Round(100*time.Millisecond), rate(s.Fetched, s.Duration))
	fmt.Fprintf(w, "  active      %s from first to last fetch, %.1f pages/s\n", s.Active.Round(10*time.Millisecond), rate(s.Fetched, s.Active))
	fmt.Fprintf(w, "  documents   %d\n", s.Documents)
	if s.Unchanged > 0 || s.Carried > 0 {
		fmt.Fprintf(w, "  unchanged   %d pages answered 304 (not fetched again); %d documents carried over", s.Unchanged, s.Carried)
		if s.From != "" {
			fmt.Fprintf(w, " from crawl %s", s.From)
		}
		fmt.Fprintln(w)
	}
	statuses := make([]int, 0, len(s.ByStatus))
	for st := range s.ByStatus {
		statuses = append(statuses, int(st))
	}
	sort.Ints(statuses)
	fmt.Fprint(w, "  by status  ")
	for _, st := range statuses {
		label := fmt.Sprint(st)
		if st == 0 {
			label = "none"
		}
		fmt.Fprintf(w, " %s:%d", label, s.ByStatus[uint16(st)])
	}
	fmt.Fprintln(w)
	if len(s.ByError) > 0 {
		kinds := make([]string, 0, len(s.ByError))
		for k := range s.ByError {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		fmt.Fprint(w, "  errors     ")
		for _, k := range kinds {
			fmt.Fprintf(w, " %s:%d", k, s.ByError[k])
		}
		fmt.Fprintln(w)
	}
	for _, j := range s.Joined {
		fmt.Fprintf(w, "  scope       %s\n", j)
	}
	if s.Restarts != nil {
		names := make([]string, 0, len(s.Restarts))
		for n := range s.Restarts {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprint(w, "  restarts   ")
		for _, n := range names {
			fmt.Fprintf(w, " %s:%d", n, s.Restarts[n])
		}
		fmt.Fprintln(w)
	}
}

// Rate returns fetches per second over the active span (first to last
// fetch), falling back to the wall time.
func (s Summary) Rate() float64 {
	if s.Active > 0 {
		return rate(s.Fetched, s.Active)
	}
	return rate(s.Fetched, s.Duration)
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
