package console

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// queries are the console's ClickHouse reads. Every one is bounded (a
// LIMIT, or an aggregate to a few rows) and filters on a prefix of its
// table's sort key: crawl_id (fetch_log, documents, url_events, links,
// the per-minute rollups), crawl_id and host (fetch_log, the host
// rollup), partition, crawl_id and fp (url_seen, frontier_v2), partition
// (robots_txt). Two per-crawl aggregates read url_seen by crawl_id alone,
// as the API's counts do (its key starts with the partition). They use
// what ClickHouse 18.16 accepts: no window functions, no newer syntax.
type queries struct {
	conn       driver.Conn
	partitions int
}

// Limits of the tables the pages show.
const (
	maxDocRows     = 50
	maxHostRows    = 10
	maxFetchRows   = 200
	maxReasonRows  = 50
	maxDepthRows   = 100
	maxStoryRows   = 100
	maxLinkRows    = 200
	maxChartPoints = 90
	maxTextBytes   = 64 << 10
)

// point is one bucket of the crawl's fetch attempts.
type point struct {
	T                                        time.Time
	All, S2xx, S3xx, S4xx, S5xx, Errors, Bkt uint64
}

// series reads the crawl's fetch attempts per bucket between from and to.
func (q *queries) series(ctx context.Context, crawlID string, from, to time.Time) ([]point, time.Duration, error) {
	span := to.Sub(from)
	bucket := max(5*time.Second, (span / maxChartPoints).Round(5*time.Second))
	b := uint32(bucket / time.Second)
	rows, err := q.conn.Query(ctx, `SELECT toUInt32(intDiv(toUInt32(fetched_at), ?) * ?) AS t, count(),
    countIf(error_kind = '' AND status >= 200 AND status < 300), countIf(error_kind = '' AND status >= 300 AND status < 400),
    countIf(error_kind = '' AND status >= 400 AND status < 500), countIf(error_kind = '' AND status >= 500),
    countIf(error_kind != '')
FROM fetch_log
WHERE crawl_id = ? AND fetched_at >= toDateTime(?) AND fetched_at <= toDateTime(?)
GROUP BY t ORDER BY t LIMIT ?`, b, b, crawlID, uint32(from.Unix()), uint32(to.Unix()), maxChartPoints+2)
	if err != nil {
		return nil, bucket, fmt.Errorf("query fetch series: %w", err)
	}
	defer rows.Close()
	var out []point
	for rows.Next() {
		var (
			t uint32
			p point
		)
		if err := rows.Scan(&t, &p.All, &p.S2xx, &p.S3xx, &p.S4xx, &p.S5xx, &p.Errors); err != nil {
			return nil, bucket, fmt.Errorf("scan fetch series: %w", err)
		}
		p.T = time.Unix(int64(t), 0).UTC()
		out = append(out, p)
	}
	return out, bucket, rows.Err()
}

// kindPoint is one bucket's failed attempts of one error kind.
type kindPoint struct {
	T    time.Time
	Kind string
	N    uint64
}

func (q *queries) errorKinds(ctx context.Context, crawlID string, from, to time.Time, bucket time.Duration) ([]kindPoint, error) {
	b := uint32(bucket / time.Second)
	rows, err := q.conn.Query(ctx, `SELECT toUInt32(intDiv(toUInt32(fetched_at), ?) * ?) AS t, error_kind, count()
FROM fetch_log
WHERE crawl_id = ? AND fetched_at >= toDateTime(?) AND fetched_at <= toDateTime(?) AND error_kind != ''
GROUP BY t, error_kind ORDER BY t, error_kind LIMIT ?`, b, b, crawlID, uint32(from.Unix()), uint32(to.Unix()), 20*(maxChartPoints+2))
	if err != nil {
		return nil, fmt.Errorf("query error kinds: %w", err)
	}
	defer rows.Close()
	var out []kindPoint
	for rows.Next() {
		var (
			t uint32
			p kindPoint
		)
		if err := rows.Scan(&t, &p.Kind, &p.N); err != nil {
			return nil, fmt.Errorf("scan error kinds: %w", err)
		}
		p.T = time.Unix(int64(t), 0).UTC()
		out = append(out, p)
	}
	return out, rows.Err()
}

