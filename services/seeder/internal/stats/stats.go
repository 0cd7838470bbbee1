// Package stats is the seeder's ClickHouse adapter for crawl jobs: live
// counts of a crawl, the export of its documents and other tables, and the
// removal of a deleted crawl's rows.
package stats

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// Stats reads crawl progress from ClickHouse. Safe for concurrent use.
type Stats struct {
	store *chstore.Store
}

// New returns Stats over an open, migrated store (not closed by Stats).
func New(store *chstore.Store) *Stats { return &Stats{store: store} }

// Counts returns the crawl's counts: URLs admitted by the scheduler
// (url_seen); of those, the terminal ones (a final fetch_log row, or
// dropped from the frontier of a cancelled crawl) and the pending rest,
// split into retrying (an attempt failed, its retry scheduled) and queued
// (no attempt yet); distinct URLs fetched without error; failed fetch
// attempts (each once, however often its row was inserted; a first
// attempt the fetcher refused because the crawl's page budget was spent
// is terminal, not a failure); documents.
// Fetches of URLs never admitted do not count. The terminal states are
// those of the crawl_status analyst query (docs/analyst-queries.md),
// counted the same way: distinct fingerprints, so a redelivered row
// counts once.
func (s *Stats) Counts(ctx context.Context, crawlID string) (jobs.Counts, error) {
	var c jobs.Counts
	conn := s.store.Conn()
	if err := conn.QueryRow(ctx, "SELECT uniqExact(fp) FROM url_seen WHERE crawl_id = ?", crawlID).Scan(&c.Admitted); err != nil {
		return c, fmt.Errorf("count url_seen: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT countIf(done), countIf(NOT done), countIf(ok), sum(failed)
FROM
(
    SELECT url_fp, max(done) AS done, max(ok) AS ok, sum(failed) AS failed
    FROM
    (
        SELECT
            url_fp,
            max(final) AS done,
            max(error_kind = '') AS ok,
            uniqExactIf(fetched_at, fetched_at_ms, attempt, error_kind NOT IN ('', 'budget_exhausted')) AS failed
        FROM fetch_log
        WHERE crawl_id = ? AND url_fp IN (SELECT fp FROM url_seen WHERE crawl_id = ?)
        GROUP BY url_fp
        UNION ALL
        SELECT fp AS url_fp, toUInt8(1) AS done, toUInt8(0) AS ok, toUInt64(0) AS failed
        FROM frontier_v2
        WHERE crawl_id = ? AND state = 2 AND fp IN (SELECT fp FROM url_seen WHERE crawl_id = ?)
    )
    GROUP BY url_fp
)`, crawlID, crawlID, crawlID, crawlID).Scan(&c.Terminal, &c.Retrying, &c.Fetched, &c.Errors); err != nil {
		return c, fmt.Errorf("count fetch_log: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT uniqExact(url_fp) FROM documents WHERE crawl_id = ?", crawlID).Scan(&c.Documents); err != nil {
		return c, fmt.Errorf("count documents: %w", err)
	}
	// The fetch_log query reads url_seen after the first count did: a URL
	// admitted in between is terminal or retrying there, and admitted.
	c.Admitted = max(c.Admitted, c.Terminal+c.Retrying)
	if c.Admitted > c.Terminal {
		c.Pending = c.Admitted - c.Terminal
	}
	if c.Pending > c.Retrying {
		c.Queued = c.Pending - c.Retrying
	}
	c.Finished = c.Admitted > 0 && c.Pending == 0
	return c, nil
}

// Partitions returns the partitions of the URL topics that carry the
// crawl's admitted URLs (url_seen.partition: the scheduler partition, which
// is the host's partition on every host-keyed topic), ascending.
func (s *Stats) Partitions(ctx context.Context, crawlID string) ([]int, error) {
	rows, err := s.store.Conn().Query(ctx, "SELECT DISTINCT partition FROM url_seen WHERE crawl_id = ? ORDER BY partition", crawlID)
	if err != nil {
		return nil, fmt.Errorf("query crawl partitions: %w", err)
	}
	defer rows.Close()
	out := []int{}
	for rows.Next() {
		var p uint16
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("scan crawl partition: %w", err)
		}
		out = append(out, int(p))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read crawl partitions: %w", err)
	}
	return out, nil
}

// Documents calls fn for every document of the crawl (the latest version
// of each URL), ordered by URL, streaming from the server; it stops at the
// first error of fn. The documents a re-crawl carried over from an earlier
// crawl (documents_carried: the page answered 304) are listed with the
// earlier crawl's content, merged in URL order; a page of both (fetched in
// full again after its 304) is listed once, from the crawl's own
// documents.
//
// The documents are read without FINAL, which holds buffers and a block of
// every unmerged part at once (a crawl of a million pages asked for
// gigabytes), and sorted by URL and newest first, so that a URL's versions
// come together and the first is the latest; the sort spills to disk past
// documentSortBytes.
func (s *Stats) Documents(ctx context.Context, crawlID string, fn func(jobs.Document) error) error {
	qctx := chstore.WithSettings(ctx, map[string]int{
		"max_block_size":                 documentRowsPerBlock,
		"max_bytes_before_external_sort": documentSortBytes,
	})
	rows, err := s.store.Conn().Query(qctx, `SELECT url, host, fetched_at, status, title, text, content_type, language, outlinks, `+documentExtras+`
FROM documents WHERE crawl_id = ? ORDER BY url, fetched_at DESC`, crawlID)
	if err != nil {
		return fmt.Errorf("query documents: %w", err)
	}
	defer rows.Close()
	carried, err := s.carried(ctx, crawlID)
	if err != nil {
		return err
	}
	defer carried.close()
	next, err := carried.next(ctx)
	if err != nil {
		return err
	}
	var last string
	for rows.Next() {
		var (
			d  jobs.Document
			at time.Time
		)
		if err := rows.Scan(append([]any{&d.URL, &d.Host, &at, &d.Status, &d.Title, &d.Text, &d.ContentType, &d.Language, &d.Outlinks}, extrasOf(&d)...)...); err != nil {
			return fmt.Errorf("scan document: %w", err)
		}
		d.FetchedAt = at.UTC()
		if d.URL == last {
			continue // an earlier version
		}
		last = d.URL
		for next != nil && next.URL <= d.URL {
			if next.URL < d.URL {
				if err := fn(*next); err != nil {
					return err
				}
			}
			if next, err = carried.next(ctx); err != nil {
				return err
			}
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read documents: %w", err)
	}
	for next != nil {
		if err := fn(*next); err != nil {
			return err
		}
		if next, err = carried.next(ctx); err != nil {
			return err
		}
	}
	return nil
}

// documentExtras are the documents columns read into a jobs.Document past
// its first nine, in extrasOf's order.
const documentExtras = `json_ld, opengraph, microdata, language_detected, fields, properties`

// extrasOf are the destinations of documentExtras in d.
func extrasOf(d *jobs.Document) []any {
	return []any{(*string)(&d.JSONLD), (*string)(&d.OpenGraph), (*string)(&d.Microdata), &d.LanguageDetected,
		(*string)(&d.Fields), (*string)(&d.Properties)}
}

// carriedBatch is how many carried-over pages are resolved at once: their
// documents (text up to the parser's 1 MiB each) are in memory together.
const carriedBatch = 128

// The reads of documents: blocks of documentRowsPerBlock rows (their text
// up to the parser's 1 MiB each), and the sort by URL spilled to disk past
// documentSortBytes of the server's memory.
const (
	documentRowsPerBlock = 128
	documentSortBytes    = 256 << 20
)

// carriedDocs reads a crawl's carried-over pages in URL order and resolves
// their documents a batch at a time.
type carriedDocs struct {
	store *chstore.Store
	rows  interface {
		Next() bool
		Scan(dest ...any) error
		Err() error
		Close() error
	}
	ready []jobs.Document // resolved, in URL order
}

func (s *Stats) carried(ctx context.Context, crawlID string) (*carriedDocs, error) {
	rows, err := s.store.Conn().Query(ctx, `SELECT url, from_crawl, from_url_fp FROM documents_carried FINAL
WHERE crawl_id = ? ORDER BY url`, crawlID)
	if err != nil {
		return nil, fmt.Errorf("query documents_carried: %w", err)
	}
	return &carriedDocs{store: s.store, rows: rows}, nil
}

func (c *carriedDocs) close() { _ = c.rows.Close() }

// next returns the next carried-over document, nil when none is left. A
// page whose earlier document is gone (none was stored: not HTML) is left
// out.
func (c *carriedDocs) next(ctx context.Context) (*jobs.Document, error) {
	for len(c.ready) == 0 {
		type page struct {
			url, from string
			fp        uint64
		}
		var batch []page
		for len(batch) < carriedBatch && c.rows.Next() {
			var p page
			if err := c.rows.Scan(&p.url, &p.from, &p.fp); err != nil {
				return nil, fmt.Errorf("scan documents_carried: %w", err)
			}
			batch = append(batch, p)
		}
		if err := c.rows.Err(); err != nil {
			return nil, fmt.Errorf("read documents_carried: %w", err)
		}
		if len(batch) == 0 {
			return nil, nil
		}
		byFrom := make(map[string][]uint64)
		for _, p := range batch {
			byFrom[p.from] = append(byFrom[p.from], p.fp)
		}
		found := make(map[string]map[uint64]jobs.Document, len(byFrom))
		for from, fps := range byFrom {
			docs, err := c.lookup(ctx, from, fps)
			if err != nil {
				return nil, err
			}
			found[from] = docs
		}
		for _, p := range batch {
			if d, ok := found[p.from][p.fp]; ok {
				d.URL = p.url
				c.ready = append(c.ready, d)
			}
		}
	}
	d := c.ready[0]
	c.ready = c.ready[1:]
	return &d, nil
}

// lookup reads the documents of crawl from at fps.
func (c *carriedDocs) lookup(ctx context.Context, from string, fps []uint64) (map[uint64]jobs.Document, error) {
	in := make([]string, len(fps))
	for i, fp := range fps {
		in[i] = strconv.FormatUint(fp, 10) // numbers: inlined, they inject nothing (18.16 binds no arrays)
	}
	rows, err := c.store.Conn().Query(ctx, `SELECT url_fp, host, fetched_at, status, title, text, content_type, language, outlinks, `+documentExtras+`
FROM documents WHERE crawl_id = ? AND url_fp IN (`+strings.Join(in, ",")+`)`, from)
	if err != nil {
		return nil, fmt.Errorf("query carried-over documents of crawl %s: %w", from, err)
	}
	defer rows.Close()
	out := make(map[uint64]jobs.Document, len(fps))
	for rows.Next() {
		var (
			fp uint64
			d  jobs.Document
			at time.Time
		)
		if err := rows.Scan(append([]any{&fp, &d.Host, &at, &d.Status, &d.Title, &d.Text, &d.ContentType, &d.Language, &d.Outlinks}, extrasOf(&d)...)...); err != nil {
			return nil, fmt.Errorf("scan carried-over document: %w", err)
		}
		d.FetchedAt = at.UTC()
		if had, ok := out[fp]; !ok || had.FetchedAt.Before(d.FetchedAt) {
			out[fp] = d // the latest version, read without FINAL
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read carried-over documents of crawl %s: %w", from, err)
	}
	return out, nil
}

// Export writes the crawl's rows of one table to w in one format
// (libs/chexport): nothing before the first row, so a crawl without rows in
// the table is a *chexport.NoRowsError (chexport.ErrNotFound) with w
// untouched. It returns the rows written.
func (s *Stats) Export(ctx context.Context, req chexport.Request, w io.Writer) (int64, error) {
	return chexport.Export(ctx, s.store.Conn(), req, w)
}

// CrawlRows returns, per table holding rows of crawls
// (chstore.CrawlTables), how many rows of the crawl it still holds; tables
// without any are left out.
func (s *Stats) CrawlRows(ctx context.Context, crawlID string) (map[string]uint64, error) {
	rows, err := s.store.CrawlRows(ctx, crawlID)
	if err != nil {
		return nil, err
	}
	for t, n := range rows {
		if n == 0 {
			delete(rows, t)
		}
	}
	return rows, nil
}

// Purge starts the removal of a deleted crawl's rows: one ALTER TABLE …
// DELETE mutation for each table that still holds some and where no
// mutation deleting them is pending (a mutation rewrites the table's
// parts; a second one while the first runs would rewrite them again for
// nothing). It returns the rows each table held before, as CrawlRows does
// (empty: nothing left).
func (s *Stats) Purge(ctx context.Context, crawlID string) (map[string]uint64, error) {
	left, err := s.CrawlRows(ctx, crawlID)
	if err != nil || len(left) == 0 {
		return left, err
	}
	pending, err := s.store.PendingCrawlDeletes(ctx, crawlID)
	if err != nil {
		return left, err
	}
	var tables []string
	for t := range left {
		if !slices.Contains(pending, t) {
			tables = append(tables, t)
		}
	}
	slices.Sort(tables)
	if err := s.store.DeleteCrawlRows(ctx, crawlID, tables); err != nil {
		return left, err
	}
	return left, nil
}
