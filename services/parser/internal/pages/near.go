package pages

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/simhash"
)

// NearIndex answers which documents of a crawl share a band with the
// simhashes looked up (chstore.Store.NearCandidates).
type NearIndex interface {
	NearCandidates(ctx context.Context, crawlID string, bands []simhash.Band) (map[simhash.Band][]chstore.NearCandidate, error)
}

// recentNearSize bounds the documents whose bands a processor remembers
// (about a kilobyte each): at least those whose simhash_bands rows may
// not be inserted yet (two batches per partition), with room to spare.
const recentNearSize = 1 << 13

type nearKey struct {
	crawl string
	band  simhash.Band
}

type nearDoc struct {
	crawl string
	sim   uint64
	url   string
	seen  time.Time
}

// recentNear is the near-duplicate index of the documents this process
// indexed lately, whose simhash_bands rows may not be inserted yet: a page
// mirrored on another host and fetched at the same moment (another
// partition, the same lookup round) is found through it. Older documents
// are forgotten first; ClickHouse's simhash_bands answers for them. Safe
// for concurrent use.
type recentNear struct {
	mu     sync.Mutex
	byBand map[nearKey][]chstore.NearCandidate
	ring   []nearDoc // insertion order, for eviction
	next   int
}

func newRecentNear(size int) *recentNear {
	return &recentNear{byBand: make(map[nearKey][]chstore.NearCandidate), ring: make([]nearDoc, 0, size)}
}

// claim finds the nearest earlier document to sim (among the stored
// candidates from ClickHouse and the documents remembered here), at most
// maxDist bits away and at another URL, and then remembers this one. ok is
// false when there is none: the document is not a near duplicate.
func (n *recentNear) claim(crawl string, sim uint64, bands []simhash.Band, url string, seen time.Time, stored []chstore.NearCandidate, maxDist int) (of string, dist int, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var best chstore.NearCandidate
	bestDist := maxDist + 1
	consider := func(c chstore.NearCandidate) {
		d := simhash.Distance(sim, c.Simhash)
		if c.URL == url || d > maxDist {
			return
		}
		// The nearest; among equals the first seen, then the smaller URL.
		if d < bestDist || d == bestDist && (c.FirstSeen.Before(best.FirstSeen) ||
			c.FirstSeen.Equal(best.FirstSeen) && c.URL < best.URL) {
			best, bestDist = c, d
		}
	}
	for _, c := range stored {
		consider(c)
	}
	for _, b := range bands {
		for _, c := range n.byBand[nearKey{crawl, b}] {
			consider(c)
		}
	}
	n.remember(nearDoc{crawl: crawl, sim: sim, url: url, seen: seen}, bands)
	if best.URL == "" {
		return "", 0, false
	}
	return best.URL, bestDist, true
}

// remember indexes doc under its bands, forgetting the oldest document
// when full. The caller holds mu.
func (n *recentNear) remember(doc nearDoc, bands []simhash.Band) {
	if len(n.ring) < cap(n.ring) {
		n.ring = append(n.ring, doc)
	} else {
		old := n.ring[n.next]
		for _, b := range simhash.Bands(old.sim) {
			k := nearKey{old.crawl, b}
			cs := slices.DeleteFunc(n.byBand[k], func(c chstore.NearCandidate) bool { return c.URL == old.url && c.Simhash == old.sim })
			if len(cs) == 0 {
				delete(n.byBand, k)
			} else {
				n.byBand[k] = cs
			}
		}
		n.ring[n.next] = doc
		n.next = (n.next + 1) % len(n.ring)
	}
	for _, b := range bands {
		k := nearKey{doc.crawl, b}
		n.byBand[k] = append(n.byBand[k], chstore.NearCandidate{Simhash: doc.sim, URL: doc.url, FirstSeen: doc.seen})
	}
}

// nearLookup is the near-duplicate index's answer for a batch's
// documents, by crawl and band.
type nearLookup map[string]map[simhash.Band][]chstore.NearCandidate

// lookupNear asks the near-duplicate index about the bands of every
// document with text (exact duplicates included: it runs while
// markDuplicates looks them up, so that both share a round's timing).
func (p *Processor) lookupNear(ctx context.Context, results []*result) (nearLookup, error) {
	if p.sinks.Near == nil {
		return nil, nil
	}
	byCrawl := make(map[string][]simhash.Band)
	for _, r := range results {
		if d := r.doc; d != nil && r.nearDist > 0 && d.row.Text != "" && d.meta.Simhash != 0 {
			bands := simhash.Bands(d.meta.Simhash)
			byCrawl[r.crawlID] = append(byCrawl[r.crawlID], bands[:]...)
		}
	}
	out := make(nearLookup, len(byCrawl))
	for crawlID, bands := range byCrawl {
		found, err := p.sinks.Near.NearCandidates(ctx, crawlID, bands)
		if err != nil {
			return nil, fmt.Errorf("look up near duplicates: %w", err)
		}
		out[crawlID] = found
	}
	return out, nil
}

// markNearDuplicates flags the documents whose simhash is within their
// crawl's near-duplicate distance of an earlier document of the crawl at another
// URL (among the stored candidates, or recently in this process), drops
// their links when the crawl does not follow duplicates and the page
// repeats one of its own host, and gives every
// document it looked at its band rows. Exact duplicates and pages without
// text are left out.
func (p *Processor) markNearDuplicates(results []*result, stored nearLookup) {
	if stored == nil {
		return
	}
	for _, r := range results {
		d := r.doc
		if d == nil || r.nearDist <= 0 || d.row.Text == "" || d.meta.IsDuplicate || d.meta.Simhash == 0 {
			continue
		}
		bands := simhash.Bands(d.meta.Simhash)
		d.bands = bands[:]
		var cands []chstore.NearCandidate
		for _, b := range d.bands {
			cands = append(cands, stored[r.crawlID][b]...)
		}
		of, dist, ok := p.near.claim(r.crawlID, d.meta.Simhash, d.bands, d.row.URL, d.row.FetchedAt, cands, r.nearDist)
		if !ok {
			continue
		}
		d.near = &chstore.NearDuplicateRow{CrawlID: r.crawlID, URL: d.row.URL, URLFP: d.row.URLFP, Host: d.row.Host,
			NearDuplicateOf: of, Distance: uint8(dist), Simhash: d.meta.Simhash, FoundAt: p.now().UTC()}
		d.msg.NearDuplicateOf, d.msg.NearDuplicateDistance = of, uint32(dist)
		r.outcome = OutcomeNearDuplicate
		if !r.followDup && sameHost(of, r.host) { // a mirror keeps its links: see markDuplicates
			r.drop(DropNearDuplicatePage, len(r.links)+len(r.inLinks))
			r.links, r.linkFPs, r.suspects, r.inLinks = nil, nil, 0, nil
		}
	}
}

// bandRows returns the simhash_bands rows of a document markNearDuplicates
// looked at (none for the others).
func bandRows(d *document) []chstore.SimhashBandRow {
	rows := make([]chstore.SimhashBandRow, 0, len(d.bands))
	for _, b := range d.bands {
		rows = append(rows, chstore.SimhashBandRow{CrawlID: d.row.CrawlID, BandKey: b.Packed(),
			Simhash: d.meta.Simhash, URL: d.row.URL, FirstSeen: d.row.FetchedAt})
	}
	return rows
}
