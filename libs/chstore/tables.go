package chstore

import (
	"context"
	"fmt"
	"time"
)

// FetchLogRow is one fetch attempt (table fetch_log).
type FetchLogRow struct {
	CrawlID          string
	URL              string
	URLFP            uint64
	Host             string
	Partition        uint16
	Attempt          uint16
	FetchedAt        time.Time // second precision in ClickHouse
	FetchedAtMs      uint16    // millisecond part of FetchedAt, kept for ordering
	Status           uint16    // HTTP status, 0 when none
	ErrorKind        string    // "" on success; e.g. timeout, connect, dns, body_too_large, robots_denied, not_html, refused_address, redirect
	ErrorMessage     string
	Bytes            uint64
	ContentType      string
	DurationMs       uint32
	RedirectLocation string
	Depth            uint16
	Fetcher          string // instance id
}

// SeenRow is one admitted URL fingerprint of a partition (table url_seen).
type SeenRow struct {
	CrawlID   string
	Partition uint16
	FP        uint64
	URL       string
	Depth     uint16
	FirstSeen time.Time
}

// DocumentRow is one extracted document (table documents).
type DocumentRow struct {
	CrawlID     string
	URL         string
	URLFP       uint64
	Host        string
	FetchedAt   time.Time
	Status      uint16
	Title       string
	Text        string
	ContentFP   uint64
	Outlinks    uint32
	ContentType string
	Language    string
}

// Table describes how rows of type T are inserted.
type Table[T any] struct {
	Name    string
	Columns []string
	Values  func(T) []any // in Columns order
}

// The crawler's tables.
var (
	FetchLog = Table[FetchLogRow]{
		Name: "fetch_log",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "attempt",
			"fetched_at", "fetched_at_ms", "status", "error_kind", "error_message", "bytes",
			"content_type", "duration_ms", "redirect_location", "depth", "fetcher"},
		Values: func(r FetchLogRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.Partition, r.Attempt,
				r.FetchedAt, r.FetchedAtMs, r.Status, r.ErrorKind, r.ErrorMessage, r.Bytes,
				r.ContentType, r.DurationMs, r.RedirectLocation, r.Depth, r.Fetcher}
		},
	}
	URLSeen = Table[SeenRow]{
		Name:    "url_seen",
		Columns: []string{"crawl_id", "partition", "fp", "url", "depth", "first_seen"},
		Values: func(r SeenRow) []any {
			return []any{r.CrawlID, r.Partition, r.FP, r.URL, r.Depth, r.FirstSeen}
		},
	}
	Documents = Table[DocumentRow]{
		Name: "documents",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "fetched_at", "status",
			"title", "text", "content_fp", "outlinks", "content_type", "language"},
		Values: func(r DocumentRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.FetchedAt, r.Status,
				r.Title, r.Text, r.ContentFP, r.Outlinks, r.ContentType, r.Language}
		},
	}
)

// Millis returns the millisecond part of t, for FetchLogRow.FetchedAtMs
// (ClickHouse DateTime keeps whole seconds).
func Millis(t time.Time) uint16 {
	return uint16(t.Nanosecond() / int(time.Millisecond))
}

// LoadSeen streams every fingerprint stored for a partition (all crawls).
// A fingerprint inserted twice may be delivered twice until ClickHouse
// merges the duplicates; callers build a set. fn runs on the calling
// goroutine and must not block for long (the server streams meanwhile).
func (s *Store) LoadSeen(ctx context.Context, partition int, fn func(crawlID string, fp uint64)) error {
	if partition < 0 || partition > 65535 {
		return fmt.Errorf("load seen: partition %d out of range", partition)
	}
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
