package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// fetcherMigrations are the schema versions 100-199, owned by the fetcher
// (per-host state, retries, robots), and the columns added to fetch_log
// from 203 on (numbered after the parser's 200-202, which came first).
// Append; never edit an applied version.
var fetcherMigrations = []Migration{
	{
		Version: 100,
		Name:    "robots_txt: the robots.txt of each origin as the fetcher applies it",
		Statements: []string{
			// One row per robots.txt fetch that gave rules (an answer that
			// failed is never kept). A newer fetch of an origin replaces
			// the older (version fetched_at). Ordered by partition first,
			// so that the owner of a partition loads its origins with one
			// range read (LoadRobots); not partitioned by time, so that
			// versions of an origin always meet. rules holds the groups
			// that apply to agent, normalized, in robots.txt syntax: at
			// most the 500 KiB a fetch reads, usually a few lines.
			`CREATE TABLE IF NOT EXISTS robots_txt (
	partition UInt16,
	origin String,
	host String,
	agent String,
	outcome String,
	status UInt16,
	rules String,
	crawl_delay_ms UInt32,
	sitemaps Array(String),
	body_bytes UInt32,
	fetched_at DateTime,
	expires DateTime,
	fetcher String
) ENGINE = ReplacingMergeTree(fetched_at) ORDER BY (partition, origin)`,
		},
	},
	{
		Version: 203,
		Name:    "fetch_log.final: whether an attempt is its request's last",
		Statements: []string{
			// 1 when the fetcher will not try the request again (fetched,
			// failed for good or after its last retry, robots-denied,
			// redirected, cancelled), 0 when it scheduled a retry. An
			// admitted URL is terminal once it has a final row, so a
			// crawl's pending URLs are the admitted ones without one
			// (crawl_status). Rows from before this column read 1: the
			// old answer, which counted every attempt as an outcome. A
			// redelivered row carries the same value, so counting
			// distinct fingerprints stays exact without FINAL.
			`ALTER TABLE fetch_log ADD COLUMN final UInt8 DEFAULT 1`,
		},
	},
	{
		Version: 101,
		Name:    "fetch_log.etag and last_modified: the validators of each answer",
		Statements: []string{
			// The ETag and Last-Modified of an answer (of a 304: those the
			// request sent, unless it gave new ones), so that the next
			// crawl of the same sites (CrawlSpec.previous_crawl_id) asks
			// for the page conditionally (PreviousPages). Empty when the
			// answer had none; rows from before these columns read empty.
			// Two short strings per row; one statement each (18.16 has no
			// ADD COLUMN IF NOT EXISTS: each "already exists" counts as
			// done on its own).
			`ALTER TABLE fetch_log ADD COLUMN etag String DEFAULT ''`,
			`ALTER TABLE fetch_log ADD COLUMN last_modified String DEFAULT ''`,
		},
	},
	{
		Version: 102,
		Name:    "fetch_log.priority and priority_reason: what ordered each request (best-first)",
		Statements: []string{
			// The request's priority (FetchRequest.priority, libs/priority)
			// when it was fetched, after any raise from in-links collected
			// while it waited, and the signals that made it. 0 and '' with
			// no signal (breadth-first) and for rows from before. One
			// statement each (execIdempotent).
			`ALTER TABLE fetch_log ADD COLUMN priority Int32 DEFAULT 0`,
			`ALTER TABLE fetch_log ADD COLUMN priority_reason String DEFAULT ''`,
		},
	},
}

// PreviousPage is a URL an earlier crawl fetched, as the next crawl of the
// same sites asks for it again (PreviousPages).
type PreviousPage struct {
	URL          string
	Host         string
	Depth        uint16
	Status       uint16 // 2xx, or 304 (the page was carried over in that crawl)
	ETag         string
	LastModified string
}

// PreviousPages streams the pages crawlID fetched: the final outcomes of
// its fetch requests that got an answer, 2xx or 304 (not failures, not
// robots-denied, not redirects: a redirect's target is a page of its own),
// with their depth and validators. It is one read of the crawl's range of
// fetch_log (its sort key's prefix), without GROUP BY or ORDER BY, so that
// the server streams it in blocks and its cost grows with the crawl, not
// with its square; the rows come in no particular order, and a URL may come
// more than once (a revisited page, a redelivered row not yet merged): the
// scheduler deduplicates. fn runs on the calling goroutine while the server
// streams; an error from it stops the read and is returned. A read that
// fails part-way (the server gone) is run again from the start, as every
// read is (Read): fn sees the first rows again.
func (s *Store) PreviousPages(ctx context.Context, crawlID string, fn func(PreviousPage) error) error {
	if crawlID == "" {
		return fmt.Errorf("read previous pages: crawl id must not be empty")
	}
	return s.Read(ctx, "previous pages", func() error {
		rows, err := s.conn.Query(ctx, `SELECT url, host, depth, status, etag, last_modified FROM fetch_log
WHERE crawl_id = ? AND final = 1 AND error_kind = '' AND ((status >= 200 AND status < 300) OR status = 304)`, crawlID)
		if err != nil {
			return fmt.Errorf("query previous pages of crawl %s: %w", crawlID, err)
		}
		defer rows.Close()
		for rows.Next() {
			var p PreviousPage
			if err := rows.Scan(&p.URL, &p.Host, &p.Depth, &p.Status, &p.ETag, &p.LastModified); err != nil {
				return fmt.Errorf("scan previous page: %w", err)
			}
			if err := fn(p); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read previous pages of crawl %s: %w", crawlID, err)
		}
		return nil
	})
}

