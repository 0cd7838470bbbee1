package pages_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLinksTable: every in-scope link of a page lands in the links table
// with its source, target, anchor text, rel, element and place on the
// page; links the crawl does not follow (here: nofollow and the trap
// guard) do not; a redelivered page adds no row.
func TestLinksTable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	links := chstore.NewBatchWriter(store, chstore.Links, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	runWriters(t, links)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		MaxRepeatedSegments: 2, StoreLinks: true}, pages.Sinks{Links: links}, now)
	body := `<html><body>
		<a href="/about">About   us</a>
		<a href="http://127.0.0.3/partner" rel="sponsored external">Partner</a>
		<a href="/login" rel="nofollow">Log in</a>
		<a href="/a/b/a/b/a/trap">trap</a>
		<a href="/pic"><img alt="A picture"></a>
	</body></html>`
	page := htmlPage("http://127.0.0.2/home", 2, body, now)
	r.produce(ctx, page)
	r.produce(ctx, page) // redelivered
	waitFor(t, ctx, "the parser's records committed", func() bool { return r.lag(ctx) == 0 })

	type row struct {
		Target, Anchor, Rel, Tag, Source, SourceHost, TargetHost string
		Position, Depth                                          uint16
	}
	var got []row
	waitFor(t, ctx, "links rows", func() bool {
		rows, err := store.Conn().Query(ctx, `SELECT target_url, anchor_text, rel, tag, source_url, source_host, target_host, position, depth
			FROM links FINAL WHERE crawl_id = 'c' ORDER BY position`)
		if err != nil {
			t.Logf("query links: %v", err)
			return false
		}
		defer rows.Close()
		got = got[:0]
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.Target, &x.Anchor, &x.Rel, &x.Tag, &x.Source, &x.SourceHost, &x.TargetHost, &x.Position, &x.Depth); err != nil {
				t.Logf("scan links: %v", err)
				return false
			}
			got = append(got, x)
		}
		return len(got) >= 3
	})
	want := []row{
		{"http://127.0.0.2/about", "About us", "", "a", "http://127.0.0.2/home", "127.0.0.2", "127.0.0.2", 1, 3},
		{"http://127.0.0.3/partner", "Partner", "sponsored external", "a", "http://127.0.0.2/home", "127.0.0.2", "127.0.0.3", 2, 3},
		{"http://127.0.0.2/pic", "A picture", "", "a", "http://127.0.0.2/home", "127.0.0.2", "127.0.0.2", 4, 3}, // 4th followable link: nofollow ones are not extracted
	}
	if len(got) != len(want) {
		t.Fatalf("links rows %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	var stored uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM links FINAL").Scan(&stored); err != nil || stored != 3 {
		t.Errorf("links rows after the redelivery: %d (%v), want 3", stored, err)
	}
}
