// Package rows holds the row types of the crawler's ClickHouse tables,
// their column lists and the schema constants that code deciding what to
// write needs, apart from the driver: a package that builds rows (the
// fetcher's outcome, the scheduler's revisit policy) imports this one and
// does not link the ClickHouse driver. libs/chstore inserts and queries
// them and re-exports every name here.
package rows

import (
	"cmp"
	"strings"
	"time"
	"unsafe"
)

// FetchLogRow is one fetch attempt (table fetch_log).
type FetchLogRow struct {
	CrawlID          string
	URL              string
	URLFP            uint64
	Host             string
	Partition        uint16
	Attempt          uint16
	FetchedAt        time.Time // second precision in ClickHouse
	FetchedAtMs      uint16    // millisecond part of FetchedAt, kept for ordering
	Status           uint16    // HTTP status, 0 when none
	ErrorKind        string    // "" when an answer arrived; otherwise a failure.Kind of the fetcher: timeout, connect, dns, body_too_large, robots_denied, refused_address, redirect, …
	ErrorMessage     string
	Bytes            uint64
	ContentType      string
	WarcFile         string // WARC file (warc_files.file) of the response/revisit/resource record; "" when none (migration 204)
	WarcOffset       uint64 // offset of that record's gzip member in WarcFile
	DurationMs       uint32
	RedirectLocation string
	Depth            uint16
	Fetcher          string // instance id
	// Final: no further attempt of this request will follow (it ended
	// fetched, failed for good, retries exhausted, robots-denied,
	// redirected, cancelled); false when the fetcher scheduled a retry
	// (FetchedPage.will_retry). Column final, migration 203.
	Final bool
	// ETag and LastModified are the validators of the answer (of a 304:
	// those the request sent, unless it gave new ones), asked again by
	// the next crawl of the same sites (CrawlSpec.previous_crawl_id).
	// Columns etag and last_modified, migration 101.
	ETag         string
	LastModified string
	// Priority is the request's priority when it was fetched
	// (FetchRequest.priority, libs/priority) and PriorityReason the
	// signals that made it. Columns priority and priority_reason,
	// migration 102.
	Priority       int32
	PriorityReason string
}

// SeenRow is one admitted URL fingerprint of a partition (table url_seen).
type SeenRow struct {
	CrawlID   string
	Partition uint16
	FP        uint64
	URL       string
	Depth     uint16
	FirstSeen time.Time
}

// DocumentRow is one extracted document (table documents).
type DocumentRow struct {
	CrawlID     string
	URL         string
	URLFP       uint64
	Host        string
	FetchedAt   time.Time
	Status      uint16
	Title       string
	Text        string
	ContentFP   uint64
	Outlinks    uint32
	ContentType string
	Language    string
	JSONLD      string // the page's JSON-LD items as one JSON array, "" when none
	OpenGraph   string // its OpenGraph and Twitter card properties as one JSON object, "" when none
	// LanguageDetected is the ISO 639-1 code of the language of the
	// page's text (services/parser/internal/langdetect), "" when unknown.
	LanguageDetected string
	Microdata        string // its microdata items as one JSON array, "" when none
	// Fields are the fields the crawl's extraction rule took from the
	// page (libs/fieldrules) as one JSON object, "" when no rule matched.
	Fields string
	// Properties is what a PDF or office file says of itself (author,
	// created, modified, pages) as one JSON object, "" for HTML.
	Properties string
	// Rendered is how the page's load in a headless browser ended
	// (settled, timeout) when the document is the DOM it built, "" when
	// it is the page as fetched.
	Rendered string
}

// Table describes how rows of type T are inserted.
type Table[T any] struct {
	Name    string
	Columns []string
	Values  func(T) []any // in Columns order
	// Compare, when set, orders rows as the table's ORDER BY does
	// (strings by their bytes, DateTime by the whole second): a writer
	// inserts each block in that order, and ClickHouse, finding it
	// sorted (MergeTreeDataWriterBlocksAlreadySorted), writes the part
	// without sorting and permuting its columns again. Only an
	// optimization: a block in another order is sorted by the server.
	Compare func(a, b T) int
	// Key, when set, names the group a row belongs to (the fetch topic's
	// partition of a fetch_log row), for a writer's FlushWhenKey.
	Key func(T) int
	// Size, when set, is about how many bytes a row holds (its strings),
	// for a writer whose batches are bounded in bytes (MaxBytes,
	// MaxBufferedBytes): a table whose rows range from a few hundred
	// bytes to a megabyte (documents' text).
	Size func(T) int
}