// LoadRobots streams the latest robots.txt of every origin of partition
// whose rules were selected for agent and have not expired at now, most
// recently fetched first, at most limit of them (limit <= 0: all): rows
// whose agent is agent, or lists agent first and then the other agents the
// same robots.txt was compiled for ("trawl,examplebot"). fn runs on the
// calling goroutine. The latest version of an origin is chosen by
// argMax rather than FINAL, so that filtering on non-key columns never
// picks an older version (PREWHERE may run before FINAL merges).
func (s *Store) LoadRobots(ctx context.Context, partition int, agent string, now time.Time, limit int, fn func(RobotsRow)) error {
	if partition < 0 || partition > 65535 {
		return fmt.Errorf("load robots.txt: partition %d out of range", partition)
	}
	q := `SELECT origin,
	argMax(host, fetched_at), argMax(agent, fetched_at) AS latest_agent, argMax(outcome, fetched_at),
	argMax(status, fetched_at), argMax(rules, fetched_at), argMax(crawl_delay_ms, fetched_at),
	argMax(sitemaps, fetched_at), argMax(body_bytes, fetched_at), max(fetched_at) AS latest_fetched,
	argMax(expires, fetched_at) AS latest_expires, argMax(fetcher, fetched_at)
FROM robots_txt
WHERE partition = ?
GROUP BY origin
HAVING (latest_agent = ? OR substring(latest_agent, 1, ?) = ?) AND latest_expires > toDateTime(?)
ORDER BY latest_fetched DESC`
	args := []any{uint16(partition), agent, uint64(len(agent) + 1), agent + ",", now.Unix()}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("query robots_txt partition %d: %w", partition, err)
	}
	defer rows.Close()
	for rows.Next() {
		r := RobotsRow{Partition: uint16(partition)}
		if err := rows.Scan(&r.Origin, &r.Host, &r.Agent, &r.Outcome, &r.Status, &r.Rules, &r.CrawlDelayMs,
			&r.Sitemaps, &r.BodyBytes, &r.FetchedAt, &r.Expires, &r.Fetcher); err != nil {
			return fmt.Errorf("scan robots_txt: %w", err)
		}
		fn(r)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read robots_txt partition %d: %w", partition, err)
	}
	return nil
}

// RecordedAttempts returns, for the attempts of crawlID among the given
// hosts and URL fingerprints that have a fetch_log row, the time of the
// latest such row (second precision). The fetcher asks it about redelivered
// fetch requests: a recorded attempt was fetched and its outcome published
// by a previous owner of the partition. The query reads the table's sort
// key prefix (crawl_id, host, url_fp).
func (s *Store) RecordedAttempts(ctx context.Context, crawlID string, hosts []string, fps []uint64) (map[AttemptKey]time.Time, error) {
	if len(hosts) == 0 || len(fps) == 0 {
		return make(map[AttemptKey]time.Time), nil
	}
	var out map[AttemptKey]time.Time
	err := s.Read(ctx, "recorded attempts", func() error {
		var err error
		out, err = s.recordedAttempts(ctx, crawlID, hosts, fps)
		return err
	})
	return out, err
}

func (s *Store) recordedAttempts(ctx context.Context, crawlID string, hosts []string, fps []uint64) (map[AttemptKey]time.Time, error) {
	out := make(map[AttemptKey]time.Time)
	args := make([]any, 0, 1+len(hosts))
	args = append(args, crawlID)
	for _, h := range hosts {
		args = append(args, h)
	}
	// Fingerprints are numbers: inlined, they cannot inject anything, and
	// 18.16 binds no array parameters.
	var in strings.Builder
	for i, fp := range fps {
		if i > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "%d", fp)
	}
	q := "SELECT host, url_fp, attempt, max(fetched_at) FROM fetch_log WHERE crawl_id = ? AND host IN (" +
		strings.TrimSuffix(strings.Repeat("?,", len(hosts)), ",") + ") AND url_fp IN (" + in.String() +
		") GROUP BY host, url_fp, attempt"
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query recorded attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k  AttemptKey
			at time.Time
		)
		if err := rows.Scan(&k.Host, &k.URLFP, &k.Attempt, &at); err != nil {
			return nil, fmt.Errorf("scan recorded attempt: %w", err)
		}
		out[k] = at
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read recorded attempts: %w", err)
	}
	return out, nil
}
