package chstore

import (
	"context"
	"fmt"
	"strings"
)

// parserMigrations are the schema versions 200-299, owned by the parser (dropped links, duplicates, sitemaps). Append; never edit
// an applied version.
var parserMigrations = []Migration{
	{
		Version: 200,
		Name:    "document_meta, content_seen, links_dropped",
		Statements: []string{
			// What the parser keeps of a page beyond the documents row
			// (joined on crawl_id, url_fp). A separate table rather than
			// ALTER TABLE documents: 18.16 has no ADD COLUMN IF NOT EXISTS,
			// and migrations must be idempotent when services race.
			`CREATE TABLE IF NOT EXISTS document_meta (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	fetched_at DateTime,
	description String,
	canonical_url String,
	simhash UInt64,
	content_fp UInt64,
	is_duplicate UInt8,
	duplicate_of String,
	is_detail UInt8,
	text_truncated UInt8,
	depth UInt16
) ENGINE = ReplacingMergeTree(fetched_at) ORDER BY (crawl_id, url_fp)`,
			// The first URL seen with each content fingerprint of a crawl.
			// Keyed by URL too, so a redelivered insert collapses while two
			// parsers racing on one content keep both (the earliest wins).
			`CREATE TABLE IF NOT EXISTS content_seen (
	crawl_id String,
	content_fp UInt64,
	url String,
	first_seen DateTime
) ENGINE = ReplacingMergeTree ORDER BY (crawl_id, content_fp, url)`,
			// Links the parser did not publish, per crawl, host of the page,
			// reason and minute. Summed on merge: query with sum(n).
			`CREATE TABLE IF NOT EXISTS links_dropped (
	crawl_id String,
	host String,
	reason String,
	minute DateTime,
	n UInt64
) ENGINE = SummingMergeTree(n) PARTITION BY toYYYYMM(minute) ORDER BY (crawl_id, host, reason, minute)`,
		},
	},
}

// SeenContent returns, for those of fps already recorded in content_seen
// for a crawl, the URL first seen with each (the earliest; ties broken by
// the smaller URL).
func (s *Store) SeenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	out := make(map[uint64]string)
	if len(fps) == 0 {
		return out, nil
	}
	// The fingerprints are numbers: inlined, they cannot inject anything,
	// and 18.16 binds no array parameters.
	var in strings.Builder
	for i, fp := range fps {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "%d", fp)
	}
	rows, err := s.conn.Query(ctx, "SELECT content_fp, argMin(url, (first_seen, url)) FROM content_seen WHERE crawl_id = ? AND content_fp IN ("+
		in.String()+") GROUP BY content_fp", crawlID)
	if err != nil {
		return nil, fmt.Errorf("query content_seen: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			fp  uint64
			url string
		)
		if err := rows.Scan(&fp, &url); err != nil {
			return nil, fmt.Errorf("scan content_seen: %w", err)
		}
		out[fp] = url
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read content_seen: %w", err)
	}
	return out, nil
}
