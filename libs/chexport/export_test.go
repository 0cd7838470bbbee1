package chexport

import (
	"context"
	"io"
	"strings"
)

// DocumentServerMemory lets a test lower the server memory bound of a
// documents read.
var DocumentServerMemory = &documentServerMemory

// ExportFinalForTest reads a crawl's documents with FINAL, as the export
// did before, under the same settings, and discards them: a test's
// measure of what the plain read saves.
func ExportFinalForTest(ctx context.Context, q Querier, crawlID string) (int64, error) {
	var enc encoder[DocumentRow]
	return stream(ctx, q, Request{CrawlID: crawlID, Format: JSONL}, documentsTable, io.Discard, &enc,
		"SELECT "+strings.Join(documentsTable.selects, ", ")+" FROM documents FINAL WHERE crawl_id = ?", []any{crawlID}, nil)
}

// FieldNamesForTest runs a CSV or Parquet documents export's first pass
// alone: the field columns it finds (without their prefix) and which of
// them are numbers.
func FieldNamesForTest(ctx context.Context, q Querier, crawlID string) ([]string, []bool, error) {
	dups, err := latestDocuments(ctx, q, crawlID)
	if err != nil {
		return nil, nil, err
	}
	scan := newFieldScan()
	var enc encoder[DocumentRow] = scan
	req := Request{CrawlID: crawlID, Table: Documents, Format: CSV}
	if _, err := documentRows(ctx, q, req, documentFieldsTable, "fields != ''", io.Discard, &enc, dups); err != nil {
		return nil, nil, err
	}
	fs := scan.fields()
	return fs.names, fs.number, scan.close()
}
