package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// CountFetchedPages returns, for each of the given crawls, the pages its
// fetchers charged to its page budget before the given time: distinct URL
// fingerprints in fetch_log with an attempt started before it (fetched_at
// and fetched_at_ms) that was requested or refused by robots.txt, i.e.
// every error kind but cancelled and budget_exhausted (no request made).
// A fetcher adds what it charged since that time itself, so nothing is
// counted twice. Crawls without such rows are missing from the result.
// The query reads the sort key's prefix (crawl_id).
func (s *Store) CountFetchedPages(ctx context.Context, crawlIDs []string, before time.Time) (map[string]int64, error) {
	if len(crawlIDs) == 0 {
		return make(map[string]int64), nil
	}
	var out map[string]int64
	err := s.Read(ctx, "count fetched pages", func() error {
		var err error
		out, err = s.countFetchedPages(ctx, crawlIDs, before)
		return err
	})
	return out, err
}

func (s *Store) countFetchedPages(ctx context.Context, crawlIDs []string, before time.Time) (map[string]int64, error) {
	out := make(map[string]int64, len(crawlIDs))
	args := make([]any, 0, len(crawlIDs)+1)
	for _, id := range crawlIDs {
		args = append(args, id)
	}
	args = append(args, before.UnixMilli())
	q := "SELECT crawl_id, uniqExact(url_fp) FROM fetch_log WHERE crawl_id IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(crawlIDs)), ",") +
		") AND error_kind NOT IN ('cancelled', 'budget_exhausted')" +
		" AND toInt64(toUnixTimestamp(fetched_at)) * 1000 + fetched_at_ms < ? GROUP BY crawl_id"
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("count fetched pages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			n  uint64
		)
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("scan fetched pages: %w", err)
		}
		out[id] = int64(n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read fetched pages: %w", err)
	}
	return out, nil
}
