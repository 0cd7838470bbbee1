package chexport

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// tableDef is how one table is read and written. Its row type T carries
// the column names three times, which TestColumnNames holds equal: json
// tags (JSON lines), parquet tags (the Parquet schema) and columns (the
// CSV header, in record's order); the documents' fields are the exception
// (fields.go).
type tableDef[T any] struct {
	name    Table
	selects []string // the SELECT list, in scan's order
	columns []string // output columns, in the order of T's fields
	scan    func(driver.Rows, *T) error
	// record appends the row's CSV fields in columns' order.
	record func(*T, []string) []string
	// parquet, when set, makes the Parquet encoder (the documents', whose
	// columns depend on the export: fields.go); else T's schema is the
	// file's.
	parquet func(io.Writer) encoder[T]
}

// Timestamps are written in UTC: RFC 3339 in JSON and CSV (to the second,
// or the millisecond where the table keeps it), TIMESTAMP(MILLIS, UTC) in
// Parquet. ClickHouse DateTime columns hold whole seconds; fetch_log keeps
// the millisecond apart (fetched_at_ms), joined here into fetched_at.

// DocumentRow is one exported document (table documents, the latest
// version of each URL).
type DocumentRow struct {
	CrawlID     string    `json:"crawl_id" parquet:"crawl_id,dict"`
	URL         string    `json:"url" parquet:"url"`
	URLFP       uint64    `json:"url_fp" parquet:"url_fp"`
	Host        string    `json:"host" parquet:"host,dict"`
	FetchedAt   time.Time `json:"fetched_at" parquet:"fetched_at,timestamp(millisecond)"`
	Status      uint16    `json:"status" parquet:"status"`
	Title       string    `json:"title" parquet:"title"`
	Text        string    `json:"text" parquet:"text"`
	ContentFP   uint64    `json:"content_fp" parquet:"content_fp"`
	Outlinks    uint32    `json:"outlinks" parquet:"outlinks"`
	ContentType string    `json:"content_type" parquet:"content_type,dict"`
	Language    string    `json:"language" parquet:"language,dict"`
	// The page's structured data (services/parser's README): its JSON-LD
	// items, its OpenGraph and Twitter card properties and its microdata
	// items.
	JSONLD    JSONArray  `json:"json_ld" parquet:"json_ld"`
	OpenGraph JSONObject `json:"opengraph" parquet:"opengraph"`
	// LanguageDetected is the ISO 639-1 code of the language of the
	// page's text, "" when unknown; Language is what the page declares.
	LanguageDetected string    `json:"language_detected" parquet:"language_detected,dict"`
	Microdata        JSONArray `json:"microdata" parquet:"microdata"`
	// Properties is what a PDF or office file says of itself (author,
	// created, modified, pages), none for HTML.
	Properties JSONObject `json:"properties" parquet:"properties"`
	// Fields are the fields the crawl's extraction rules took from the
	// page, keyed by field name, none when no rule matched. In JSON lines
	// the object; in CSV and Parquet a column per field name, fields.NAME
	// (fields.go), after the others.
	Fields JSONObject `json:"fields" parquet:"-"`
	// Rendered is how the page's load in the fetchers' headless browser
	// ended (settled, timeout) when the document is the DOM it built, ""
	// when it is the page as fetched.
	Rendered string `json:"rendered" parquet:"rendered,dict"`
}