// seconds is a DateTime column's value of t, for Compare.
func seconds(t time.Time) int64 { return t.Unix() }

// The crawler's tables.
var (
	FetchLog = Table[FetchLogRow]{
		Name: "fetch_log",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "attempt", "warc_file", "warc_offset",
			"fetched_at", "fetched_at_ms", "status", "error_kind", "error_message", "bytes",
			"content_type", "duration_ms", "redirect_location", "depth", "fetcher", "final", "etag", "last_modified", "priority", "priority_reason"},
		Values: func(r FetchLogRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.Partition, r.Attempt, r.WarcFile, r.WarcOffset,
				r.FetchedAt, r.FetchedAtMs, r.Status, r.ErrorKind, r.ErrorMessage, r.Bytes,
				r.ContentType, r.DurationMs, r.RedirectLocation, r.Depth, r.Fetcher, boolByte(r.Final), r.ETag, r.LastModified, r.Priority, r.PriorityReason}
		},
		Compare: func(a, b FetchLogRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), strings.Compare(a.Host, b.Host), cmp.Compare(a.URLFP, b.URLFP),
				cmp.Compare(seconds(a.FetchedAt), seconds(b.FetchedAt)), cmp.Compare(a.FetchedAtMs, b.FetchedAtMs), cmp.Compare(a.Attempt, b.Attempt))
		},
		Key: func(r FetchLogRow) int { return int(r.Partition) },
	}
	URLSeen = Table[SeenRow]{
		Name:    "url_seen",
		Columns: []string{"crawl_id", "partition", "fp", "url", "depth", "first_seen"},
		Values: func(r SeenRow) []any {
			return []any{r.CrawlID, r.Partition, r.FP, r.URL, r.Depth, r.FirstSeen}
		},
		Compare: func(a, b SeenRow) int {
			return cmp.Or(cmp.Compare(a.Partition, b.Partition), strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.FP, b.FP))
		},
	}
	Documents = Table[DocumentRow]{
		Name: "documents",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "fetched_at", "status",
			"title", "text", "content_fp", "outlinks", "content_type", "language", "json_ld", "opengraph",
			"language_detected", "microdata", "fields", "properties", "rendered"},
		Values: func(r DocumentRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.FetchedAt, r.Status,
				r.Title, r.Text, r.ContentFP, r.Outlinks, r.ContentType, r.Language, r.JSONLD, r.OpenGraph,
				r.LanguageDetected, r.Microdata, r.Fields, r.Properties, r.Rendered}
		},
		Compare: func(a, b DocumentRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.URLFP, b.URLFP))
		},
		Size: func(r DocumentRow) int {
			return documentRowBytes + len(r.CrawlID) + len(r.URL) + len(r.Host) + len(r.Title) + len(r.Text) +
				len(r.ContentType) + len(r.Language) + len(r.JSONLD) + len(r.OpenGraph) + len(r.LanguageDetected) +
				len(r.Microdata) + len(r.Fields) + len(r.Properties) + len(r.Rendered)
		},
	}
)

// documentRowBytes is a DocumentRow's own size (its fixed fields and
// string headers), what Documents.Size adds to its strings' bytes.
const documentRowBytes = int(unsafe.Sizeof(DocumentRow{}))

// boolByte is a UInt8 column's value of b.
func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Millis returns the millisecond part of t, for FetchLogRow.FetchedAtMs
// (ClickHouse DateTime keeps whole seconds).
func Millis(t time.Time) uint16 {
	return uint16(t.Nanosecond() / int(time.Millisecond))
}

