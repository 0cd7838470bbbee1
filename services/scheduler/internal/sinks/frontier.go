package sinks

import (
	"context"
	"fmt"
	"strings"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Frontier is the ClickHouse frontier (frontier.Store): rows go through a
// batching writer, Pending queries the table.
type Frontier struct {
	W     *chstore.BatchWriter[chstore.FrontierRow]
	Store *chstore.Store
}

// Write implements frontier.Store.
func (f Frontier) Write(ctx context.Context, rows ...chstore.FrontierRow) error {
	return f.W.Write(ctx, rows...)
}

// Pending implements frontier.Store. A URL is pending while its key has no
// released row; the per-host limit keeps the answer bounded however large
// the frontier is. A host's rows come best first: highest priority, then
// shallowest (priority.Rank), then by fingerprint.
func (f Frontier) Pending(ctx context.Context, partition, perHost int, skip []string) ([]chstore.FrontierRow, error) {
	args := []any{uint16(partition)}
	skipSQL := ""
	if len(skip) > 0 {
		skipSQL = " AND crawl_id NOT IN (" + strings.TrimSuffix(strings.Repeat("?,", len(skip)), ",") + ")"
		for _, id := range skip {
			args = append(args, id)
		}
	}
	args = append(args, uint64(perHost))
	var out []chstore.FrontierRow
	err := f.Store.Read(ctx, "read frontier", func() error {
		rows, err := f.Store.Conn().Query(ctx, `SELECT crawl_id, host, fp, d, u, p, a, e, t, et, lm, dc, pr, prr FROM (
		SELECT crawl_id, host, fp, any(depth) AS d, any(url) AS u, any(parent_url) AS p,
			any(anchor_text) AS a, any(serp_engine) AS e, any(discovered_at) AS t,
			any(etag) AS et, any(last_modified) AS lm, any(document_crawl_id) AS dc,
			any(priority) AS pr, any(priority_reason) AS prr
		FROM frontier_v2
		WHERE partition = ?`+skipSQL+`
		GROUP BY crawl_id, host, fp
		HAVING max(state) = 0
	) ORDER BY host, pr DESC, d, fp LIMIT ? BY host`, args...)
		if err != nil {
			return fmt.Errorf("query frontier: %w", err)
		}
		defer rows.Close()
		out = out[:0]
		for rows.Next() {
			r := chstore.FrontierRow{Partition: uint16(partition)}
			if err := rows.Scan(&r.CrawlID, &r.Host, &r.FP, &r.Depth, &r.URL, &r.ParentURL, &r.AnchorText, &r.SerpEngine, &r.DiscoveredAt,
				&r.ETag, &r.LastModified, &r.DocumentCrawlID, &r.Priority, &r.PriorityReason); err != nil {
				return fmt.Errorf("scan frontier: %w", err)
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read frontier: %w", err)
		}
		return nil
	})
	return out, err
}