var documentsTable = tableDef[DocumentRow]{
	name: Documents,
	selects: []string{"crawl_id", "url", "url_fp", "host", "fetched_at", "status", "title", "text", "content_fp",
		"outlinks", "content_type", "language", "json_ld", "opengraph", "language_detected", "microdata", "properties", "rendered", "fields"},
	// fields: the columns fields.NAME, added per export (documentsDef)
	columns: []string{"crawl_id", "url", "url_fp", "host", "fetched_at", "status", "title", "text", "content_fp",
		"outlinks", "content_type", "language", "json_ld", "opengraph", "language_detected", "microdata", "properties", "rendered"},
	scan: func(rows driver.Rows, r *DocumentRow) error {
		var ld, og, md, props, fields string
		err := rows.Scan(&r.CrawlID, &r.URL, &r.URLFP, &r.Host, &r.FetchedAt, &r.Status, &r.Title, &r.Text, &r.ContentFP,
			&r.Outlinks, &r.ContentType, &r.Language, &ld, &og, &r.LanguageDetected, &md, &props, &r.Rendered, &fields)
		r.FetchedAt = r.FetchedAt.UTC()
		r.JSONLD, r.OpenGraph, r.Microdata = JSONArray(ld), JSONObject(og), JSONArray(md)
		r.Properties, r.Fields = JSONObject(props), JSONObject(fields)
		return err
	},
	record: func(r *DocumentRow, rec []string) []string {
		return append(rec, r.CrawlID, r.URL, u64(r.URLFP), r.Host, ts(r.FetchedAt), u64(uint64(r.Status)), r.Title, r.Text,
			u64(r.ContentFP), u64(uint64(r.Outlinks)), r.ContentType, r.Language, string(r.JSONLD), string(r.OpenGraph),
			r.LanguageDetected, string(r.Microdata), string(r.Properties), r.Rendered)
	},
}

// FetchLogRow is one exported fetch attempt (table fetch_log).
type FetchLogRow struct {
	CrawlID          string    `json:"crawl_id" parquet:"crawl_id,dict"`
	URL              string    `json:"url" parquet:"url"`
	URLFP            uint64    `json:"url_fp" parquet:"url_fp"`
	Host             string    `json:"host" parquet:"host,dict"`
	Partition        uint16    `json:"partition" parquet:"partition"`
	Attempt          uint16    `json:"attempt" parquet:"attempt"`
	FetchedAt        time.Time `json:"fetched_at" parquet:"fetched_at,timestamp(millisecond)"` // to the millisecond
	Status           uint16    `json:"status" parquet:"status"`
	ErrorKind        string    `json:"error_kind" parquet:"error_kind,dict"`
	ErrorMessage     string    `json:"error_message" parquet:"error_message"`
	Bytes            uint64    `json:"bytes" parquet:"bytes"`
	ContentType      string    `json:"content_type" parquet:"content_type,dict"`
	DurationMs       uint32    `json:"duration_ms" parquet:"duration_ms"`
	RedirectLocation string    `json:"redirect_location" parquet:"redirect_location"`
	Depth            uint16    `json:"depth" parquet:"depth"`
	Fetcher          string    `json:"fetcher" parquet:"fetcher,dict"`
	Final            bool      `json:"final" parquet:"final"`
	WarcFile         string    `json:"warc_file" parquet:"warc_file,dict"`
	WarcOffset       uint64    `json:"warc_offset" parquet:"warc_offset"`
	// Priority is the request's priority (best-first, libs/priority) and
	// PriorityReason the signals that made it ("rule+inlinks"; "" for
	// none).
	Priority       int32  `json:"priority" parquet:"priority"`
	PriorityReason string `json:"priority_reason" parquet:"priority_reason,dict"`
}

