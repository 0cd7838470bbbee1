// Package chexport streams one crawl's rows of one ClickHouse table to a
// file format: JSON lines, CSV (RFC 4180, with a header row) or Parquet
// (a typed schema per table). It is the export behind the local launcher's
// `crawl export` and the crawl-jobs API's GET /v1/crawls/{id}/export.
//
// Memory stays bounded whatever the row count: rows are read from the
// ClickHouse result set block by block (blocks of a bounded number of rows,
// at most one buffered ahead), encoded and written as they come; Parquet is
// written in row groups of at most rowGroupRows rows and about
// rowGroupBytes bytes, each flushed to the output before the next begins.
//
// Rows are read with FINAL (documents without it, and the same result:
// latest.go), so a row a redelivery inserted twice (the tables are
// ReplacingMergeTrees) is exported once, and a re-crawled document in its
// latest version. They come in the order the server reads
// them, without ORDER BY: a sort would cost the server time and memory
// that grow with the crawl (on 18.16 a million documents read in 1.1 s,
// and sorted by URL in 3-4 s). On 18.16, FINAL reads in the table's key
// order (fetch_log by host, URL and time); current releases read FINAL in
// parallel ranges, and documents come in no order. Sort downstream when
// the order matters. The queries name their columns and stay within what
// ClickHouse 18.16 and current releases accept.
//
// A documents export in CSV or Parquet reads the documents twice: first
// their extracted fields alone, for the names of its fields.NAME columns
// (fields.go), then whole.
package chexport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/libs/chexport/exportfile"
)

// The names of an export (package exportfile, which links no driver).
type (
	// Table is exportfile.Table.
	Table = exportfile.Table
	// Format is exportfile.Format.
	Format = exportfile.Format
	// Request is exportfile.Request.
	Request = exportfile.Request
	// NoRowsError is exportfile.NoRowsError.
	NoRowsError = exportfile.NoRowsError
	// Output is exportfile.Output.
	Output = exportfile.Output
)

// The tables and formats (exportfile's).
const (
	Documents = exportfile.Documents
	FetchLog  = exportfile.FetchLog
	Links     = exportfile.Links
	URLEvents = exportfile.URLEvents
	JSONL     = exportfile.JSONL
	CSV       = exportfile.CSV
	Parquet   = exportfile.Parquet
)

// Names and errors re-exported from exportfile.
var (
	Tables           = exportfile.Tables
	Formats          = exportfile.Formats
	ErrUnknownTable  = exportfile.ErrUnknownTable
	ErrUnknownFormat = exportfile.ErrUnknownFormat
	ErrNotFound      = exportfile.ErrNotFound
)

// ParseTable is exportfile.ParseTable.
func ParseTable(s string) (Table, error) { return exportfile.ParseTable(s) }

// ParseFormat is exportfile.ParseFormat.
func ParseFormat(s string) (Format, error) { return exportfile.ParseFormat(s) }

// FileName is exportfile.FileName.
func FileName(crawlID string, t Table, f Format) string { return exportfile.FileName(crawlID, t, f) }

// CreateOutput is exportfile.CreateOutput.
func CreateOutput(path string) (*Output, error) { return exportfile.CreateOutput(path) }

// Querier runs a read query; a clickhouse-go driver.Conn (chstore's
// Store.Conn, a pool of connections) is one. It must be safe for
// concurrent use: the documents export reads the documents of a batch of
// carried-over pages while it reads those pages.
type Querier interface {
	Query(ctx context.Context, query string, args ...any) (driver.Rows, error)
}

