package chstore

// schedulerMigrations are the schema versions 300-399, owned by the scheduler (URL terminal states, revisits, change history). Append; never edit
// an applied version.
var schedulerMigrations = []Migration{
	{
		Version: 300,
		Name:    "url_events: the scheduler's terminal states",
		Statements: []string{
			// One row per discovered URL the scheduler did not admit, with
			// the state it ended in (duplicate, out_of_scope,
			// budget_exhausted, invalid) and the detailed reason. Admitted
			// URLs are in url_seen, their fetch outcomes in fetch_log.
			// Repeats of one (crawl, URL, state, reason) collapse: a page
			// linked a thousand times is one duplicate row. Not partitioned
			// by time, so that repeats always meet.
			`CREATE TABLE IF NOT EXISTS url_events (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	partition UInt16,
	state String,
	reason String,
	depth UInt16,
	event_time DateTime
) ENGINE = ReplacingMergeTree(event_time) ORDER BY (crawl_id, url_fp, state, reason)`,
		},
	},
	{
		Version: 301,
		Name:    "frontier: admitted URLs waiting for their host's quota",
		Statements: []string{
			// An admitted URL whose host used up its admission quota waits
			// here (state 0) until the partition's pump releases it to the
			// Fetch topic and records state 1 under the same key. Readers
			// aggregate by key and keep max(state); ordered by partition
			// first so that a pump reads one contiguous range.
			`CREATE TABLE IF NOT EXISTS frontier (
	partition UInt16,
	crawl_id String,
	host String,
	fp UInt64,
	depth UInt16,
	url String,
	parent_url String,
	anchor_text String,
	discovered_at DateTime,
	state UInt8,
	updated_at DateTime
) ENGINE = ReplacingMergeTree(state) ORDER BY (partition, crawl_id, host, fp)`,
		},
	},
	{
		Version: 302,
		Name:    "frontier_v2: the frontier with the SERP engine of each URL",
		Statements: []string{
			// frontier plus serp_engine (DiscoveredURL.serp_engine, copied
			// into the released FetchRequest). A new table rather than an
			// ALTER: ClickHouse 18.16 has no ADD COLUMN IF NOT EXISTS and
			// two services migrating at once would race. State 2 marks a
			// URL of a cancelled crawl, dropped instead of released.
			`CREATE TABLE IF NOT EXISTS frontier_v2 (
	partition UInt16,
	crawl_id String,
	host String,
	fp UInt64,
	depth UInt16,
	url String,
	parent_url String,
	anchor_text String,
	serp_engine String,
	discovered_at DateTime,
	state UInt8,
	updated_at DateTime
) ENGINE = ReplacingMergeTree(state) ORDER BY (partition, crawl_id, host, fp)`,
			// Carry over what the old table holds (repeats of a racing
			// migration collapse: readers group by key).
			`INSERT INTO frontier_v2 (partition, crawl_id, host, fp, depth, url, parent_url, anchor_text, serp_engine, discovered_at, state, updated_at)
SELECT partition, crawl_id, host, fp, depth, url, parent_url, anchor_text, '', discovered_at, state, updated_at FROM frontier`,
		},
	},
	{
		Version: 303,
		Name:    "revisits and change_history: adaptive re-crawling",
		Statements: []string{
			// The revisit schedule: the latest state of every fetched URL
			// of a crawl with a revisit policy. The scheduler's revisit
			// consumer owning the partition keeps it (and a copy in
			// memory) and re-fetches a URL at next_visit with its stored
			// validators. interval_s doubles while the page is unchanged,
			// halves when it changed, within the policy's bounds.
			`CREATE TABLE IF NOT EXISTS revisits (
	crawl_id String,
	partition UInt16,
	url String,
	url_fp UInt64,
	host String,
	depth UInt16,
	etag String,
	last_modified String,
	content_fp UInt64,
	interval_s UInt32,
	next_visit DateTime,
	changes UInt32,
	visits UInt32,
	updated_at DateTime
) ENGINE = ReplacingMergeTree(updated_at) ORDER BY (partition, crawl_id, url_fp)`,
			// One row per visit of such a URL: what the revisit consumer
			// saw (status, 304, content fingerprint, changed or not) and
			// the interval it chose. Repeats of a redelivered fetch
			// outcome collapse on the key.
			`CREATE TABLE IF NOT EXISTS change_history (
	crawl_id String,
	host String,
	url_fp UInt64,
	url String,
	visited_at DateTime,
	visit UInt32,
	status UInt16,
	not_modified UInt8,
	changed UInt8,
	content_fp UInt64,
	interval_s UInt32
) ENGINE = ReplacingMergeTree ORDER BY (crawl_id, host, url_fp, visited_at, visit)`,
		},
	},
	{
		Version: 304,
		Name:    "revisits.last_visit: the fetch the state last folded in",
		Statements: []string{
			// When the fetch the row's state last learnt from was made.
			// The revisit consumer folds an outcome only when it is newer
			// than that: a redelivered outcome (a batch read again after
			// a crash or a rebalance) was counted twice before. Rows from
			// before this column read 1970: their next outcome counts.
			`ALTER TABLE revisits ADD COLUMN last_visit DateTime DEFAULT toDateTime(0)`,
		},
	},
	{
		Version: 305,
		Name:    "frontier_v2.etag, last_modified, document_crawl_id: a deferred URL of a re-crawl keeps its validators",
		Statements: []string{
			// A URL of a crawl's previous crawl (CrawlSpec.previous_crawl_id)
			// carries the validators of its last answer and the crawl whose
			// document a 304 carries over; deferred by the host quota or a
			// pause, it keeps them, so that its release still asks
			// conditionally. Empty for every other URL and for rows from
			// before. One statement each: an "already exists" (a racing
			// migration) counts as done (execIdempotent).
			`ALTER TABLE frontier_v2 ADD COLUMN etag String DEFAULT ''`,
			`ALTER TABLE frontier_v2 ADD COLUMN last_modified String DEFAULT ''`,
			`ALTER TABLE frontier_v2 ADD COLUMN document_crawl_id String DEFAULT ''`,
		},
	},
	{
		Version: 306,
		Name:    "url_events and frontier_v2 priority, priority_reason: the rank of a URL and why (best-first)",
		Statements: []string{
			// A URL's priority (libs/priority: rules, sitemap, in-links)
			// and the signals that made it ("rule+inlinks"). In
			// url_events, the priority a URL had when it was dropped (a
			// budget_exhausted URL's rank tells what a larger budget would
			// have fetched next); in frontier_v2, the priority a deferred
			// URL keeps, so that its release still carries it. 0 and ''
			// for rows from before. One statement each (execIdempotent).
			`ALTER TABLE url_events ADD COLUMN priority Int32 DEFAULT 0`,
			`ALTER TABLE url_events ADD COLUMN priority_reason String DEFAULT ''`,
			`ALTER TABLE frontier_v2 ADD COLUMN priority Int32 DEFAULT 0`,
			`ALTER TABLE frontier_v2 ADD COLUMN priority_reason String DEFAULT ''`,
		},
	},
}