// rate returns the crawl's fetch attempts per second over the minute
// before now, or since the crawl started when that is less.
func (q *queries) rate(ctx context.Context, crawlID string, started, now time.Time) (float64, error) {
	window := min(time.Minute, max(time.Second, now.Sub(started)))
	var n uint64
	if err := q.conn.QueryRow(ctx, `SELECT count() FROM fetch_log WHERE crawl_id = ? AND fetched_at >= toDateTime(?)`,
		crawlID, uint32(now.Add(-window).Unix())).Scan(&n); err != nil {
		return 0, fmt.Errorf("query fetch rate: %w", err)
	}
	return float64(n) / window.Seconds(), nil
}

// depthRow is the frontier at one depth.
type depthRow struct {
	Depth              uint16
	Admitted, Finished uint64
}

// Pending is what waits at the depth.
func (d depthRow) Pending() uint64 {
	if d.Admitted > d.Finished {
		return d.Admitted - d.Finished
	}
	return 0
}

func (q *queries) depths(ctx context.Context, crawlID string) ([]depthRow, error) {
	by := map[uint16]*depthRow{}
	get := func(d uint16) *depthRow {
		if by[d] == nil {
			by[d] = &depthRow{Depth: d}
		}
		return by[d]
	}
	rows, err := q.conn.Query(ctx, `SELECT depth, count() FROM (SELECT fp, any(depth) AS depth FROM url_seen WHERE crawl_id = ? GROUP BY fp)
GROUP BY depth ORDER BY depth LIMIT ?`, crawlID, maxDepthRows)
	if err != nil {
		return nil, fmt.Errorf("query admitted per depth: %w", err)
	}
	for rows.Next() {
		var (
			d uint16
			n uint64
		)
		if err := rows.Scan(&d, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan admitted per depth: %w", err)
		}
		get(d).Admitted = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read admitted per depth: %w", err)
	}
	rows, err = q.conn.Query(ctx, `SELECT depth, uniqExact(url_fp) FROM fetch_log WHERE crawl_id = ? AND final = 1
GROUP BY depth ORDER BY depth LIMIT ?`, crawlID, maxDepthRows)
	if err != nil {
		return nil, fmt.Errorf("query finished per depth: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d uint16
			n uint64
		)
		if err := rows.Scan(&d, &n); err != nil {
			return nil, fmt.Errorf("scan finished per depth: %w", err)
		}
		get(d).Finished = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read finished per depth: %w", err)
	}
	out := make([]depthRow, 0, len(by))
	for _, d := range by {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Depth < out[j].Depth })
	return out, nil
}

// hostRow is one host's fetch totals (the per-minute rollup: inserted
// rows, redeliveries included).
type hostRow struct {
	Host          string
	Pages, Errors uint64
	AvgMs         float64
}

