package chexport

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// A crawl that re-crawled an earlier one (CrawlSpec.previous_crawl_id)
// holds the pages found unchanged (a 304) in documents_carried, not in
// documents: their text is the documents row of the crawl that last
// fetched them in full (from_crawl, from_url_fp). The documents export
// writes the crawl's own documents, then the carried-over ones, each with
// the crawl's id and fingerprint and the earlier row's content (its
// fetched_at is when that text was fetched). A page fetched in full again
// later in the same crawl (a revisit) is exported once, from documents.

// carriedBatch is how many carried-over pages are looked up at once: a
// batch's documents are in memory together (their text up to the
// parser's 1 MiB each, as a block of documentRowsPerBlock).
const carriedBatch = documentRowsPerBlock

// carriedPage is one row of documents_carried.
type carriedPage struct {
	url       string
	urlFP     uint64
	fromCrawl string
	fromFP    uint64
}

// exportDocuments writes the crawl's documents, its own and those it
// carried over; in CSV and Parquet after a first pass that finds their
// field names (fields.go).
func exportDocuments(ctx context.Context, q Querier, req Request, w io.Writer) (int64, error) {
	dups, err := latestDocuments(ctx, q, req.CrawlID)
	if err != nil {
		return 0, err
	}
	def := documentsTable
	if req.Format != JSONL {
		scan := newFieldScan()
		var enc encoder[DocumentRow] = scan
		if _, err := documentRows(ctx, q, req, documentFieldsTable, "fields != ''", io.Discard, &enc, dups); err != nil {
			return 0, fmt.Errorf("field names: %w", err)
		}
		if err := scan.close(); err != nil {
			return 0, err
		}
		def = documentsDef(scan.fields())
	}
	var enc encoder[DocumentRow]
	n, err := documentRows(ctx, q, req, def, "", w, &enc, dups)
	if err != nil {
		return n, err
	}
	return n, closeEncoder(enc, req)
}

// documentRows reads the columns of def of the crawl's documents, its own
// (those that match where too, when set) in their latest versions by dups,
// then those it carried over, and encodes them into w through *enc
// (created with the first row when nil).
func documentRows(ctx context.Context, q Querier, req Request, def tableDef[DocumentRow], where string, w io.Writer,
	enc *encoder[DocumentRow], dups versions) (int64, error) {
	query := "SELECT " + strings.Join(def.selects, ", ") + " FROM documents WHERE crawl_id = ?"
	if where != "" {
		query += " AND " + where
	}
	n, err := stream(ctx, q, req, def, w, enc, query, []any{req.CrawlID}, dups.keep())
	if err != nil {
		return n, err
	}
	m, err := exportCarried(ctx, q, req, def, w, enc)
	return n + m, err
}

// exportCarried streams the crawl's carried-over pages and writes the
// documents they point at, a batch at a time.
func exportCarried(ctx context.Context, q Querier, req Request, def tableDef[DocumentRow], w io.Writer, enc *encoder[DocumentRow]) (int64, error) {
	qctx, cancel := context.WithCancel(clickhouse.Context(ctx,
		clickhouse.WithSettings(clickhouse.Settings{"max_block_size": rowsPerBlock}),
		clickhouse.WithBlockBufferSize(1)))
	defer cancel()
	rows, err := q.Query(qctx, "SELECT url, url_fp, from_crawl, from_url_fp FROM documents_carried FINAL WHERE crawl_id = ?", req.CrawlID)
	if err != nil {
		return 0, fmt.Errorf("query documents_carried: %w", err)
	}
	defer func() {
		cancel()
		rows.Close()
	}()
	var (
		n     int64
		batch []carriedPage
	)
	flush := func() error {
		m, err := carriedDocuments(ctx, q, req, def, w, enc, batch)
		n += m
		batch = batch[:0]
		return err
	}
	for rows.Next() {
		var p carriedPage
		if err := rows.Scan(&p.url, &p.urlFP, &p.fromCrawl, &p.fromFP); err != nil {
			return n, fmt.Errorf("scan documents_carried: %w", err)
		}
		batch = append(batch, p)
		if len(batch) == carriedBatch {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("read documents_carried: %w", err)
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return n, err
		}
	}
	return n, nil
}

// carriedDocuments writes the documents of one batch of carried-over
// pages: one read of the crawl's own documents among them (exported
// already), one per crawl they come from.
func carriedDocuments(ctx context.Context, q Querier, req Request, def tableDef[DocumentRow], w io.Writer, enc *encoder[DocumentRow],
	batch []carriedPage) (int64, error) {
	own, err := ownDocuments(ctx, q, req.CrawlID, batch)
	if err != nil {
		return 0, err
	}
	byFrom := make(map[string]map[uint64]carriedPage)
	var order []string
	for _, p := range batch {
		if own[p.urlFP] {
			continue
		}
		if byFrom[p.fromCrawl] == nil {
			byFrom[p.fromCrawl] = make(map[uint64]carriedPage)
			order = append(order, p.fromCrawl)
		}
		byFrom[p.fromCrawl][p.fromFP] = p
	}
	var n int64
	for _, from := range order {
		pages := byFrom[from]
		fps := make([]uint64, 0, len(pages))
		for fp := range pages {
			fps = append(fps, fp)
		}
		// Read plainly (latest.go), the batch's latest versions kept.
		latest := make(map[uint64]DocumentRow, len(pages))
		var none encoder[DocumentRow]
		_, err := stream(ctx, q, req, def, io.Discard, &none,
			"SELECT "+strings.Join(def.selects, ", ")+" FROM documents WHERE crawl_id = ? AND url_fp IN ("+numbers(fps)+")",
			[]any{from}, func(d *DocumentRow) bool {
				if had, ok := latest[d.URLFP]; !ok || had.FetchedAt.Before(d.FetchedAt) {
					latest[d.URLFP] = *d
				}
				return false
			})
		if err != nil {
			return n, fmt.Errorf("carried-over documents from crawl %s: %w", from, err)
		}
		for _, fp := range fps {
			d, ok := latest[fp]
			if !ok {
				continue
			}
			p := pages[fp]
			d.CrawlID, d.URL, d.URLFP = req.CrawlID, p.url, p.urlFP
			if *enc == nil {
				*enc = newEncoder(req.Format, def, w)
			}
			if err := (*enc).encode(&d); err != nil {
				return n, fmt.Errorf("write %s: %w", req.Format, err)
			}
			n++
		}
	}
	return n, nil
}

// ownDocuments returns which of the batch's pages the crawl has a
// documents row of (fetched in full again after the 304).
func ownDocuments(ctx context.Context, q Querier, crawlID string, batch []carriedPage) (map[uint64]bool, error) {
	fps := make([]uint64, len(batch))
	for i, p := range batch {
		fps[i] = p.urlFP
	}
	rows, err := q.Query(ctx, "SELECT url_fp FROM documents WHERE crawl_id = ? AND url_fp IN ("+numbers(fps)+")", crawlID)
	if err != nil {
		return nil, fmt.Errorf("query documents of carried-over pages: %w", err)
	}
	defer rows.Close()
	own := make(map[uint64]bool)
	for rows.Next() {
		var fp uint64
		if err := rows.Scan(&fp); err != nil {
			return nil, fmt.Errorf("scan documents of carried-over pages: %w", err)
		}
		own[fp] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read documents of carried-over pages: %w", err)
	}
	return own, nil
}

// numbers is fps as a SQL list. Inlined, numbers cannot inject anything,
// and 18.16 binds no array parameters.
func numbers(fps []uint64) string {
	var b strings.Builder
	for i, fp := range fps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d", fp)
	}
	return b.String()
}