// RobotsRow is the robots.txt of one origin as the fetcher applies it
// (table robots_txt).
type RobotsRow struct {
	Partition    uint16
	Origin       string // scheme://host[:port]
	Host         string // politeness key
	Agent        string // product token the rules were selected for; several, the fetcher's first, when Rules holds other agents' too ("trawl,examplebot")
	Outcome      string // parsed (2xx) or allow_all (4xx, too many redirects)
	Status       uint16 // HTTP status of the last answer
	Rules        string // the rules that apply to Agent, normalized, robots.txt syntax; each other agent's after a "# agent: NAME crawl-delay: D" line
	CrawlDelayMs uint32
	Sitemaps     []string
	BodyBytes    uint32    // size of the robots.txt received
	FetchedAt    time.Time // second precision in ClickHouse
	Expires      time.Time // the fetcher asks again from then on
	Fetcher      string    // instance id
}

// RobotsTxt is the fetcher's robots.txt table.
var RobotsTxt = Table[RobotsRow]{
	Name: "robots_txt",
	Columns: []string{"partition", "origin", "host", "agent", "outcome", "status", "rules",
		"crawl_delay_ms", "sitemaps", "body_bytes", "fetched_at", "expires", "fetcher"},
	Values: func(r RobotsRow) []any {
		sitemaps := r.Sitemaps
		if sitemaps == nil {
			sitemaps = []string{}
		}
		return []any{r.Partition, r.Origin, r.Host, r.Agent, r.Outcome, r.Status, r.Rules,
			r.CrawlDelayMs, sitemaps, r.BodyBytes, r.FetchedAt, r.Expires, r.Fetcher}
	},
}

// AttemptKey names one fetch attempt of a URL in fetch_log.
type AttemptKey struct {
	Host    string // politeness key
	URLFP   uint64
	Attempt uint16
}

// DocumentMetaRow is the parser's per-document metadata (table
// document_meta), joined with documents on (crawl_id, url_fp).
type DocumentMetaRow struct {
	CrawlID       string
	URL           string
	URLFP         uint64
	Host          string
	FetchedAt     time.Time
	Description   string
	CanonicalURL  string
	Simhash       uint64
	ContentFP     uint64
	IsDuplicate   bool
	DuplicateOf   string
	IsDetail      bool
	TextTruncated bool
	Depth         uint16
	// StructuredErrors counts the page's JSON-LD blocks that were not
	// JSON objects or arrays (the items of the others are in documents).
	StructuredErrors uint16
	// ExtractRule names the extraction rule applied to the page, "" when
	// none matched; ExtractMissing are its fields that matched nothing.
	ExtractRule    string
	ExtractMissing []string
	// ParseError is the kind of error that stopped the reading of the
	// document (services/parser's README), "" when none.
	ParseError string
}

// CarriedRow is a page a crawl found unchanged since an earlier crawl (a
// 304 to a conditional request of a URL that crawl fetched: table
// documents_carried): its document is that crawl's, not copied (no text
// row). FromCrawl is the crawl whose documents row holds the text (the
// one that last fetched the page in full), FromURLFP the page's
// fingerprint there (fingerprint.URL(FromCrawl, URL)).
type CarriedRow struct {
	CrawlID   string
	URL       string
	URLFP     uint64
	Host      string
	FromCrawl string
	FromURLFP uint64
	CheckedAt time.Time // when the 304 was answered
}

// ContentSeenRow records the first URL of a content fingerprint in a crawl
// (table content_seen_v2).
type ContentSeenRow struct {
	CrawlID   string
	ContentFP uint64
	URL       string
	FirstSeen time.Time
}

