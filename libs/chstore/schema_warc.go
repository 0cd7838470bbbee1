package chstore

// warcMigrations: the fetcher's WARC archive (--warc-dir). Version 204
// follows 203 (fetch_log.final); both extend fetch_log, numbered after the
// parser's 200-202 (kept: see Migrations); the archive's next migrations
// take 500-599 (500: warc_files.crawl_id). Append; never edit an applied version.
var warcMigrations = []Migration{
	{
		Version: 204,
		Name:    "warc_files, fetch_log.warc_file and warc_offset: where each response is archived",
		Statements: []string{
			// One row per closed WARC file. A file listed twice (its
			// listing repeated after a crash, a recovered file) collapses
			// on its name; the later closing wins.
			`CREATE TABLE IF NOT EXISTS warc_files (
	file String,
	dir String,
	fetcher String,
	opened_at DateTime,
	closed_at DateTime,
	bytes UInt64,
	records UInt32,
	responses UInt32,
	revisits UInt32,
	recovered UInt8
) ENGINE = ReplacingMergeTree(closed_at) ORDER BY file`,
			// 18.16 has no ADD COLUMN IF NOT EXISTS: a column already
			// there counts as done (execIdempotent).
			`ALTER TABLE fetch_log ADD COLUMN warc_file String DEFAULT ''`,
			`ALTER TABLE fetch_log ADD COLUMN warc_offset UInt64 DEFAULT 0`,
		},
	},
	{
		Version: 500,
		Name:    "warc_files.crawl_id: a file holds one crawl's records, deleted with the crawl",
		Statements: []string{
			// Files closed before a file held one crawl keep '' (they may
			// mix crawls). With the column, warc_files is one of
			// CrawlTables: deleting a crawl deletes its files' rows.
			`ALTER TABLE warc_files ADD COLUMN crawl_id String DEFAULT ''`,
		},
	},
}
