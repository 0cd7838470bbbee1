package chexport

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// The crawl's own documents are read without FINAL. FINAL merges every
// part of the table as it reads, holding a block of each: a crawl of a
// million pages of 10-30 KB, its documents in a few hundred parts that
// merges had not yet joined, asked the server for 1.86 GiB and failed,
// and the memory grows with the parts, not the rows. Read plainly, the
// server reads a few ranges at a time (documentThreads, blocks of at most
// documentRowsPerBlock rows and documentBlockBytes bytes), whatever the
// parts. The rows a redelivery or a revisit stored twice are found first,
// by their fingerprints alone (duplicates), and only the latest version of
// each is written, once, as FINAL would.
const (
	// documentThreads is how many ranges the server reads at once.
	documentThreads = 2
	// documentBlockBytes bounds a block of documents in bytes, whatever
	// the length of their text (preferred_block_size_bytes).
	documentBlockBytes = 8 << 20
	// groupSpillBytes is the memory past which the server spills the
	// duplicates query's grouping to disk: a fingerprint, a time and a
	// count per document, about 40 MiB a million documents.
	groupSpillBytes = 256 << 20
)

// documentServerMemory is the most memory a read of documents may take on
// the server (max_memory_usage): about 70 MiB are needed, two ranges of
// blocks and their read buffers, however large the crawl; past the bound
// the export fails with the server's error instead of straining it.
var documentServerMemory = 1 << 30

// documentSettings are the settings of a read of documents.
func documentSettings() clickhouse.Settings {
	return clickhouse.Settings{
		"max_block_size":             documentRowsPerBlock,
		"preferred_block_size_bytes": documentBlockBytes,
		"max_threads":                documentThreads,
		"max_memory_usage":           documentServerMemory,
	}
}

// versions holds the newest version (fetched_at) of each page of a crawl
// stored more than once.
type versions map[uint64]time.Time

// latestDocuments returns the newest version of each of the crawl's pages
// stored twice or more, usually none: an export runs while a crawl stores
// documents, and a page stored again after this query may be written
// twice, as a FINAL read on an unmerged table would.
func latestDocuments(ctx context.Context, q Querier, crawlID string) (versions, error) {
	qctx := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{
		"max_bytes_before_external_group_by": groupSpillBytes,
		"max_memory_usage":                   documentServerMemory,
	}))
	rows, err := q.Query(qctx, `SELECT url_fp, max(fetched_at) FROM documents WHERE crawl_id = ?
		GROUP BY url_fp HAVING count() > 1`, crawlID)
	if err != nil {
		return nil, fmt.Errorf("query documents stored twice: %w", err)
	}
	defer rows.Close()
	dups := make(versions)
	for rows.Next() {
		var (
			fp     uint64
			latest time.Time
		)
		if err := rows.Scan(&fp, &latest); err != nil {
			return nil, fmt.Errorf("scan documents stored twice: %w", err)
		}
		dups[fp] = latest
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read documents stored twice: %w", err)
	}
	return dups, nil
}

// keep returns the filter that keeps, of the crawl's documents read in any
// order, each page once in its latest version (fetched_at, the
// ReplacingMergeTree's version). Each read of the documents takes its own.
func (v versions) keep() func(*DocumentRow) bool {
	written := make(map[uint64]bool)
	return func(d *DocumentRow) bool {
		latest, ok := v[d.URLFP]
		if !ok {
			return true
		}
		if written[d.URLFP] || d.FetchedAt.Before(latest) {
			return false
		}
		written[d.URLFP] = true
		return true
	}
}