// LinksDroppedRow counts links dropped by the parser (table
// links_dropped_v2).
type LinksDroppedRow struct {
	CrawlID string
	Host    string
	Reason  string
	Hour    time.Time // truncated to the hour
	N       uint64
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// The parser's tables.
var (
	DocumentMeta = Table[DocumentMetaRow]{
		Name: "document_meta",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "fetched_at", "description", "canonical_url",
			"simhash", "content_fp", "is_duplicate", "duplicate_of", "is_detail", "text_truncated", "depth",
			"structured_errors", "extract_rule", "extract_missing", "parse_error"},
		Values: func(r DocumentMetaRow) []any {
			missing := r.ExtractMissing
			if missing == nil {
				missing = []string{}
			}
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.FetchedAt, r.Description, r.CanonicalURL,
				r.Simhash, r.ContentFP, b2u(r.IsDuplicate), r.DuplicateOf, b2u(r.IsDetail), b2u(r.TextTruncated), r.Depth,
				r.StructuredErrors, r.ExtractRule, missing, r.ParseError}
		},
		Compare: func(a, b DocumentMetaRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.URLFP, b.URLFP))
		},
	}
	ContentSeen = Table[ContentSeenRow]{
		Name:    "content_seen_v2",
		Columns: []string{"crawl_id", "content_fp", "url", "first_seen"},
		Values: func(r ContentSeenRow) []any {
			return []any{r.CrawlID, r.ContentFP, r.URL, r.FirstSeen}
		},
		Compare: func(a, b ContentSeenRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.ContentFP, b.ContentFP), strings.Compare(a.URL, b.URL))
		},
	}
	LinksDropped = Table[LinksDroppedRow]{
		Name:    "links_dropped_v2",
		Columns: []string{"crawl_id", "host", "reason", "hour", "n"},
		Values: func(r LinksDroppedRow) []any {
			return []any{r.CrawlID, r.Host, r.Reason, r.Hour, r.N}
		},
		Compare: func(a, b LinksDroppedRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), strings.Compare(a.Host, b.Host), strings.Compare(a.Reason, b.Reason),
				cmp.Compare(seconds(a.Hour), seconds(b.Hour)))
		},
	}
)

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
	// The FetchRequest's validators and document crawl (a URL of the
	// crawl's previous crawl; migration 305).
	ETag, LastModified, DocumentCrawlID string
	// The FetchRequest's priority and its signals (migration 306).
	Priority       int32
	PriorityReason string
}

// Frontier is the frontier table (frontier_v2 since migration 302; the
// table frontier of migration 301 is no longer written).
var Frontier = Table[FrontierRow]{
	Name: "frontier_v2",
	Columns: []string{"partition", "crawl_id", "host", "fp", "depth", "url", "parent_url",
		"anchor_text", "serp_engine", "discovered_at", "state", "updated_at", "etag", "last_modified", "document_crawl_id", "priority", "priority_reason"},
	Values: func(r FrontierRow) []any {
		return []any{r.Partition, r.CrawlID, r.Host, r.FP, r.Depth, r.URL, r.ParentURL,
			r.AnchorText, r.SerpEngine, r.DiscoveredAt, r.State, r.UpdatedAt, r.ETag, r.LastModified, r.DocumentCrawlID, r.Priority, r.PriorityReason}
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
	// Priority is the URL's priority when it was dropped (libs/priority)
	// and PriorityReason the signals that made it (migration 306).
	Priority       int32
	PriorityReason string
}

// URLEvents is the url_events table.
var URLEvents = Table[URLEventRow]{
	Name:    "url_events",
	Columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "state", "reason", "depth", "event_time", "priority", "priority_reason"},
	Values: func(r URLEventRow) []any {
		return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.Partition, r.State, r.Reason, r.Depth, r.EventTime, r.Priority, r.PriorityReason}
	},
	Compare: func(a, b URLEventRow) int {
		return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.URLFP, b.URLFP), strings.Compare(a.State, b.State), strings.Compare(a.Reason, b.Reason))
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
	LastVisit    time.Time // when the fetch last folded into the state was made (whole seconds)
}

