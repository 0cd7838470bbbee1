package chstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/simhash"
)

// parserMigrations are the schema versions 200-299, owned by the parser (dropped links, duplicates, sitemaps, structured data, detected language). Append; never edit
// an applied version.
var parserMigrations = []Migration{
	{
		Version: 200,
		Name:    "document_meta, content_seen, links_dropped",
		Statements: []string{
			// What the parser keeps of a page beyond the documents row
			// (joined on crawl_id, url_fp). A separate table rather than
			// ALTER TABLE documents: 18.16 has no ADD COLUMN IF NOT EXISTS,
			// and migrations must be idempotent when services race.
			`CREATE TABLE IF NOT EXISTS document_meta (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	fetched_at DateTime,
	description String,
	canonical_url String,
	simhash UInt64,
	content_fp UInt64,
	is_duplicate UInt8,
	duplicate_of String,
	is_detail UInt8,
	text_truncated UInt8,
	depth UInt16
) ENGINE = ReplacingMergeTree(fetched_at) ORDER BY (crawl_id, url_fp)`,
			// The first URL seen with each content fingerprint of a crawl.
			// Keyed by URL too, so a redelivered insert collapses while two
			// parsers racing on one content keep both (the earliest wins).
			`CREATE TABLE IF NOT EXISTS content_seen (
	crawl_id String,
	content_fp UInt64,
	url String,
	first_seen DateTime
) ENGINE = ReplacingMergeTree ORDER BY (crawl_id, content_fp, url)`,
			// Links the parser did not publish, per crawl, host of the page,
			// reason and minute. Summed on merge: query with sum(n).
			`CREATE TABLE IF NOT EXISTS links_dropped (
	crawl_id String,
	host String,
	reason String,
	minute DateTime,
	n UInt64
) ENGINE = SummingMergeTree(n) PARTITION BY toYYYYMM(minute) ORDER BY (crawl_id, host, reason, minute)`,
		},
	},
	{
		Version: 201,
		Name:    "simhash_bands, near_duplicates: near-duplicate detection",
		Statements: []string{
			// The near-duplicate index: every document's simhash under each
			// of its bands (libs/simhash.Bands). A document within
			// simhash.MaxNearDistance bits of another shares a band key
			// with it, so a lookup reads a few rows per band however large
			// the crawl. band_key is simhash.Band.Packed: the band's number
			// and its bits in one column, so that a lookup is one IN over
			// the key the primary index serves. Keyed by URL too: a
			// redelivery collapses. A lookup is a few hundred random keys:
			// small granules (1 024 rows, not 8 192) make each read less.
			`CREATE TABLE IF NOT EXISTS simhash_bands (
	crawl_id String,
	band_key UInt64,
	simhash UInt64,
	url String,
	first_seen DateTime
) ENGINE = ReplacingMergeTree ORDER BY (crawl_id, band_key, url) SETTINGS index_granularity = 1024`,
			// The documents found to nearly duplicate an earlier one
			// (joined with documents on crawl_id, url_fp): a table of its
			// own, as document_meta is, since 18.16 cannot add a column
			// idempotently.
			`CREATE TABLE IF NOT EXISTS near_duplicates (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	near_duplicate_of String,
	distance UInt8,
	simhash UInt64,
	found_at DateTime
) ENGINE = ReplacingMergeTree(found_at) ORDER BY (crawl_id, url_fp)`,
		},
	},
	{
		Version: 202,
		Name:    "links: the link graph with anchor texts",
		Statements: []string{
			// One row per in-scope link of a parsed page (up to the crawl's
			// max outlinks): who links to whom, with which words. Keyed by
			// target first, for a page's in-links and a host's anchor
			// texts; a redelivered page collapses on (source, position).
			`CREATE TABLE IF NOT EXISTS links (
	crawl_id String,
	target_host String,
	target_url String,
	target_fp UInt64,
	source_host String,
	source_url String,
	source_fp UInt64,
	position UInt16,
	anchor_text String,
	rel String,
	tag String,
	depth UInt16,
	found_at DateTime
) ENGINE = ReplacingMergeTree(found_at) ORDER BY (crawl_id, target_host, target_fp, source_fp, position)`,
		},
	},
	{
		Version: 205,
		Name:    "documents_carried: pages found unchanged since an earlier crawl",
		Statements: []string{
			// One row per page of a crawl that an earlier crawl fetched and
			// that answered 304 to this crawl's conditional request
			// (CrawlSpec.previous_crawl_id): its document is the one of
			// from_crawl (the crawl that last fetched it in full) at
			// from_url_fp, joined by the documents export. No text is
			// copied: a carried page costs a row of a few short columns.
			// A redelivery collapses on the key.
			`CREATE TABLE IF NOT EXISTS documents_carried (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	from_crawl String,
	from_url_fp UInt64,
	checked_at DateTime
) ENGINE = ReplacingMergeTree(checked_at) ORDER BY (crawl_id, url_fp)`,
		},
	},
	{
		Version: 206,
		Name:    "content_seen_v2: content_seen in granules of 256 rows",
		Statements: []string{
			// The parser looks up a batch's content fingerprints (a few
			// hundred, spread over the whole key range) in the crawl's
			// content_seen (SeenContent): ClickHouse reads every granule
			// holding one. At the default 8 192 rows a granule, a batch
			// read the whole table once it held a few hundred thousand
			// rows: 925 rows read per page over a 440 000-page crawl,
			// growing with the crawl (quadratic in all). In granules of
			// 256 rows (a 64 KiB compressed block holds about 2 of them)
			// a batch reads at most 256 rows per fingerprint, whatever
			// the size of the table. 18.16 cannot change a table's
			// granularity: a new table, the old rows copied over (repeats
			// of a racing migration collapse on the key). The old table
			// is left for an operator to drop (docs/operations.md).
			`CREATE TABLE IF NOT EXISTS content_seen_v2 (
	crawl_id String,
	content_fp UInt64,
	url String,
	first_seen DateTime
) ENGINE = ReplacingMergeTree ORDER BY (crawl_id, content_fp, url) SETTINGS index_granularity = 256`,
			`INSERT INTO content_seen_v2 (crawl_id, content_fp, url, first_seen)
SELECT crawl_id, content_fp, url, first_seen FROM content_seen`,
		},
	},
	{
		Version: 207,
		Name:    "documents.json_ld, documents.opengraph, document_meta.structured_errors: structured data",
		Statements: []string{
			// The structured data a page publishes (services/parser's
			// README): its JSON-LD items as one JSON array and its
			// OpenGraph and Twitter card properties as one JSON object,
			// '' when it has none; in documents, with the page's text, so
			// that the documents export (and a re-crawl's carried-over
			// pages) reads them in the same row, no join. The count of
			// JSON-LD blocks that did not parse is metadata of the
			// extraction, next to text_truncated. Each ADD COLUMN on its
			// own: 18.16 has no ADD COLUMN IF NOT EXISTS, and a column
			// found there already counts as done (isColumnExists).
			`ALTER TABLE documents ADD COLUMN json_ld String DEFAULT ''`,
			`ALTER TABLE documents ADD COLUMN opengraph String DEFAULT ''`,
			`ALTER TABLE document_meta ADD COLUMN structured_errors UInt16 DEFAULT 0`,
		},
	},
	{
		Version: 208,
		Name:    "documents.language_detected: the language of the page's text",
		Statements: []string{
			// The ISO 639-1 code the parser detects from the page's
			// visible text (services/parser's README), next to the
			// declared language, '' when the text was too short or the
			// detector not confident. In documents, beside language, so
			// the two compare in one row. 18.16 has no ADD COLUMN IF NOT
			// EXISTS; a column found there already counts as done
			// (isColumnExists).
			`ALTER TABLE documents ADD COLUMN language_detected String DEFAULT ''`,
		},
	},
	{
		Version: 209,
		Name:    "documents.microdata: microdata items",
		Statements: []string{
			// The page's HTML microdata top-level items as one JSON array
			// ('' when none), next to json_ld and opengraph and for the
			// same reasons (migration 207).
			`ALTER TABLE documents ADD COLUMN microdata String DEFAULT ''`,
		},
	},
	{
		Version: 210,
		Name:    "documents.fields, documents.properties, document_meta.extract_rule, extract_missing, parse_error: extraction rules and documents that are not HTML",
		Statements: []string{
			// documents.fields: the fields a crawl's extraction rule took
			// from the page (libs/fieldrules), one JSON object, '' when no
			// rule matched the page. documents.properties: what a PDF or
			// an office file says of itself (author, created, modified,
			// pages), one JSON object, '' for HTML. Both beside json_ld
			// and for the same reasons (migration 207): the documents
			// export reads them in the row, and analysts read a field
			// with visitParamExtractString/Float (18.16 and current).
			// document_meta.extract_rule names the rule applied,
			// extract_missing the fields that matched nothing (a broken
			// selector shows within minutes), parse_error the kind of
			// error that stopped the reading of a document (a PDF that is
			// encrypted, truncated, too slow), '' when none. Each ADD
			// COLUMN on its own (18.16: no IF NOT EXISTS; a column found
			// counts as done).
			`ALTER TABLE documents ADD COLUMN fields String DEFAULT ''`,
			`ALTER TABLE documents ADD COLUMN properties String DEFAULT ''`,
			`ALTER TABLE document_meta ADD COLUMN extract_rule String DEFAULT ''`,
			`ALTER TABLE document_meta ADD COLUMN extract_missing Array(String) DEFAULT emptyArrayString()`,
			`ALTER TABLE document_meta ADD COLUMN parse_error String DEFAULT ''`,
		},
	},
	{
		Version: 211,
		Name:    "documents.rendered: pages a headless browser built",
		Statements: []string{
			// How the page's load in the fetcher's browser ended when its
			// text and links are the DOM the browser built (settled, or
			// timeout: the DOM as it stood at the limit); '' when the
			// document is the page as fetched. In documents, not
			// document_meta, so that an analyst's
			// countIf(rendered != '') and the export need no join.
			`ALTER TABLE documents ADD COLUMN rendered String DEFAULT ''`,
		},
	},
	{
		Version: 212,
		Name:    "links_dropped_v2: links the parser did not publish, per hour",
		Statements: []string{
			// links_dropped counted per minute: a crawl of many sites
			// wrote about a row per page (a batch's pages are of as many
			// hosts, each with its reasons), 1.1 M rows in 5 MiB after
			// 1.5 M requests over 20 000 hosts. Under the 5 MiB of fixed
			// cost 18.16's merge selector adds to every part, a table's
			// parts all look alike, and it merges them all whenever five
			// wait: the whole table was rewritten every few inserts, a
			// row about once per 20 s of the crawl, the most rows merged
			// of any table. Per hour a table holds a row per host,
			// reason and hour: the hosts' reasons of a crawl of an hour.
			// The per-minute rows of earlier crawls stay in
			// links_dropped, not copied (a summing copy that a racing
			// migration repeats would count twice); readers sum both
			// (docs/operations.md says when it can go).
			`CREATE TABLE IF NOT EXISTS links_dropped_v2 (
	crawl_id String,
	host String,
	reason String,
	hour DateTime,
	n UInt64
) ENGINE = SummingMergeTree(n) PARTITION BY toYYYYMM(hour) ORDER BY (crawl_id, host, reason, hour)`,
		},
	},
}

