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
}

// Frontier states (frontier.state).
const (
	FrontierPending  uint8 = 0
	FrontierReleased uint8 = 1
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
	DiscoveredAt time.Time
	State        uint8
	UpdatedAt    time.Time
}

// Frontier is the frontier table.
var Frontier = Table[FrontierRow]{
	Name: "frontier",
	Columns: []string{"partition", "crawl_id", "host", "fp", "depth", "url", "parent_url",
		"anchor_text", "discovered_at", "state", "updated_at"},
	Values: func(r FrontierRow) []any {
		return []any{r.Partition, r.CrawlID, r.Host, r.FP, r.Depth, r.URL, r.ParentURL,
			r.AnchorText, r.DiscoveredAt, r.State, r.UpdatedAt}
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