// hosts returns the crawl's hosts ordered by orderBy (a fixed expression
// of this file, never user input).
func (q *queries) hosts(ctx context.Context, crawlID, orderBy, having string) ([]hostRow, error) {
	rows, err := q.conn.Query(ctx, `SELECT host, sum(pages) AS p, sum(errors) AS e, sum(duration_ms_sum) / greatest(sum(pages), 1) AS avg_ms
FROM fetch_per_host_minute WHERE crawl_id = ? GROUP BY host HAVING `+having+` ORDER BY `+orderBy+` LIMIT ?`, crawlID, maxHostRows)
	if err != nil {
		return nil, fmt.Errorf("query hosts: %w", err)
	}
	defer rows.Close()
	var out []hostRow
	for rows.Next() {
		var h hostRow
		if err := rows.Scan(&h.Host, &h.Pages, &h.Errors, &h.AvgMs); err != nil {
			return nil, fmt.Errorf("scan hosts: %w", err)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// reasonRow counts one reason.
type reasonRow struct {
	State, Reason string
	N             uint64
}

// drops returns the URLs the scheduler did not admit, by state and
// reason, and the links the parser did not publish, by reason.
func (q *queries) drops(ctx context.Context, crawlID string) (urls, links []reasonRow, err error) {
	rows, err := q.conn.Query(ctx, `SELECT state, reason, uniqExact(url_fp) AS n FROM url_events WHERE crawl_id = ?
GROUP BY state, reason ORDER BY n DESC, state, reason LIMIT ?`, crawlID, maxReasonRows)
	if err != nil {
		return nil, nil, fmt.Errorf("query url drops: %w", err)
	}
	for rows.Next() {
		var r reasonRow
		if err := rows.Scan(&r.State, &r.Reason, &r.N); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("scan url drops: %w", err)
		}
		urls = append(urls, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read url drops: %w", err)
	}
	// links_dropped holds the per-minute counts written before
	// links_dropped_v2 (per hour): a crawl's counts are in one or both.
	rows, err = q.conn.Query(ctx, `SELECT reason, sum(n) AS total FROM
(SELECT reason, n FROM links_dropped WHERE crawl_id = ? UNION ALL SELECT reason, n FROM links_dropped_v2 WHERE crawl_id = ?)
GROUP BY reason ORDER BY total DESC, reason LIMIT ?`, crawlID, crawlID, maxReasonRows)
	if err != nil {
		return nil, nil, fmt.Errorf("query link drops: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r reasonRow
		if err := rows.Scan(&r.Reason, &r.N); err != nil {
			return nil, nil, fmt.Errorf("scan link drops: %w", err)
		}
		links = append(links, r)
	}
	return urls, links, rows.Err()
}

// duplicates counts the crawl's documents whose content duplicated an
// earlier one exactly, and nearly.
func (q *queries) duplicates(ctx context.Context, crawlID string) (exact, near uint64, err error) {
	if err := q.conn.QueryRow(ctx, `SELECT uniqExactIf(url_fp, is_duplicate = 1) FROM document_meta WHERE crawl_id = ?`, crawlID).Scan(&exact); err != nil {
		return 0, 0, fmt.Errorf("count duplicates: %w", err)
	}
	if err := q.conn.QueryRow(ctx, `SELECT uniqExact(url_fp) FROM near_duplicates WHERE crawl_id = ?`, crawlID).Scan(&near); err != nil {
		return 0, 0, fmt.Errorf("count near duplicates: %w", err)
	}
	return exact, near, nil
}

// docRow is one document in the crawl's table.
type docRow struct {
	URL, Host, Title string
	Status           uint16
	FetchedAt        time.Time
	Outlinks         uint32
}

// likeEscape escapes s for a LIKE pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// documents returns the crawl's newest documents whose URL or title
// contains search (case-insensitive; every document when empty).
func (q *queries) documents(ctx context.Context, crawlID, search string) ([]docRow, error) {
	query := `SELECT url, host, title, status, fetched_at, outlinks FROM documents WHERE crawl_id = ?`
	args := []any{crawlID}
	if search != "" {
		pat := "%" + likeEscape(strings.ToLower(search)) + "%"
		query += ` AND (lowerUTF8(url) LIKE ? OR lowerUTF8(title) LIKE ?)`
		args = append(args, pat, pat)
	}
	query += ` ORDER BY fetched_at DESC, url LIMIT ?`
	args = append(args, maxDocRows)
	rows, err := q.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query documents: %w", err)
	}
	defer rows.Close()
	var out []docRow
	for rows.Next() {
		var d docRow
		if err := rows.Scan(&d.URL, &d.Host, &d.Title, &d.Status, &d.FetchedAt, &d.Outlinks); err != nil {
			return nil, fmt.Errorf("scan documents: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// fetchRow is one fetch attempt.
type fetchRow struct {
	URL                      string
	Attempt                  uint16
	At                       time.Time
	Status                   uint16
	ErrorKind, ErrorMessage  string
	Bytes                    uint64
	ContentType              string
	DurationMs               uint32
	RedirectLocation         string
	Depth                    uint16
	Final                    uint8
	Fetcher                  string
	Partition                uint16
	GapMs                    int64 // since the previous attempt on the host (host page), -1 when unknown
	RedirectKnown, Throttled bool
	// Priority is the request's rank (best-first) and PriorityReason the
	// signals that made it ("rule+inlinks"); 0 and "": none.
	Priority       int32
	PriorityReason string
}

const fetchCols = `url, attempt, fetched_at, fetched_at_ms, status, error_kind, error_message, bytes, content_type, duration_ms, redirect_location, depth, final, fetcher, partition, priority, priority_reason`

func scanFetches(rows driver.Rows) ([]fetchRow, error) {
	defer rows.Close()
	var out []fetchRow
	for rows.Next() {
		var (
			f  fetchRow
			ms uint16
		)
		if err := rows.Scan(&f.URL, &f.Attempt, &f.At, &ms, &f.Status, &f.ErrorKind, &f.ErrorMessage, &f.Bytes, &f.ContentType,
			&f.DurationMs, &f.RedirectLocation, &f.Depth, &f.Final, &f.Fetcher, &f.Partition, &f.Priority, &f.PriorityReason); err != nil {
			return nil, fmt.Errorf("scan fetch log: %w", err)
		}
		f.At = f.At.UTC().Add(time.Duration(ms) * time.Millisecond)
		f.GapMs = -1
		f.Throttled = f.Status == 429 || f.Status == 503
		out = append(out, f)
	}
	return out, rows.Err()
}

// hostFetches returns the host's latest attempts in the crawl, newest
// first, each with the gap since the attempt before it.
func (q *queries) hostFetches(ctx context.Context, crawlID, host string) ([]fetchRow, error) {
	rows, err := q.conn.Query(ctx, `SELECT `+fetchCols+` FROM fetch_log WHERE crawl_id = ? AND host = ?
ORDER BY fetched_at DESC, fetched_at_ms DESC, attempt DESC LIMIT ?`, crawlID, host, maxFetchRows)
	if err != nil {
		return nil, fmt.Errorf("query host fetch log: %w", err)
	}
	out, err := scanFetches(rows)
	for i := 0; i+1 < len(out); i++ {
		out[i].GapMs = out[i].At.Sub(out[i+1].At).Milliseconds()
	}
	return out, err
}

// trapRow is one URL family of a host the crawl suspected as a trap.
type trapRow struct {
	Family, Example string
	URLs            uint64
	Last            time.Time
}

// hostTraps returns the URL families of host whose URLs the crawl ended
// as trap_suspected (url_events), the largest first: what was cut, for
// the operator to allow back (scope.follow_traps) if it was no trap.
func (q *queries) hostTraps(ctx context.Context, crawlID, host string) ([]trapRow, error) {
	rows, err := q.conn.Query(ctx, `SELECT replaceRegexpAll(pathFull(url), '[0-9]+', '#') AS family, any(url), uniqExact(url_fp) AS urls, max(event_time)
FROM url_events WHERE crawl_id = ? AND host = ? AND state = 'trap_suspected'
GROUP BY family ORDER BY urls DESC, family LIMIT 20`, crawlID, host)
	if err != nil {
		return nil, fmt.Errorf("query suspected traps: %w", err)
	}
	defer rows.Close()
	var out []trapRow
	for rows.Next() {
		var r trapRow
		if err := rows.Scan(&r.Family, &r.Example, &r.URLs, &r.Last); err != nil {
			return nil, fmt.Errorf("scan suspected traps: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// hostTotals are a host's totals from the rollup.
type hostTotals struct {
	Pages, Errors uint64
	AvgMs         float64
	First, Last   time.Time
}

func (q *queries) hostTotals(ctx context.Context, crawlID, host string) (hostTotals, error) {
	var t hostTotals
	err := q.conn.QueryRow(ctx, `SELECT sum(pages), sum(errors), sum(duration_ms_sum) / greatest(sum(pages), 1), min(minute), max(minute)
FROM fetch_per_host_minute WHERE crawl_id = ? AND host = ?`, crawlID, host).Scan(&t.Pages, &t.Errors, &t.AvgMs, &t.First, &t.Last)
	if err != nil {
		return t, fmt.Errorf("query host totals: %w", err)
	}
	return t, nil
}

// robotsRow is a fetched robots.txt.
type robotsRow struct {
	Origin, Agent, Outcome, Rules string
	Status                        uint16
	CrawlDelayMs, BodyBytes       uint32
	Sitemaps                      []string
	FetchedAt, Expires            time.Time
	Fetcher                       string
}

// robots returns the robots.txt fetches of host (the newest version per
// origin first), read from its partition.
func (q *queries) robots(ctx context.Context, host string) ([]robotsRow, error) {
	rows, err := q.conn.Query(ctx, `SELECT origin, agent, outcome, rules, status, crawl_delay_ms, body_bytes, sitemaps, fetched_at, expires, fetcher
FROM robots_txt WHERE partition = ? AND host = ? ORDER BY fetched_at DESC LIMIT 5`, uint16(q.partitionOf(host)), host)
	if err != nil {
		return nil, fmt.Errorf("query robots.txt: %w", err)
	}
	defer rows.Close()
	var out []robotsRow
	for rows.Next() {
		var r robotsRow
		if err := rows.Scan(&r.Origin, &r.Agent, &r.Outcome, &r.Rules, &r.Status, &r.CrawlDelayMs, &r.BodyBytes, &r.Sitemaps,
			&r.FetchedAt, &r.Expires, &r.Fetcher); err != nil {
			return nil, fmt.Errorf("scan robots.txt: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// partitionOf is the pipeline's partition function of a host key.
func (q *queries) partitionOf(key string) int { return kafkaio.PartitionFor([]byte(key), q.partitions) }

// story is everything recorded about one URL of a crawl.
type story struct {
	URL, Host  string
	FP         uint64
	Partition  int
	Admitted   bool
	Depth      uint16
	FirstSeen  time.Time
	Frontier   *frontierRow
	Links      []linkRow // pages linking to it
	Events     []eventRow
	Fetches    []fetchRow
	Document   *docFull
	Outlinks   []linkRow
	Redirected string // the last hop's location
	// NotRead is the kind of error that stopped the parser reading the
	// URL's body when it left no document (document_meta.parse_error).
	NotRead string
}

type frontierRow struct {
	ParentURL, AnchorText, SERPEngine string
	Depth                             uint16
	DiscoveredAt                      time.Time
	State                             uint8
}

type linkRow struct {
	URL, AnchorText, Tag, Rel string
	Depth                     uint16
}

type eventRow struct {
	State, Reason string
	Depth         uint16
	At            time.Time
	// The URL's priority and why, as the scheduler computed it (a URL
	// ended as budget_exhausted had this rank); 0 and "": none.
	Priority       int32
	PriorityReason string
}

type docFull struct {
	Title, Text, ContentType, Language string
	Status                             uint16
	FetchedAt                          time.Time
	Outlinks                           uint32
	TextTruncated                      bool
	Description, Canonical             string
	Duplicate                          bool
	DuplicateOf                        string
	HaveMeta                           bool
	// Fields are what the crawl's extraction rule took (documents.fields,
	// a JSON object), Properties what a PDF or office file says of itself
	// (author, dates, pages); "" when none.
	Fields, Properties string
	// ExtractRule is the rule applied ("": none matched), ExtractMissing
	// its fields that selected nothing, ParseError the kind of error that
	// stopped the reading of the document ("": none).
	ExtractRule    string
	ExtractMissing []string
	ParseError     string
}

// errBadURL marks a URL the crawler could not have crawled.
var errBadURL = errors.New("not a crawlable URL")

// urlStory reads the story of raw (canonicalized as the crawler does).
func (q *queries) urlStory(ctx context.Context, crawlID, raw string) (*story, error) {
	canonical, err := urlcanon.Canonicalize(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", errBadURL, raw, err)
	}
	host, err := urlcanon.CanonicalKey(canonical)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %w", errBadURL, canonical, err)
	}
	st := &story{URL: canonical, Host: host, FP: fingerprint.URL(crawlID, canonical), Partition: q.partitionOf(host)}
	// Admission: url_seen and the frontier, keyed by partition first.
	rows, err := q.conn.Query(ctx, `SELECT depth, first_seen FROM url_seen WHERE partition = ? AND crawl_id = ? AND fp = ? ORDER BY first_seen LIMIT 1`,
		uint16(st.Partition), crawlID, st.FP)
	if err != nil {
		return nil, fmt.Errorf("query url_seen: %w", err)
	}
	for rows.Next() {
		if err := rows.Scan(&st.Depth, &st.FirstSeen); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan url_seen: %w", err)
		}
		st.Admitted = true
	}
	rows.Close()
	rows, err = q.conn.Query(ctx, `SELECT parent_url, anchor_text, serp_engine, depth, discovered_at, max(state) FROM frontier_v2
WHERE partition = ? AND crawl_id = ? AND host = ? AND fp = ? GROUP BY parent_url, anchor_text, serp_engine, depth, discovered_at LIMIT 1`,
		uint16(st.Partition), crawlID, host, st.FP)
	if err != nil {
		return nil, fmt.Errorf("query frontier: %w", err)
	}
	for rows.Next() {
		var f frontierRow
		if err := rows.Scan(&f.ParentURL, &f.AnchorText, &f.SERPEngine, &f.Depth, &f.DiscoveredAt, &f.State); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan frontier: %w", err)
		}
		st.Frontier = &f
	}
	rows.Close()
	if st.Links, err = q.links(ctx, `SELECT source_url, anchor_text, tag, rel, depth FROM links
WHERE crawl_id = ? AND target_host = ? AND target_fp = ? ORDER BY depth, source_url LIMIT ?`, crawlID, host, st.FP, maxStoryRows); err != nil {
		return nil, err
	}
	rows, err = q.conn.Query(ctx, `SELECT state, reason, depth, event_time, priority, priority_reason FROM url_events WHERE crawl_id = ? AND url_fp = ?
ORDER BY event_time LIMIT ?`, crawlID, st.FP, maxStoryRows)
	if err != nil {
		return nil, fmt.Errorf("query url_events: %w", err)
	}
	for rows.Next() {
		var e eventRow
		if err := rows.Scan(&e.State, &e.Reason, &e.Depth, &e.At, &e.Priority, &e.PriorityReason); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan url_events: %w", err)
		}
		st.Events = append(st.Events, e)
	}
	rows.Close()
	rows, err = q.conn.Query(ctx, `SELECT `+fetchCols+` FROM fetch_log WHERE crawl_id = ? AND host = ? AND url_fp = ?
ORDER BY fetched_at, fetched_at_ms, attempt LIMIT ?`, crawlID, host, st.FP, maxStoryRows)
	if err != nil {
		return nil, fmt.Errorf("query fetch log: %w", err)
	}
	if st.Fetches, err = scanFetches(rows); err != nil {
		return nil, err
	}
	for _, f := range st.Fetches {
		if f.RedirectLocation != "" {
			st.Redirected = f.RedirectLocation
		}
	}
	rows, err = q.conn.Query(ctx, `SELECT title, substring(text, 1, ?), length(text) > ?, content_type, language, status, fetched_at, outlinks, fields, properties
FROM documents WHERE crawl_id = ? AND url_fp = ? ORDER BY fetched_at DESC LIMIT 1`, maxTextBytes, maxTextBytes, crawlID, st.FP)
	if err != nil {
		return nil, fmt.Errorf("query document: %w", err)
	}
	for rows.Next() {
		var d docFull
		var trunc uint8
		if err := rows.Scan(&d.Title, &d.Text, &trunc, &d.ContentType, &d.Language, &d.Status, &d.FetchedAt, &d.Outlinks, &d.Fields, &d.Properties); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan document: %w", err)
		}
		d.TextTruncated = trunc == 1
		st.Document = &d
	}
	rows.Close()
	// The document's metadata; without a document, why it was not read.
	rows, err = q.conn.Query(ctx, `SELECT description, canonical_url, is_duplicate, duplicate_of, extract_rule, extract_missing, parse_error FROM document_meta
WHERE crawl_id = ? AND url_fp = ? ORDER BY fetched_at DESC LIMIT 1`, crawlID, st.FP)
	if err != nil {
		return nil, fmt.Errorf("query document meta: %w", err)
	}
	for rows.Next() {
		var (
			m   docFull
			dup uint8
		)
		if err := rows.Scan(&m.Description, &m.Canonical, &dup, &m.DuplicateOf, &m.ExtractRule, &m.ExtractMissing, &m.ParseError); err != nil {
			rows.Close()
			return nil, fmt.Errorf("scan document meta: %w", err)
		}
		if d := st.Document; d != nil {
			d.Description, d.Canonical, d.Duplicate, d.DuplicateOf, d.HaveMeta = m.Description, m.Canonical, dup == 1, m.DuplicateOf, true
			d.ExtractRule, d.ExtractMissing, d.ParseError = m.ExtractRule, m.ExtractMissing, m.ParseError
		} else {
			st.NotRead = m.ParseError
		}
	}
	rows.Close()
	if st.Document == nil {
		return st, nil
	}
	st.Outlinks, err = q.links(ctx, `SELECT target_url, anchor_text, tag, rel, depth FROM links
WHERE crawl_id = ? AND source_fp = ? ORDER BY position LIMIT ?`, crawlID, st.FP, maxLinkRows)
	return st, err
}

func (q *queries) links(ctx context.Context, query string, args ...any) ([]linkRow, error) {
	rows, err := q.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("query links: %w", err)
	}
	defer rows.Close()
	var out []linkRow
	for rows.Next() {
		var l linkRow
		if err := rows.Scan(&l.URL, &l.AnchorText, &l.Tag, &l.Rel, &l.Depth); err != nil {
			return nil, fmt.Errorf("scan links: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// extractCount is one rule's pages (Field "") or one of its fields' misses.
type extractCount struct {
	Rule, Field string
	N           uint64
	Example     string // one of the pages counted
}

// maxExtractRows bounds the rows of extraction: 64 rules of 64 fields and
// their page counts (libs/fieldrules), and rules of an earlier revision.
const maxExtractRows = 5000

// extraction counts, per extraction rule applied to the crawl's pages
// (document_meta.extract_rule; "" for the pages no rule matched), the
// pages it matched (Field "") and per field how many of them it missed
// (extract_missing). The page's own count rides on the array as an empty
// name, which no field has (fieldrules: a letter or underscore first),
// so that one pass gives both. Pages are counted by fingerprint
// (uniqExact), so a redelivered page's rows count once: 16 bytes a page
// and a miss, where the latest version of each page (argMax per url_fp)
// would hold every page's rule and array, too much for a page refreshed
// every few seconds. A revisited page whose outcome changed counts under
// both until its rows merge (ReplacingMergeTree keeps the latest).
func (q *queries) extraction(ctx context.Context, crawlID string) ([]extractCount, error) {
	rows, err := q.conn.Query(ctx, `SELECT extract_rule, arrayJoin(arrayConcat([''], extract_missing)) AS field, uniqExact(url_fp) AS n, any(url)
FROM document_meta WHERE crawl_id = ?
GROUP BY extract_rule, field ORDER BY extract_rule, field LIMIT ?`, crawlID, maxExtractRows)
	if err != nil {
		return nil, fmt.Errorf("query extraction counts: %w", err)
	}
	defer rows.Close()
	var out []extractCount
	for rows.Next() {
		var c extractCount
		if err := rows.Scan(&c.Rule, &c.Field, &c.N, &c.Example); err != nil {
			return nil, fmt.Errorf("scan extraction counts: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// docTypeRow is the crawl's documents of one content type beyond HTML.
type docTypeRow struct {
	ContentType       string
	Documents, Failed uint64 // Failed: of Documents, those document_meta records a parse error of
}

// Name is the type as people name it and its media type: "pdf
// (application/pdf)"; the media type alone when it has no short name.
func (r docTypeRow) Name() string {
	if short := doctypes.Short(r.ContentType); short != r.ContentType {
		return short + " (" + r.ContentType + ")"
	}
	return r.ContentType
}

// parseErrorRow counts the documents one kind of error stopped reading.
type parseErrorRow struct {
	Kind string
	N    uint64
}

// htmlTypes are the content types the documents table holds for HTML
// pages: the ones docTypes leaves out.
const htmlTypes = `'text/html', 'application/xhtml+xml', ''`

// docTypes returns the crawl's documents by content type beyond HTML
// (PDF, office files, text), the most first, each with how many of them
// the parser could not read (document_meta.parse_error), and the parse
// errors by kind (those of documents without a documents row included).
func (q *queries) docTypes(ctx context.Context, crawlID string) ([]docTypeRow, []parseErrorRow, error) {
	rows, err := q.conn.Query(ctx, `SELECT content_type, uniqExact(url_fp) AS n,
    uniqExactIf(url_fp, url_fp IN (SELECT url_fp FROM document_meta WHERE crawl_id = ? AND parse_error != ''))
FROM documents WHERE crawl_id = ? AND content_type NOT IN (`+htmlTypes+`)
GROUP BY content_type ORDER BY n DESC, content_type LIMIT ?`, crawlID, crawlID, maxReasonRows)
	if err != nil {
		return nil, nil, fmt.Errorf("query documents by type: %w", err)
	}
	var types []docTypeRow
	for rows.Next() {
		var r docTypeRow
		if err := rows.Scan(&r.ContentType, &r.Documents, &r.Failed); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("scan documents by type: %w", err)
		}
		types = append(types, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read documents by type: %w", err)
	}
	rows, err = q.conn.Query(ctx, `SELECT parse_error, uniqExact(url_fp) AS n FROM document_meta WHERE crawl_id = ? AND parse_error != ''
GROUP BY parse_error ORDER BY n DESC, parse_error LIMIT ?`, crawlID, maxReasonRows)
	if err != nil {
		return nil, nil, fmt.Errorf("query parse errors: %w", err)
	}
	defer rows.Close()
	var kinds []parseErrorRow
	for rows.Next() {
		var r parseErrorRow
		if err := rows.Scan(&r.Kind, &r.N); err != nil {
			return nil, nil, fmt.Errorf("scan parse errors: %w", err)
		}
		kinds = append(kinds, r)
	}
	return types, kinds, rows.Err()
}
