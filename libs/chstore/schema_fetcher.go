package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// fetcherMigrations are the schema versions 100-199, owned by the fetcher (per-host state, retries, robots). Append; never edit
// an applied version.
var fetcherMigrations = []Migration{}

// AttemptKey names one fetch attempt of a URL in fetch_log.
type AttemptKey struct {
	Host    string // politeness key
	URLFP   uint64
	Attempt uint16
}

// RecordedAttempts returns, for the attempts of crawlID among the given
// hosts and URL fingerprints that have a fetch_log row, the time of the
// latest such row (second precision). The fetcher asks it about redelivered
// fetch requests: a recorded attempt was fetched and its outcome published
// by a previous owner of the partition. The query reads the table's sort
// key prefix (crawl_id, host, url_fp).
func (s *Store) RecordedAttempts(ctx context.Context, crawlID string, hosts []string, fps []uint64) (map[AttemptKey]time.Time, error) {
	out := make(map[AttemptKey]time.Time)
	if len(hosts) == 0 || len(fps) == 0 {
		return out, nil
	}
	args := make([]any, 0, 1+len(hosts))
	args = append(args, crawlID)
	for _, h := range hosts {
		args = append(args, h)
	}
	// Fingerprints are numbers: inlined, they cannot inject anything, and
	// 18.16 binds no array parameters.
	var in strings.Builder
	for i, fp := range fps {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "%d", fp)
	}
	q := "SELECT host, url_fp, attempt, max(fetched_at) FROM fetch_log WHERE crawl_id = ? AND host IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(hosts)), ",") + ") AND url_fp IN (" + in.String() +
		") GROUP BY host, url_fp, attempt"
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query recorded attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k  AttemptKey
			at time.Time
		)
		if err := rows.Scan(&k.Host, &k.URLFP, &k.Attempt, &at); err != nil {
			return nil, fmt.Errorf("scan recorded attempt: %w", err)
		}
		out[k] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recorded attempts: %w", err)
	}
	return out, nil
}
