package budget

import "context"

// Hosts is one partition's per-host page budgets (admit.HostBudget): the
// URLs admitted per crawl and host. A host lives on one partition, so the
// count is exact in the partition's owner: loaded per crawl, the first
// time the crawl needs it after an assignment, then counted in memory.
// Not safe for concurrent use (one partition's handler).
type Hosts struct {
	partition int
	limit     func(crawlID string) int64
	load      func(ctx context.Context, partition int, crawlID string) (map[string]int64, error)
	counts    map[string]map[string]int64 // crawl → host → admitted; a crawl once loaded
}

// NewHosts returns the per-host budgets of partition: limit returns a
// crawl's budget per host (0: unlimited), load its admitted URLs per host
// in the partition (from url_seen).
func NewHosts(partition int, limit func(crawlID string) int64, load func(ctx context.Context, partition int, crawlID string) (map[string]int64, error)) *Hosts {
	return &Hosts{partition: partition, limit: limit, load: load}
}

// Take takes one page of host's budget in crawlID, reporting false when
// none is left; the crawl's counts are loaded first when needed.
func (h *Hosts) Take(ctx context.Context, crawlID, host string) (bool, error) {
	lim := h.limit(crawlID)
	if lim <= 0 {
		return true, nil
	}
	counts, ok := h.counts[crawlID]
	if !ok {
		c, err := h.load(ctx, h.partition, crawlID)
		if err != nil {
			return false, err
		}
		if c == nil {
			c = make(map[string]int64)
		}
		if h.counts == nil {
			h.counts = make(map[string]map[string]int64)
		}
		h.counts[crawlID], counts = c, c
	}
	if counts[host] >= lim {
		return false, nil
	}
	counts[host]++
	return true, nil
}

// Give returns a page of host's budget in crawlID taken for an admission
// whose batch failed before anything was produced. It does nothing for a
// crawl whose counts were never loaded.
func (h *Hosts) Give(crawlID, host string) {
	if counts := h.counts[crawlID]; counts != nil {
		counts[host]--
	}
}
