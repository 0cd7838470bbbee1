package sinks

import (
	"context"
	"fmt"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Revisits is the ClickHouse revisit schedule (schedule.Store).
type Revisits struct {
	Revisits *chstore.BatchWriter[chstore.RevisitRow]
	Changes  *chstore.BatchWriter[chstore.ChangeRow]
	Store    *chstore.Store
}

// WriteRevisits implements schedule.Store.
func (s Revisits) WriteRevisits(ctx context.Context, rows ...chstore.RevisitRow) error {
	return s.Revisits.Write(ctx, rows...)
}

// WriteChanges implements schedule.Store.
func (s Revisits) WriteChanges(ctx context.Context, rows ...chstore.ChangeRow) error {
	return s.Changes.Write(ctx, rows...)
}

// LoadRevisits implements schedule.Store: the latest state of every URL of
// the partition.
func (s Revisits) LoadRevisits(ctx context.Context, partition int, fn func(chstore.RevisitRow)) error {
	// fn sees a row again when the read is retried: the schedule is keyed by URL.
	return s.Store.Read(ctx, "load revisits", func() error {
		rows, err := s.Store.Conn().Query(ctx, `SELECT crawl_id, url, url_fp, host, depth, etag, last_modified,
		content_fp, interval_s, next_visit, changes, visits, updated_at, last_visit
	FROM revisits FINAL WHERE partition = ?`, uint16(partition))
		if err != nil {
			return fmt.Errorf("query revisits: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			r := chstore.RevisitRow{Partition: uint16(partition)}
			if err := rows.Scan(&r.CrawlID, &r.URL, &r.URLFP, &r.Host, &r.Depth, &r.ETag, &r.LastModified,
				&r.ContentFP, &r.IntervalS, &r.NextVisit, &r.Changes, &r.Visits, &r.UpdatedAt, &r.LastVisit); err != nil {
				return fmt.Errorf("scan revisits: %w", err)
			}
			fn(r)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read revisits: %w", err)
		}
		return nil
	})
}