// NearCandidate is a document of the index that shares a band with a
// simhash looked up.
type NearCandidate struct {
	Simhash   uint64
	URL       string
	FirstSeen time.Time
}

// SeenContent returns, for those of fps already recorded in content_seen_v2
// for a crawl, the URL first seen with each (the earliest; ties broken by
// the smaller URL).
func (s *Store) SeenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	if len(fps) == 0 {
		return make(map[uint64]string), nil
	}
	var out map[uint64]string
	err := s.Read(ctx, "seen content", func() error {
		var err error
		out, err = s.seenContent(ctx, crawlID, fps)
		return err
	})
	return out, err
}

func (s *Store) seenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	out := make(map[uint64]string)
	// The fingerprints are numbers: inlined, they cannot inject anything,
	// and 18.16 binds no array parameters. Sorted and each once: a batch
	// of one site's copies asks about one text many times.
	fps = slices.Compact(slices.Sorted(slices.Values(fps)))
	var in strings.Builder
	for i, fp := range fps {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "%d", fp)
	}
	// PREWHERE on the fingerprints: the granules that may hold one are
	// filtered on content_fp alone, and url is read only where a row
	// matched. Without it 18.16 moves crawl_id = ? to PREWHERE (a
	// String compressed to almost nothing looks cheapest), every row of
	// every granule read passes, and url is decompressed for all of
	// them: on a 1.2 M-row table, 45 MB decompressed and 55-65 ms of
	// the server's CPU for a batch of 90 fingerprints, against 0 MB and
	// 10 ms with it. A Distributed table (a cluster) never moves a
	// condition to PREWHERE by itself; it passes this one to the shards.
	rows, err := s.conn.Query(ctx, "SELECT content_fp, argMin(url, (first_seen, url)) FROM content_seen_v2 PREWHERE content_fp IN ("+
		in.String()+") WHERE crawl_id = ? GROUP BY content_fp", crawlID)
	if err != nil {
		return nil, fmt.Errorf("query content_seen: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			fp  uint64
			url string
		)
		if err := rows.Scan(&fp, &url); err != nil {
			return nil, fmt.Errorf("scan content_seen: %w", err)
		}
		out[fp] = url
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read content_seen: %w", err)
	}
	return out, nil
}