// Revisits is the revisits table.
var Revisits = Table[RevisitRow]{
	Name: "revisits",
	Columns: []string{"crawl_id", "partition", "url", "url_fp", "host", "depth", "etag", "last_modified",
		"content_fp", "interval_s", "next_visit", "changes", "visits", "updated_at", "last_visit"},
	Values: func(r RevisitRow) []any {
		return []any{r.CrawlID, r.Partition, r.URL, r.URLFP, r.Host, r.Depth, r.ETag, r.LastModified,
			r.ContentFP, r.IntervalS, r.NextVisit, r.Changes, r.Visits, r.UpdatedAt, r.LastVisit}
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

// LinkRow is one link of a parsed page (table links).
type LinkRow struct {
	CrawlID    string
	TargetHost string
	TargetURL  string
	TargetFP   uint64
	SourceHost string
	SourceURL  string
	SourceFP   uint64
	Position   uint16 // the link's place among the page's followable links (nofollow ones are not extracted), from 1
	AnchorText string
	Rel        string
	Tag        string // a, area, frame, iframe, link, meta, …
	Depth      uint16 // the target's depth: the source's plus one
	FoundAt    time.Time
}

// SimhashBandRow is one band of a document's simhash (table
// simhash_bands).
type SimhashBandRow struct {
	CrawlID   string
	BandKey   uint64 // simhash.Band.Packed
	Simhash   uint64
	URL       string
	FirstSeen time.Time
}

// NearDuplicateRow records a document found within the crawl's distance
// of an earlier one (table near_duplicates).
type NearDuplicateRow struct {
	CrawlID         string
	URL             string
	URLFP           uint64
	Host            string
	NearDuplicateOf string
	Distance        uint8
	Simhash         uint64
	FoundAt         time.Time
}

// The parser's near-duplicate and link-graph tables.
var (
	SimhashBands = Table[SimhashBandRow]{
		Name:    "simhash_bands",
		Columns: []string{"crawl_id", "band_key", "simhash", "url", "first_seen"},
		Values: func(r SimhashBandRow) []any {
			return []any{r.CrawlID, r.BandKey, r.Simhash, r.URL, r.FirstSeen}
		},
	}
	DocumentsCarried = Table[CarriedRow]{
		Name:    "documents_carried",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "from_crawl", "from_url_fp", "checked_at"},
		Values: func(r CarriedRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.FromCrawl, r.FromURLFP, r.CheckedAt}
		},
		Compare: func(a, b CarriedRow) int {
			return cmp.Or(strings.Compare(a.CrawlID, b.CrawlID), cmp.Compare(a.URLFP, b.URLFP))
		},
	}
	NearDuplicates = Table[NearDuplicateRow]{
		Name:    "near_duplicates",
		Columns: []string{"crawl_id", "url", "url_fp", "host", "near_duplicate_of", "distance", "simhash", "found_at"},
		Values: func(r NearDuplicateRow) []any {
			return []any{r.CrawlID, r.URL, r.URLFP, r.Host, r.NearDuplicateOf, r.Distance, r.Simhash, r.FoundAt}
		},
	}
	Links = Table[LinkRow]{
		Name: "links",
		Columns: []string{"crawl_id", "target_host", "target_url", "target_fp", "source_host", "source_url", "source_fp",
			"position", "anchor_text", "rel", "tag", "depth", "found_at"},
		Values: func(r LinkRow) []any {
			return []any{r.CrawlID, r.TargetHost, r.TargetURL, r.TargetFP, r.SourceHost, r.SourceURL, r.SourceFP,
				r.Position, r.AnchorText, r.Rel, r.Tag, r.Depth, r.FoundAt}
		},
	}
)

// WarcFileRow is one closed WARC file of a fetcher (table warc_files).
type WarcFileRow struct {
	File      string    // file name, <prefix>-<crawl>-<timestamp>-<serial>-<instance>.warc.gz (libs/warcdir)
	Dir       string    // directory it was written to (the fetcher's --warc-dir)
	Fetcher   string    // instance id of the fetcher that wrote it
	OpenedAt  time.Time // WARC-Date of its warcinfo record
	ClosedAt  time.Time // when it was closed (or recovered)
	Bytes     uint64    // size on disk
	Records   uint32    // every record, warcinfo included
	Responses uint32    // response and resource records
	Revisits  uint32    // revisit records
	Recovered bool      // closed by the next start after a crash
	CrawlID   string    // the crawl whose records it holds; "" for a file of several (before migration 500)
}

// WarcFiles is the table of closed WARC files.
var WarcFiles = Table[WarcFileRow]{
	Name: "warc_files",
	Columns: []string{"file", "dir", "fetcher", "opened_at", "closed_at", "bytes", "records", "responses",
		"revisits", "recovered", "crawl_id"},
	Values: func(r WarcFileRow) []any {
		var recovered uint8
		if r.Recovered {
			recovered = 1
		}
		return []any{r.File, r.Dir, r.Fetcher, r.OpenedAt, r.ClosedAt, r.Bytes, r.Records, r.Responses,
			r.Revisits, recovered, r.CrawlID}
	},
}
