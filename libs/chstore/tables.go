package chstore

import (
	"context"
	"fmt"
	"strings"
)

// LoadSeen streams every fingerprint stored for a partition, of every
// crawl but those in skip (the retired crawls, whose URLs no scheduler
// admits any more).
// A fingerprint inserted twice may be delivered twice until ClickHouse
// merges the duplicates, or when a read that failed part-way (a replica
// gone) is run again; callers build a set. fn runs on the calling
// goroutine and must not block for long (the server streams meanwhile).
func (s *Store) LoadSeen(ctx context.Context, partition int, skip []string, fn func(crawlID string, fp uint64)) error {
	if partition < 0 || partition > 65535 {
		return fmt.Errorf("load seen: partition %d out of range", partition)
	}
	return s.Read(ctx, "load seen", func() error { return s.loadSeen(ctx, partition, skip, fn) })
}

// LoadSeenCrawl streams the fingerprints of one crawl in a partition: the
// seen set of a crawl that LoadSeen left out and that runs again.
func (s *Store) LoadSeenCrawl(ctx context.Context, partition int, crawlID string, fn func(fp uint64)) error {
	if partition < 0 || partition > 65535 {
		return fmt.Errorf("load seen: partition %d out of range", partition)
	}
	return s.Read(ctx, "load seen", func() error {
		rows, err := s.conn.Query(ctx, "SELECT fp FROM url_seen WHERE partition = ? AND crawl_id = ?", uint16(partition), crawlID)
		if err != nil {
			return fmt.Errorf("query url_seen partition %d crawl %s: %w", partition, crawlID, err)
		}
		defer rows.Close()
		var fp uint64
		for rows.Next() {
			if err := rows.Scan(&fp); err != nil {
				return fmt.Errorf("scan url_seen: %w", err)
			}
			fn(fp)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read url_seen partition %d crawl %s: %w", partition, crawlID, err)
		}
		return nil
	})
}

func (s *Store) loadSeen(ctx context.Context, partition int, skip []string, fn func(crawlID string, fp uint64)) error {
	query, args := "SELECT crawl_id, fp FROM url_seen WHERE partition = ?", []any{uint16(partition)}
	if len(skip) > 0 {
		query += " AND crawl_id NOT IN (?" + strings.Repeat(", ?", len(skip)-1) + ")"
		for _, id := range skip {
			args = append(args, id)
		}
	}
	rows, err := s.conn.Query(ctx, query, args...)
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