// maxNearCandidates bounds one lookup's answer: a band holds a handful of
// documents per key unless a crawl has that many copies of one text.
const maxNearCandidates = 10000

// NearCandidates returns, per band asked, the documents of a crawl's
// near-duplicate index under that band's key (a document indexed twice,
// by two parsers or a redelivery, may come twice), at most
// maxNearCandidates in all.
func (s *Store) NearCandidates(ctx context.Context, crawlID string, bands []simhash.Band) (map[simhash.Band][]NearCandidate, error) {
	if len(bands) == 0 {
		return make(map[simhash.Band][]NearCandidate), nil
	}
	var out map[simhash.Band][]NearCandidate
	err := s.Read(ctx, "near candidates", func() error {
		var err error
		out, err = s.nearCandidates(ctx, crawlID, bands)
		return err
	})
	return out, err
}

func (s *Store) nearCandidates(ctx context.Context, crawlID string, bands []simhash.Band) (map[simhash.Band][]NearCandidate, error) {
	out := make(map[simhash.Band][]NearCandidate)
	// One IN over the key's second column, which the primary index
	// serves; numbers, inlined (18.16 binds no array parameters).
	keys := make([]uint64, len(bands))
	for i, b := range bands {
		keys[i] = b.Packed()
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	var in strings.Builder
	for i, k := range keys {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "%d", k)
	}
	// PREWHERE on the keys, as in seenContent: url is read only where a
	// key matched.
	rows, err := s.conn.Query(ctx, "SELECT band_key, simhash, url, first_seen FROM simhash_bands PREWHERE band_key IN ("+
		in.String()+fmt.Sprintf(") WHERE crawl_id = ? LIMIT %d", maxNearCandidates), crawlID)
	if err != nil {
		return nil, fmt.Errorf("query simhash_bands: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			packed uint64
			c      NearCandidate
		)
		if err := rows.Scan(&packed, &c.Simhash, &c.URL, &c.FirstSeen); err != nil {
			return nil, fmt.Errorf("scan simhash_bands: %w", err)
		}
		b := simhash.Unpack(packed)
		out[b] = append(out[b], c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read simhash_bands: %w", err)
	}
	return out, nil
}

// CarriedFrom returns, for those of fps (fingerprints in crawlID) that
// crawlID carried over from an earlier crawl (documents_carried), the crawl
// whose documents row holds the text. The query reads the table's key
// (crawl_id, url_fp): a batch of fingerprints is one indexed read.
func (s *Store) CarriedFrom(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error) {
	out := make(map[uint64]string, len(fps))
	if len(fps) == 0 {
		return out, nil
	}
	err := s.Read(ctx, "carried from", func() error {
		clear(out)
		// Fingerprints are numbers: inlined, they cannot inject
		// anything, and 18.16 binds no array parameters.
		var in strings.Builder
		for i, fp := range fps {
			if i > 0 {
				in.WriteByte(',')
			}
			fmt.Fprintf(&in, "%d", fp)
		}
		// PREWHERE on the fingerprints, as in seenContent.
		rows, err := s.conn.Query(ctx, "SELECT url_fp, argMax(from_crawl, checked_at) FROM documents_carried PREWHERE url_fp IN ("+
			in.String()+") WHERE crawl_id = ? GROUP BY url_fp", crawlID)
		if err != nil {
			return fmt.Errorf("query documents_carried: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				fp   uint64
				from string
			)
			if err := rows.Scan(&fp, &from); err != nil {
				return fmt.Errorf("scan documents_carried: %w", err)
			}
			out[fp] = from
		}
		return rows.Err()
	})
	return out, err
}
