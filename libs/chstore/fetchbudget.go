package chstore

import (
	"context"
	"fmt"
	"strings"
)

// CountFetchedPages returns, for each of the given crawls, the pages its
// fetchers charged to its page budget: distinct URL fingerprints in
// fetch_log whose attempt was requested or refused by robots.txt, i.e.
// every error kind but cancelled and budget_exhausted (no request made).
// Crawls without such rows are missing from the result. The query reads
// the sort key's prefix (crawl_id).
func (s *Store) CountFetchedPages(ctx context.Context, crawlIDs []string) (map[string]int64, error) {
	out := make(map[string]int64, len(crawlIDs))
	if len(crawlIDs) == 0 {
		return out, nil
	}
	args := make([]any, len(crawlIDs))
	for i, id := range crawlIDs {
		args[i] = id
	}
	q := "SELECT crawl_id, uniqExact(url_fp) FROM fetch_log WHERE crawl_id IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(crawlIDs)), ",") +
		") AND error_kind NOT IN ('cancelled', 'budget_exhausted') GROUP BY crawl_id"
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