var fetchLogTable = tableDef[FetchLogRow]{
	name: FetchLog,
	selects: []string{"crawl_id", "url", "url_fp", "host", "partition", "attempt", "fetched_at", "fetched_at_ms", "status",
		"error_kind", "error_message", "bytes", "content_type", "duration_ms", "redirect_location", "depth", "fetcher",
		"final", "warc_file", "warc_offset", "priority", "priority_reason"},
	columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "attempt", "fetched_at", "status",
		"error_kind", "error_message", "bytes", "content_type", "duration_ms", "redirect_location", "depth", "fetcher",
		"final", "warc_file", "warc_offset", "priority", "priority_reason"},
	scan: func(rows driver.Rows, r *FetchLogRow) error {
		var (
			ms    uint16
			final uint8
		)
		err := rows.Scan(&r.CrawlID, &r.URL, &r.URLFP, &r.Host, &r.Partition, &r.Attempt, &r.FetchedAt, &ms, &r.Status,
			&r.ErrorKind, &r.ErrorMessage, &r.Bytes, &r.ContentType, &r.DurationMs, &r.RedirectLocation, &r.Depth, &r.Fetcher,
			&final, &r.WarcFile, &r.WarcOffset, &r.Priority, &r.PriorityReason)
		r.FetchedAt = r.FetchedAt.UTC().Add(time.Duration(ms) * time.Millisecond)
		r.Final = final != 0
		return err
	},
	record: func(r *FetchLogRow, rec []string) []string {
		return append(rec, r.CrawlID, r.URL, u64(r.URLFP), r.Host, u64(uint64(r.Partition)), u64(uint64(r.Attempt)),
			ts(r.FetchedAt), u64(uint64(r.Status)), r.ErrorKind, r.ErrorMessage, u64(r.Bytes), r.ContentType,
			u64(uint64(r.DurationMs)), r.RedirectLocation, u64(uint64(r.Depth)), r.Fetcher, strconv.FormatBool(r.Final),
			r.WarcFile, u64(r.WarcOffset), i64(int64(r.Priority)), r.PriorityReason)
	},
}

// LinkRow is one exported link of a parsed page (table links).
type LinkRow struct {
	CrawlID    string    `json:"crawl_id" parquet:"crawl_id,dict"`
	SourceURL  string    `json:"source_url" parquet:"source_url"`
	SourceFP   uint64    `json:"source_fp" parquet:"source_fp"`
	SourceHost string    `json:"source_host" parquet:"source_host,dict"`
	Position   uint16    `json:"position" parquet:"position"`
	TargetURL  string    `json:"target_url" parquet:"target_url"`
	TargetFP   uint64    `json:"target_fp" parquet:"target_fp"`
	TargetHost string    `json:"target_host" parquet:"target_host,dict"`
	AnchorText string    `json:"anchor_text" parquet:"anchor_text"`
	Rel        string    `json:"rel" parquet:"rel,dict"`
	Tag        string    `json:"tag" parquet:"tag,dict"`
	Depth      uint16    `json:"depth" parquet:"depth"`
	FoundAt    time.Time `json:"found_at" parquet:"found_at,timestamp(millisecond)"`
}

var linksTable = tableDef[LinkRow]{
	name: Links,
	selects: []string{"crawl_id", "source_url", "source_fp", "source_host", "position", "target_url", "target_fp",
		"target_host", "anchor_text", "rel", "tag", "depth", "found_at"},
	columns: []string{"crawl_id", "source_url", "source_fp", "source_host", "position", "target_url", "target_fp",
		"target_host", "anchor_text", "rel", "tag", "depth", "found_at"},
	scan: func(rows driver.Rows, r *LinkRow) error {
		err := rows.Scan(&r.CrawlID, &r.SourceURL, &r.SourceFP, &r.SourceHost, &r.Position, &r.TargetURL, &r.TargetFP,
			&r.TargetHost, &r.AnchorText, &r.Rel, &r.Tag, &r.Depth, &r.FoundAt)
		r.FoundAt = r.FoundAt.UTC()
		return err
	},
	record: func(r *LinkRow, rec []string) []string {
		return append(rec, r.CrawlID, r.SourceURL, u64(r.SourceFP), r.SourceHost, u64(uint64(r.Position)), r.TargetURL,
			u64(r.TargetFP), r.TargetHost, r.AnchorText, r.Rel, r.Tag, u64(uint64(r.Depth)), ts(r.FoundAt))
	},
}

