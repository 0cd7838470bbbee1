package chstore

import "time"

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
}

// Frontier states (frontier_v2.state).
const (
	FrontierPending  uint8 = 0
	FrontierReleased uint8 = 1
	// FrontierCancelled marks a deferred URL of a cancelled crawl: dropped
	// (recorded in url_events as cancelled), never released.
	FrontierCancelled uint8 = 2
)

// FrontierRow is one admitted URL deferred by its host's quota, or its
// release (table frontier).
type FrontierRow struct {
	Partition    uint16
	CrawlID      string
	Host         string
	FP           uint64
	Depth        uint16
	URL          string
	ParentURL    string
	AnchorText   string
	SerpEngine   string
	DiscoveredAt time.Time
	State        uint8
	UpdatedAt    time.Time
}

// Frontier is the frontier table (frontier_v2 since migration 302; the
// table frontier of migration 301 is no longer written).
var Frontier = Table[FrontierRow]{
	Name: "frontier_v2",
	Columns: []string{"partition", "crawl_id", "host", "fp", "depth", "url", "parent_url",
		"anchor_text", "serp_engine", "discovered_at", "state", "updated_at"},
	Values: func(r FrontierRow) []any {
		return []any{r.Partition, r.CrawlID, r.Host, r.FP, r.Depth, r.URL, r.ParentURL,
			r.AnchorText, r.SerpEngine, r.DiscoveredAt, r.State, r.UpdatedAt}
	},
}

// URLEventRow is one scheduler-side terminal state of a discovered URL
// (table url_events).
type URLEventRow struct {
	CrawlID   string
	URL       string // canonical, or as received when it does not canonicalize
	URLFP     uint64
	Host      string // politeness key, "" when the URL is invalid
	Partition uint16
	State     string // duplicate, out_of_scope, budget_exhausted, invalid
	Reason    string // the scheduler's drop reason (duplicate, too_deep, invalid_url…)
	Depth     uint16
	EventTime time.Time
}

// URLEvents is the url_events table.
var URLEvents = Table[URLEventRow]{
	Name:    "url_events",
	Columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "state", "reason", "depth", "event_time"},
	Values: func(r URLEventRow) []any {
		return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.Partition, r.State, r.Reason, r.Depth, r.EventTime}
	},
}

// RevisitRow is the revisit state of one URL (table revisits).
type RevisitRow struct {
	CrawlID      string
	Partition    uint16
	URL          string
	URLFP        uint64
	Host         string
	Depth        uint16
	ETag         string
	LastModified string
	ContentFP    uint64
	IntervalS    uint32
	NextVisit    time.Time
	Changes      uint32
	Visits       uint32
	UpdatedAt    time.Time
}

// Revisits is the revisits table.
var Revisits = Table[RevisitRow]{
	Name: "revisits",
	Columns: []string{"crawl_id", "partition", "url", "url_fp", "host", "depth", "etag", "last_modified",
		"content_fp", "interval_s", "next_visit", "changes", "visits", "updated_at"},
	Values: func(r RevisitRow) []any {
		return []any{r.CrawlID, r.Partition, r.URL, r.URLFP, r.Host, r.Depth, r.ETag, r.LastModified,
			r.ContentFP, r.IntervalS, r.NextVisit, r.Changes, r.Visits, r.UpdatedAt}
	},
}

// ChangeRow is one visit of a URL under a revisit policy (table
// change_history).
type ChangeRow struct {
	CrawlID     string
	Host        string
	URLFP       uint64
	URL         string
	VisitedAt   time.Time
	Visit       uint32 // 1 for the first fetch
	Status      uint16
	NotModified uint8 // 1: 304 to a conditional request
	Changed     uint8 // 1: the content fingerprint differs from the previous visit's
	ContentFP   uint64
	IntervalS   uint32 // interval chosen after this visit
}

// ChangeHistory is the change_history table.
var ChangeHistory = Table[ChangeRow]{
	Name: "change_history",
	Columns: []string{"crawl_id", "host", "url_fp", "url", "visited_at", "visit", "status", "not_modified",
		"changed", "content_fp", "interval_s"},
	Values: func(r ChangeRow) []any {
		return []any{r.CrawlID, r.Host, r.URLFP, r.URL, r.VisitedAt, r.Visit, r.Status, r.NotModified,
			r.Changed, r.ContentFP, r.IntervalS}
	},
}
