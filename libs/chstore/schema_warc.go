package chstore

// warcMigrations: the fetcher's WARC archive (--warc-dir). Version 204
// follows 203 (fetch_log.final); both extend fetch_log, numbered after the
// parser's 200-202 (kept: see Migrations); the archive's next migrations
// take 500-599. Append; never edit an applied version.
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
}