// URLEventRow is one exported discovered URL the scheduler did not admit
// (table url_events): one row per URL, state and reason.
type URLEventRow struct {
	CrawlID   string    `json:"crawl_id" parquet:"crawl_id,dict"`
	URL       string    `json:"url" parquet:"url"`
	URLFP     uint64    `json:"url_fp" parquet:"url_fp"`
	Host      string    `json:"host" parquet:"host,dict"`
	Partition uint16    `json:"partition" parquet:"partition"`
	State     string    `json:"state" parquet:"state,dict"`
	Reason    string    `json:"reason" parquet:"reason,dict"`
	Depth     uint16    `json:"depth" parquet:"depth"`
	EventTime time.Time `json:"event_time" parquet:"event_time,timestamp(millisecond)"`
	// Priority is the URL's priority when it was decided (libs/priority)
	// and PriorityReason the signals that made it.
	Priority       int32  `json:"priority" parquet:"priority"`
	PriorityReason string `json:"priority_reason" parquet:"priority_reason,dict"`
}

var urlEventsTable = tableDef[URLEventRow]{
	name: URLEvents,
	selects: []string{"crawl_id", "url", "url_fp", "host", "partition", "state", "reason", "depth", "event_time",
		"priority", "priority_reason"},
	columns: []string{"crawl_id", "url", "url_fp", "host", "partition", "state", "reason", "depth", "event_time",
		"priority", "priority_reason"},
	scan: func(rows driver.Rows, r *URLEventRow) error {
		err := rows.Scan(&r.CrawlID, &r.URL, &r.URLFP, &r.Host, &r.Partition, &r.State, &r.Reason, &r.Depth, &r.EventTime, &r.Priority, &r.PriorityReason)
		r.EventTime = r.EventTime.UTC()
		return err
	},
	record: func(r *URLEventRow, rec []string) []string {
		return append(rec, r.CrawlID, r.URL, u64(r.URLFP), r.Host, u64(uint64(r.Partition)), r.State, r.Reason,
			u64(uint64(r.Depth)), ts(r.EventTime), i64(int64(r.Priority)), r.PriorityReason)
	},
}

// JSONArray is a column holding a JSON array as text, "" for none. In
// JSON lines it is the array itself ([] for none); in CSV and Parquet the
// text ("" for none).
type JSONArray string

// JSONObject is a column holding a JSON object as text, "" for none. In
// JSON lines it is the object itself ({} for none); in CSV and Parquet the
// text ("" for none).
type JSONObject string

// MarshalJSON writes the array, or [] for none.
func (a JSONArray) MarshalJSON() ([]byte, error) { return rawJSON(string(a), "[]") }

// UnmarshalJSON reads what MarshalJSON writes.
func (a *JSONArray) UnmarshalJSON(b []byte) error {
	s, err := unrawJSON(b, "[]")
	*a = JSONArray(s)
	return err
}

// MarshalJSON writes the object, or {} for none.
func (o JSONObject) MarshalJSON() ([]byte, error) { return rawJSON(string(o), "{}") }

// UnmarshalJSON reads what MarshalJSON writes.
func (o *JSONObject) UnmarshalJSON(b []byte) error {
	s, err := unrawJSON(b, "{}")
	*o = JSONObject(s)
	return err
}

// rawJSON is s as a JSON value: none when empty, s itself when it is
// valid JSON, else s as a JSON string (a row written by other means must
// not break the line).
func rawJSON(s, none string) ([]byte, error) {
	switch {
	case s == "":
		return []byte(none), nil
	case json.Valid([]byte(s)):
		return []byte(s), nil
	}
	return json.Marshal(s)
}

// unrawJSON is the text of a JSON value rawJSON wrote.
func unrawJSON(b []byte, none string) (string, error) {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == none || string(b) == "null":
		return "", nil
	case len(b) > 0 && b[0] == '"':
		var s string
		err := json.Unmarshal(b, &s)
		return s, err
	}
	var buf bytes.Buffer
	err := json.Compact(&buf, b)
	return buf.String(), err
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func i64(v int64) string { return strconv.FormatInt(v, 10) }

// ts is a timestamp as JSON writes a time.Time: RFC 3339 with the
// fraction only when there is one.
func ts(t time.Time) string { return t.Format(time.RFC3339Nano) }
