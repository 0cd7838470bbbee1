package chstore_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestNearCandidates: a simhash a few bits from an indexed one finds it
// through a shared band, with its first-seen URL; an unrelated simhash and
// another crawl find nothing.
func TestNearCandidates(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	const orig = uint64(0x9e3779b97f4a7c15)
	index := func(crawl, url string, h uint64, at time.Time) []chstore.SimhashBandRow {
		var rows []chstore.SimhashBandRow
		for _, b := range simhash.Bands(h) {
			rows = append(rows, chstore.SimhashBandRow{CrawlID: crawl, BandKey: b.Packed(), Simhash: h, URL: url, FirstSeen: at})
		}
		return rows
	}
	rows := index("c1", "http://a.test/original", orig, base)
	rows = append(rows, index("c1", "http://b.test/copy", orig, base.Add(time.Minute))...) // same text later
	rows = append(rows, index("c2", "http://c.test/other-crawl", orig^0xff, base)...)
	write(ctx, t, s, chstore.SimhashBands, rows)

	near := orig ^ 1<<3 ^ 1<<40 // two bits apart
	bands := simhash.Bands(near)
	got, err := s.NearCandidates(ctx, "c1", bands[:])
	if err != nil {
		t.Fatal(err)
	}
	var found []chstore.NearCandidate
	for _, cs := range got {
		found = append(found, cs...)
	}
	if len(found) == 0 {
		t.Fatal("no candidate for a simhash two bits away")
	}
	urls := map[string]time.Time{}
	for _, c := range found {
		if c.Simhash != orig {
			t.Errorf("candidate %+v, want the original's simhash", c)
		}
		urls[c.URL] = c.FirstSeen
	}
	if len(urls) != 2 || !urls["http://a.test/original"].Equal(base) || !urls["http://b.test/copy"].Equal(base.Add(time.Minute)) {
		t.Errorf("candidates %v, want the original and the copy with their first-seen times", urls)
	}
	far := simhash.Bands(^orig)
	if got, err := s.NearCandidates(ctx, "c1", far[:]); err != nil || len(got) != 0 {
		t.Errorf("unrelated simhash: %v, %v; want nothing", got, err)
	}
	if got, err := s.NearCandidates(ctx, "c3", bands[:]); err != nil || len(got) != 0 {
		t.Errorf("crawl without documents: %v, %v; want nothing", got, err)
	}
}

// TestNearCandidatesUseTheIndex: a lookup reads the granules of the keys
// asked, not the crawl's index: with 300 000 rows, a two-band lookup stays
// under a read limit of 16 384 rows (a few granules of 1 024).
func TestNearCandidatesUseTheIndex(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	rng := rand.New(rand.NewPCG(9, 9))
	rows := make([]chstore.SimhashBandRow, 0, 300000)
	for i := range 30000 {
		h := rng.Uint64()
		for _, b := range simhash.Bands(h) {
			rows = append(rows, chstore.SimhashBandRow{CrawlID: "big", BandKey: b.Packed(), Simhash: h,
				URL: fmt.Sprintf("http://h.test/%d", i), FirstSeen: base})
		}
	}
	write(ctx, t, s, chstore.SimhashBands, rows)
	want := rows[len(rows)-1]
	bands := simhash.Bands(want.Simhash)
	limited := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_rows_to_read": 16384}))
	got, err := s.NearCandidates(limited, "big", bands[:2])
	if err != nil {
		t.Fatalf("lookup of two bands over %d rows: %v", len(rows), err)
	}
	if cs := got[bands[0]]; len(cs) == 0 || cs[0].Simhash != want.Simhash {
		t.Errorf("band %v: %+v, want the indexed simhash %x", bands[0], cs, want.Simhash)
	}
	// The limit bites: a scan of the crawl's rows is refused.
	var n uint64
	err = s.Conn().QueryRow(limited, "SELECT count() FROM simhash_bands WHERE crawl_id = 'big' AND simhash % 7 = 1").Scan(&n)
	if err == nil {
		t.Errorf("a full scan passed the read limit (%d rows): the limit proves nothing", n)
	}
}

// TestSeenContentReadsURLsOfMatchesOnly: a lookup filters the granules it
// reads on the fingerprints before it reads url, so a batch of misses
// over a table of long URLs reads its fingerprints' granules and no URL:
// 64 fingerprints over 100 000 rows of 600-byte URLs stay under a read
// limit of 1 MiB, which the URLs of the same granules (64 × 256 rows ×
// 600 bytes, 9.8 MiB at most) pass. A hit still returns its URL.
func TestSeenContentReadsURLsOfMatchesOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	rng := rand.New(rand.NewPCG(7, 7))
	pad := strings.Repeat("x", 580)
	rows := make([]chstore.ContentSeenRow, 100000)
	for i := range rows {
		rows[i] = chstore.ContentSeenRow{CrawlID: "c-0123456789", ContentFP: rng.Uint64(),
			URL: fmt.Sprintf("http://h.test/%s/%d", pad, i), FirstSeen: base}
	}
	write(ctx, t, s, chstore.ContentSeen, rows)
	fps := make([]uint64, 64)
	for i := range fps {
		fps[i] = rng.Uint64()
	}
	hit := rows[4321]
	fps[0] = hit.ContentFP
	limited := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_bytes_to_read": 1 << 20}))
	got, err := s.SeenContent(limited, hit.CrawlID, fps)
	if err != nil {
		t.Fatalf("lookup of %d fingerprints over %d rows: %v", len(fps), len(rows), err)
	}
	if want := map[uint64]string{hit.ContentFP: hit.URL}; !maps.Equal(got, want) {
		t.Errorf("SeenContent = %v, want %v", got, want)
	}
	// The limit bites: reading the URLs of the same granules is refused.
	var n uint64
	err = s.Conn().QueryRow(limited, "SELECT count() FROM content_seen_v2 WHERE crawl_id = ? AND content_fp IN ("+
		strings.Trim(strings.Join(strings.Fields(fmt.Sprint(fps)), ","), "[]")+") AND length(url) > 0", hit.CrawlID).Scan(&n)
	if err == nil {
		t.Errorf("reading the URLs of the fingerprints' granules passed the limit (%d rows): the limit proves nothing", n)
	}
}