// Export writes the rows of req.CrawlID in req.Table to w in req.Format and
// returns how many it wrote. It writes nothing before it has the first row:
// a crawl without rows in the table is a *NoRowsError (ErrNotFound) and w
// stays untouched. An error after the first row leaves w with a prefix of
// the export (a Parquet file without its footer, so unreadable); an Output
// (CreateOutput) then discards it.
func Export(ctx context.Context, q Querier, req Request, w io.Writer) (int64, error) {
	t, err := ParseTable(string(req.Table))
	if err != nil {
		return 0, err
	}
	f, err := ParseFormat(string(req.Format))
	if err != nil {
		return 0, err
	}
	if req.CrawlID == "" {
		return 0, errors.New("export: crawl id must not be empty")
	}
	req.Table, req.Format = t, f
	var n int64
	switch t {
	case FetchLog:
		n, err = export(ctx, q, req, fetchLogTable, w)
	case Links:
		n, err = export(ctx, q, req, linksTable, w)
	case URLEvents:
		n, err = export(ctx, q, req, urlEventsTable, w)
	default:
		n, err = exportDocuments(ctx, q, req, w)
	}
	if err != nil {
		return n, err
	}
	if n == 0 {
		in, err := presence(ctx, q, req.CrawlID)
		if err != nil {
			return 0, err
		}
		return 0, &NoRowsError{CrawlID: req.CrawlID, Table: t, In: in}
	}
	return n, nil
}

// presence returns the tables of presenceTables where crawlID has rows.
func presence(ctx context.Context, q Querier, crawlID string) ([]string, error) {
	var in []string
	for _, table := range exportfile.PresenceTables {
		rows, err := q.Query(ctx, "SELECT crawl_id FROM "+table+" WHERE crawl_id = ? LIMIT 1", crawlID)
		if err != nil {
			return nil, fmt.Errorf("look for crawl %q in %s: %w", crawlID, table, err)
		}
		found := rows.Next()
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("look for crawl %q in %s: %w", crawlID, table, err)
		}
		if found {
			in = append(in, table)
		}
	}
	return in, nil
}

// Query settings of an export (numbers only: an 18.16 server takes no
// string setting over the native protocol).
const (
	// rowsPerBlock is the block size asked of the server for narrow
	// tables; documentRowsPerBlock for documents, whose text may be up to
	// the parser's 1 MiB (--max-text-bytes) each. The driver holds the
	// block being read and at most one more.
	rowsPerBlock         = 8192
	documentRowsPerBlock = 128
)

// export runs def's query and streams its rows to w.
func export[T any](ctx context.Context, q Querier, req Request, def tableDef[T], w io.Writer) (int64, error) {
	var enc encoder[T]
	n, err := stream(ctx, q, req, def, w, &enc,
		"SELECT "+strings.Join(def.selects, ", ")+" FROM "+string(def.name)+" FINAL WHERE crawl_id = ?", []any{req.CrawlID}, nil)
	if err != nil {
		return n, err
	}
	return n, closeEncoder(enc, req)
}

// closeEncoder writes the trailer of an export that wrote rows (enc not
// nil).
func closeEncoder[T any](enc encoder[T], req Request) error {
	if enc == nil {
		return nil
	}
	if err := enc.close(); err != nil {
		return fmt.Errorf("write %s: %w", req.Format, err)
	}
	return nil
}

// stream runs query (selecting def.selects) and encodes its rows into w
// through *enc, created with the first row (nothing is written before).
// edit, when set, changes each row before it is encoded, or skips it
// (false). It returns how many rows it encoded.
func stream[T any](ctx context.Context, q Querier, req Request, def tableDef[T], w io.Writer, enc *encoder[T],
	query string, args []any, edit func(*T) bool) (int64, error) {
	settings := clickhouse.Settings{"max_block_size": rowsPerBlock}
	if def.name == Documents {
		settings = documentSettings()
	}
	qctx, cancel := context.WithCancel(clickhouse.Context(ctx,
		clickhouse.WithSettings(settings),
		clickhouse.WithBlockBufferSize(1)))
	// Cancelled before the rows are closed: Close would otherwise read
	// the rest of an abandoned result to its end.
	defer cancel()
	rows, err := q.Query(qctx, query, args...)
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", def.name, err)
	}
	defer func() {
		cancel()
		rows.Close()
	}()
	var (
		n   int64
		row T
	)
	for rows.Next() {
		if err := def.scan(rows, &row); err != nil {
			return n, fmt.Errorf("scan %s: %w", def.name, err)
		}
		if edit != nil && !edit(&row) {
			continue
		}
		if *enc == nil {
			// Only now, with a row in hand, is anything written.
			*enc = newEncoder(req.Format, def, w)
		}
		if err := (*enc).encode(&row); err != nil {
			return n, fmt.Errorf("write %s: %w", req.Format, err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("read %s: %w", def.name, err)
	}
	return n, nil
}
