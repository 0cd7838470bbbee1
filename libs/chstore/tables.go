package chstore

import (
	"context"
	"fmt"
)

// LoadSeen streams every fingerprint stored for a partition (all crawls).
// A fingerprint inserted twice may be delivered twice until ClickHouse
// merges the duplicates, or when a read that failed part-way (a replica
// gone) is run again; callers build a set. fn runs on the calling
// goroutine and must not block for long (the server streams meanwhile).
func (s *Store) LoadSeen(ctx context.Context, partition int, fn func(crawlID string, fp uint64)) error {
	if partition < 0 || partition > 65535 {
		return fmt.Errorf("load seen: partition %d out of range", partition)
	}
	return s.read(ctx, "load seen", func() error { return s.loadSeen(ctx, partition, fn) })
}

func (s *Store) loadSeen(ctx context.Context, partition int, fn func(crawlID string, fp uint64)) error {
	rows, err := s.conn.Query(ctx, "SELECT crawl_id, fp FROM url_seen WHERE partition = ?", uint16(partition))
	if err != nil {
		return fmt.Errorf("query url_seen partition %d: %w", partition, err)
	}
	defer rows.Close()
	var (
		crawlID string
		fp      uint64
	)
	for rows.Next() {
		if err := rows.Scan(&crawlID, &fp); err != nil {
			return fmt.Errorf("scan url_seen: %w", err)
		}
		fn(crawlID, fp)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read url_seen partition %d: %w", partition, err)
	}
	return nil
}
