package sinks

import (
	"context"
	"fmt"
	"strings"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/budget"
)

// The queries over url_seen that the budgets need.

// CountSeen returns the budget's global count: distinct fingerprints per
// crawl in url_seen over every partition.
func CountSeen(store *chstore.Store) budget.CountFunc {
	return func(ctx context.Context, crawlIDs []string) (map[string]int64, error) {
		if len(crawlIDs) == 0 {
			return map[string]int64{}, nil
		}
		args := make([]any, len(crawlIDs))
		for i, id := range crawlIDs {
			args[i] = id
		}
		q := "SELECT crawl_id, uniqExact(fp) FROM url_seen WHERE crawl_id IN (" +
			strings.TrimSuffix(strings.Repeat("?,", len(crawlIDs)), ",") + ") GROUP BY crawl_id"
		var counts map[string]int64
		err := store.Read(ctx, "count url_seen", func() error {
			rows, err := store.Conn().Query(ctx, q, args...)
			if err != nil {
				return fmt.Errorf("query url_seen counts: %w", err)
			}
			defer rows.Close()
			counts = make(map[string]int64, len(crawlIDs))
			for rows.Next() {
				var (
					id string
					n  uint64
				)
				if err := rows.Scan(&id, &n); err != nil {
					return fmt.Errorf("scan url_seen count: %w", err)
				}
				counts[id] = int64(n)
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read url_seen counts: %w", err)
			}
			return nil
		})
		return counts, err
	}
}

// CountHosts returns consume.Config.HostCounts over url_seen: the admitted URLs of
// a crawl in a partition, counted by politeness key.
func CountHosts(store *chstore.Store) func(ctx context.Context, partition int, crawlID string) (map[string]int64, error) {
	return func(ctx context.Context, partition int, crawlID string) (map[string]int64, error) {
		var counts map[string]int64
		err := store.Read(ctx, "count url_seen hosts", func() error {
			rows, err := store.Conn().Query(ctx,
				"SELECT any(url) FROM url_seen WHERE partition = ? AND crawl_id = ? GROUP BY fp", uint16(partition), crawlID)
			if err != nil {
				return fmt.Errorf("query url_seen hosts: %w", err)
			}
			defer rows.Close()
			counts = make(map[string]int64)
			for rows.Next() {
				var url string
				if err := rows.Scan(&url); err != nil {
					return fmt.Errorf("scan url_seen url: %w", err)
				}
				if key, err := kafkaio.Key(url); err == nil {
					counts[string(key)]++
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read url_seen hosts: %w", err)
			}
			return nil
		})
		return counts, err
	}
}
