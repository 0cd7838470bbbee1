package chstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Deleting a crawl's rows.
//
// Every table that holds rows of crawls has a crawl_id column
// (CrawlTables: the fetch log and its two rollups, the seen set, the
// frontiers, url_events, revisits, change_history, every table of the
// parser, and warc_files since a WARC file holds one crawl: migration
// 500); robots_txt (per origin) and schema_migrations hold no crawl's
// rows. The WARC files themselves are removed by the fetcher that owns
// their directory (libs/warcdir). A crawl's rows are removed with
// one mutation per table, ALTER TABLE … DELETE WHERE crawl_id = '…', which
// ClickHouse 18.16 and current releases both run: asynchronously, each
// part of the table rewritten in the background (a heavy operation on a
// big table: run on request, never on a timer for every crawl). A
// mutation applies to the parts that exist when it is created; rows
// inserted afterwards stay, and a later mutation removes them.
//
// In cluster mode the mutation runs on the replicated <table>_local
// tables ON CLUSTER (a Distributed table cannot be mutated): one replica
// of each shard takes it and replication carries it to the others. Reads
// (CrawlRows) go through the Distributed tables as every query does.

// crawlIDColumnRE finds a crawl_id column in a CREATE TABLE's columns;
// addCrawlIDRE a migration that adds one to a table.
var (
	crawlIDColumnRE = regexp.MustCompile(`(?m)^\s*crawl_id\s+String\s*,?\s*$`)
	addCrawlIDRE    = regexp.MustCompile(`^ALTER TABLE (\w+) ADD COLUMN crawl_id String\b`)
)

// CrawlTables returns, sorted, the tables of the schema (Migrations) that
// hold rows of crawls: those with a crawl_id column, created with it or
// given it later. A table added by a future migration with such a column
// is included without a change here.
func CrawlTables() []string {
	var out []string
	for _, m := range Migrations() {
		for _, stmt := range m.Statements {
			if c := createTableRE.FindStringSubmatch(stmt); c != nil && crawlIDColumnRE.MatchString(c[2]) {
				out = append(out, c[1])
			}
			if c := addCrawlIDRE.FindStringSubmatch(stmt); c != nil {
				out = append(out, c[1])
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CrawlRows returns, for every table of CrawlTables, how many rows of
// crawlID it holds now (raw rows, before merges collapse repeats; 0 when
// none), in one query.
func (s *Store) CrawlRows(ctx context.Context, crawlID string) (map[string]uint64, error) {
	tables := CrawlTables()
	parts := make([]string, len(tables))
	args := make([]any, len(tables))
	for i, t := range tables {
		parts[i] = "SELECT '" + t + "' AS tbl, count() AS n FROM " + t + " WHERE crawl_id = ?"
		args[i] = crawlID
	}
	rows, err := s.conn.Query(ctx, strings.Join(parts, " UNION ALL "), args...)
	if err != nil {
		return nil, fmt.Errorf("count rows of crawl %s: %w", crawlID, err)
	}
	defer rows.Close()
	out := make(map[string]uint64, len(tables))
	for rows.Next() {
		var (
			t string
			n uint64
		)
		if err := rows.Scan(&t, &n); err != nil {
			return nil, fmt.Errorf("scan rows of crawl %s: %w", crawlID, err)
		}
		out[t] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count rows of crawl %s: %w", crawlID, err)
	}
	return out, nil
}

// DeleteCrawlRows starts the removal of crawlID's rows from each of tables
// (names of CrawlTables): one ALTER TABLE … DELETE mutation per table,
// which returns once ClickHouse accepted it (in cluster mode, once every
// server took the ON CLUSTER statement); the rows go as the server
// rewrites the table's parts (CrawlRows and PendingCrawlDeletes follow
// it). Repeating it is harmless: a second mutation removes what the first
// left or what was inserted since, and nothing else.
func (s *Store) DeleteCrawlRows(ctx context.Context, crawlID string, tables []string) error {
	if crawlID == "" {
		return fmt.Errorf("delete crawl rows: empty crawl id")
	}
	known := CrawlTables()
	for _, t := range tables {
		if !slices.Contains(known, t) {
			return fmt.Errorf("delete rows of crawl %s: %s holds no crawl's rows", crawlID, t)
		}
	}
	for _, t := range tables {
		if err := s.conn.Exec(ctx, s.deleteCrawlStatement(t), crawlID); err != nil {
			return fmt.Errorf("delete rows of crawl %s from %s: %w", crawlID, t, err)
		}
	}
	return nil
}

// deleteCrawlStatement is the mutation that deletes the rows of the crawl
// bound to its one parameter from table.
func (s *Store) deleteCrawlStatement(table string) string {
	if s.cluster == "" {
		return "ALTER TABLE " + table + " DELETE WHERE crawl_id = ?"
	}
	return "ALTER TABLE " + s.db + "." + table + LocalSuffix + " ON CLUSTER " + s.cluster + " DELETE WHERE crawl_id = ?"
}

// PendingCrawlDeletes returns the tables (CrawlTables names) where a
// mutation deleting crawlID's rows is not done yet, as the server the
// connection talks to sees them (in cluster mode, that server's own
// shard's tables).
func (s *Store) PendingCrawlDeletes(ctx context.Context, crawlID string) ([]string, error) {
	// ClickHouse keeps a mutation's command as it formats it, the string
	// literal quoted and escaped: DELETE WHERE crawl_id = 'x'.
	quoted := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(crawlID)
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT table FROM system.mutations WHERE database = ? AND is_done = 0 AND position(command, ?) > 0",
		s.db, "crawl_id = '"+quoted+"'")
	if err != nil {
		return nil, fmt.Errorf("query pending deletes of crawl %s: %w", crawlID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, fmt.Errorf("scan pending deletes of crawl %s: %w", crawlID, err)
		}
		out = append(out, strings.TrimSuffix(t, LocalSuffix))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query pending deletes of crawl %s: %w", crawlID, err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
