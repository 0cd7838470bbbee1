package pages_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestNearDuplicates: a page on another host whose text is its original's
// with one word changed is marked its near duplicate — found through
// ClickHouse's simhash_bands by a parser that never saw the original, and
// through the parser's own memory when the original's rows are not
// inserted yet — and its links are not followed when it repeats a page of
// its own host (a mirror on another host keeps them); unrelated pages are
// not near duplicates.
func TestNearDuplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	slow := chstore.BatchOptions{FlushInterval: 30 * time.Second}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	bandsFast := chstore.NewBatchWriter(store, chstore.SimhashBands, fast, log, nil)
	bandsSlow := chstore.NewBatchWriter(store, chstore.SimhashBands, slow, log, nil)
	nears := chstore.NewBatchWriter(store, chstore.NearDuplicates, fast, log, nil)
	runWriters(t, docs, bandsFast, bandsSlow, nears)
	cfg := pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true, NearDistance: simhash.NearDistance} // FollowDuplicates false

	rng := rand.New(rand.NewPCG(5, 8))
	words := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("w%d", rng.IntN(4000))
		}
		return out
	}
	// nearCopy replaces one word, choosing one that keeps the copy within
	// the distance (most do: see libs/simhash's precision test).
	nearCopy := func(w []string) []string {
		for i := range w {
			c := append([]string(nil), w...)
			c[i] = "changed"
			if simhash.Distance(simhash.Sum64(strings.Join(w, " ")), simhash.Sum64(strings.Join(c, " "))) <= simhash.NearDistance {
				return c
			}
		}
		t.Fatal("no one-word edit stays within the distance")
		return nil
	}
	page := func(host, path string, w []string) string {
		return fmt.Sprintf(`<html><body><p>%s</p><a href="http://%s/next-of-%s">next</a></body></html>`, strings.Join(w, " "), host, path)
	}
	orig, other := words(400), words(400)
	origCopy, otherCopy := nearCopy(orig), nearCopy(other)

	// A parser indexes the original.
	r1 := startParser(t, cfg, pages.Sinks{Documents: docs, Bands: bandsFast, NearDups: nears, Near: store}, now)
	r1.produce(ctx, htmlPage("http://127.0.0.2/orig", 1, page("127.0.0.2", "orig", orig), now))
	if d := readDocuments(t, ctx, r1.kc, 1)[0]; d.NearDuplicateOf != "" {
		t.Fatalf("original marked a near duplicate of %s", d.NearDuplicateOf)
	}
	waitFor(t, ctx, "the original's simhash_bands rows", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT count() FROM simhash_bands WHERE url = 'http://127.0.0.2/orig'").Scan(&n)
		return err == nil && n == simhash.BandCount
	})

	// Another parser, which never saw it, gets the copy, an unrelated page
	// and that page's copy; its own index rows are not inserted for 30s.
	r2 := startParser(t, cfg, pages.Sinks{Documents: docs, Bands: bandsSlow, NearDups: nears, Near: store}, now)
	r2.produce(ctx, htmlPage("http://127.0.0.3/mirror", 1, page("127.0.0.3", "mirror", origCopy), now))
	r2.produce(ctx, htmlPage("http://127.0.0.3/other", 1, page("127.0.0.3", "other", other), now))
	r2.produce(ctx, htmlPage("http://127.0.0.3/other-copy", 1, page("127.0.0.3", "other-copy", otherCopy), now))
	got := readDocuments(t, ctx, r2.kc, 3)
	want := map[string]string{
		"http://127.0.0.3/mirror":     "http://127.0.0.2/orig",  // through ClickHouse
		"http://127.0.0.3/other":      "",                       // unrelated
		"http://127.0.0.3/other-copy": "http://127.0.0.3/other", // through the parser's memory
	}
	for _, d := range got {
		if d.NearDuplicateOf != want[d.Url] {
			t.Errorf("%s: near duplicate of %q, want %q", d.Url, d.NearDuplicateOf, want[d.Url])
		}
		if d.NearDuplicateOf != "" && (d.NearDuplicateDistance > simhash.NearDistance || d.IsDuplicate) {
			t.Errorf("%s: distance %d, exact duplicate %v", d.Url, d.NearDuplicateDistance, d.IsDuplicate)
		}
	}
	waitFor(t, ctx, "near_duplicates rows", func() bool {
		var n uint64
		err := store.Conn().QueryRow(ctx, "SELECT count() FROM near_duplicates FINAL WHERE near_duplicate_of != ''").Scan(&n)
		return err == nil && n == 2
	})
	var of string
	if err := store.Conn().QueryRow(ctx, "SELECT near_duplicate_of FROM near_duplicates FINAL WHERE url = 'http://127.0.0.3/mirror'").Scan(&of); err != nil || of != "http://127.0.0.2/orig" {
		t.Errorf("near_duplicates row of the mirror: %q, %v", of, err)
	}
	if got := counterValue(t, r2.reg, "pages_parsed_total", "outcome", pages.OutcomeNearDuplicate); got != 2 {
		t.Errorf("pages_parsed_total{outcome=near_duplicate} = %v, want 2", got)
	}
	if got := counterValue(t, r2.reg, "links_dropped_total", "reason", pages.DropNearDuplicatePage); got != 1 {
		t.Errorf("links_dropped_total{reason=near_duplicate_page} = %v, want 1: the same-host copy's link not followed, the mirror's (another host) followed", got)
	}
}
