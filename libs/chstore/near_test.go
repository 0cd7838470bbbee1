package chstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/chtest"
	"github.com/trawl-crawler/trawl/libs/simhash"
)

// TestNearCandidates: a simhash a few bits from an indexed one finds it
// through a shared band, with its first-seen URL; an unrelated simhash and
// another crawl find nothing.
func TestNearCandidates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	const orig = uint64(0x9e3779b97f4a7c15)
	index := func(crawl, url string, h uint64, at time.Time) []chstore.SimhashBandRow {
		var rows []chstore.SimhashBandRow
		for _, b := range simhash.Bands(h) {
			rows = append(rows, chstore.SimhashBandRow{CrawlID: crawl, Band: b.Index, BandKey: b.Key, Simhash: h, URL: url, FirstSeen: at})
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
	for _, c := range found {
		if c.Simhash != orig || c.URL != "http://a.test/original" {
			t.Errorf("candidate %+v, want the original's simhash with its first-seen URL", c)
		}
	}
	far := simhash.Bands(^orig)
	if got, err := s.NearCandidates(ctx, "c1", far[:]); err != nil || len(got) != 0 {
		t.Errorf("unrelated simhash: %v, %v; want nothing", got, err)
	}
	if got, err := s.NearCandidates(ctx, "c3", bands[:]); err != nil || len(got) != 0 {
		t.Errorf("crawl without documents: %v, %v; want nothing", got, err)
	}
}
