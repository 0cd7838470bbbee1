package pages

import (
	"context"
	"fmt"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// markDuplicates flags the documents whose content fingerprint the crawl
// has seen before (in ClickHouse, or recently in this process: earlier in
// the batch or in a batch still being persisted) at another URL,
// and drops the links of duplicates when the crawl does not follow them
// (followDup) and the duplicate is on the same host as the page it
// repeats: a copy, or a trap that serves one text at ever new URLs of a
// site. A duplicate on another host (a mirror) keeps its links: they lead
// into its own site, and those already known are dropped as usual (the
// recent-links table here, the seen set in the scheduler).
// Pages with no text are never duplicates.
func (p *Processor) markDuplicates(ctx context.Context, results []*result) error {
	byCrawl := make(map[string][]uint64)
	for _, r := range results {
		if r.doc != nil && r.doc.row.Text != "" {
			byCrawl[r.crawlID] = append(byCrawl[r.crawlID], r.doc.row.ContentFP)
		}
	}
	if len(byCrawl) == 0 || p.sinks.Seen == nil {
		return nil
	}
	first := make(map[string]map[uint64]string, len(byCrawl))
	for crawlID, fps := range byCrawl {
		seen, err := p.sinks.Seen.SeenContent(ctx, crawlID, fps)
		if err != nil {
			return fmt.Errorf("look up content fingerprints: %w", err)
		}
		first[crawlID] = seen
	}
	for _, r := range results {
		if r.doc == nil || r.doc.row.Text == "" {
			continue
		}
		fp, u := r.doc.row.ContentFP, r.doc.row.URL
		// The first URL this process claimed (pages of this batch, of
		// batches still being persisted), else the stored one, else u.
		orig := p.content.claim(contentKey{r.crawlID, fp}, first[r.crawlID][fp], u)
		if orig == u { // the first page, a redelivery or a re-crawl of it
			continue
		}
		r.doc.meta.IsDuplicate, r.doc.meta.DuplicateOf = true, orig
		r.doc.msg.IsDuplicate, r.doc.msg.DuplicateOf = true, orig
		r.outcome = OutcomeDuplicate
		if !r.followDup && sameHost(orig, r.host) {
			r.drop(DropDuplicatePage, len(r.links)+len(r.inLinks))
			r.links, r.linkFPs, r.suspects, r.inLinks = nil, nil, 0, nil
		}
	}
	return nil
}

// sameHost reports whether the canonical URL u is on host (a politeness
// key).
func sameHost(u, host string) bool {
	k, err := urlcanon.CanonicalKey(u)
	return err == nil && k == host
}
