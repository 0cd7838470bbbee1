// Package exportfile names what an export of a crawl is — one table of
// the crawl in one file format — the file name and media type it is
// offered under, the errors of a request, and the output file it is
// written to. It links neither the ClickHouse driver nor a Parquet
// library, so that a client (trawlctl, the crawl-jobs API's types) can use
// it; libs/chexport, the exporter, re-exports every name.
package exportfile

import (
	"errors"
	"fmt"
	"strings"
)

// Table names an exportable table.
type Table string

// The exportable tables.
const (
	Documents Table = "documents"  // extracted documents, the latest version of each URL
	FetchLog  Table = "fetch_log"  // one row per fetch attempt
	Links     Table = "links"      // the link graph (kept when the parser runs with --store-links)
	URLEvents Table = "url_events" // discovered URLs the scheduler did not admit, and why
)

// Format names an output format.
type Format string

// The output formats.
const (
	JSONL   Format = "jsonl"   // one JSON object per line
	CSV     Format = "csv"     // RFC 4180: a header row, CRLF line ends, fields quoted when needed
	Parquet Format = "parquet" // typed columns, Snappy-compressed, bounded row groups
)

// Tables and Formats list the allowed values, defaults first.
var (
	Tables  = []Table{Documents, FetchLog, Links, URLEvents}
	Formats = []Format{JSONL, CSV, Parquet}
)

// ErrUnknownTable and ErrUnknownFormat wrap a table or format name that is
// not one of Tables or Formats; the message names the allowed values.
var (
	ErrUnknownTable  = errors.New("unknown table")
	ErrUnknownFormat = errors.New("unknown format")
)

// ErrNotFound is matched (errors.Is) by a *NoRowsError.
var ErrNotFound = errors.New("crawl not found")

// NoRowsError reports a crawl with no rows in the exported table. An
// exporter returns it before writing anything, so that no empty file is
// left behind.
type NoRowsError struct {
	CrawlID string
	Table   Table
	// In lists the tables where the crawl has rows; empty when the crawl
	// is unknown to this database.
	In []string
}

func (e *NoRowsError) Error() string {
	if len(e.In) == 0 {
		return fmt.Sprintf("crawl %q not found: no rows of it in %s", e.CrawlID, strings.Join(PresenceTables, ", "))
	}
	msg := fmt.Sprintf("crawl %q has no rows in %s (it has rows in %s)", e.CrawlID, e.Table, strings.Join(e.In, ", "))
	if hint := emptyHints[e.Table]; hint != "" {
		msg += ": " + hint
	}
	return msg
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NoRowsError) Is(target error) bool { return target == ErrNotFound }

// emptyHints say why a known crawl may have no rows in a table.
var emptyHints = map[Table]string{
	Documents: "no fetched page has been parsed into a document yet",
	FetchLog:  "nothing has been fetched yet",
	Links:     "the link graph is kept only when the parser runs with --store-links (the launcher's --store-links or --console)",
	URLEvents: "the scheduler has dropped no discovered URL",
}

// PresenceTables are the tables an exporter asks whether a crawl exists
// at all (NoRowsError.In lists those that have its rows).
var PresenceTables = []string{"url_seen", "fetch_log", "documents", "links", "url_events"}

// ParseTable returns the table named s; "" is Documents.
func ParseTable(s string) (Table, error) {
	if s == "" {
		return Documents, nil
	}
	for _, t := range Tables {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownTable, s, join(Tables))
}

// ParseFormat returns the format named s; "" is JSONL.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return JSONL, nil
	}
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownFormat, s, join(Formats))
}

func join[S ~string](vs []S) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}

// ContentType is the media type of f for an HTTP response.
func (f Format) ContentType() string {
	switch f {
	case CSV:
		return "text/csv; charset=utf-8; header=present"
	case Parquet:
		return "application/vnd.apache.parquet"
	default:
		return "application/x-ndjson"
	}
}

// FileName is the file name an export of crawlID's table in f is offered
// under: <crawl id>-<table>.<format>.
func FileName(crawlID string, t Table, f Format) string {
	return crawlID + "-" + string(t) + "." + string(f)
}

// Request is what to export. Zero Table and Format are Documents and JSONL.
type Request struct {
	CrawlID string
	Table   Table
	Format  Format
}
