package chstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// sortEvents reads the server's counts of blocks written into MergeTree
// parts and of those that arrived sorted.
func sortEvents(t *testing.T, s *chstore.Store) (blocks, sorted uint64) {
	t.Helper()
	return count(t, s, "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'MergeTreeDataWriterBlocks'"),
		count(t, s, "SELECT toUInt64(sum(value)) FROM system.events WHERE event = 'MergeTreeDataWriterBlocksAlreadySorted'")
}

// insertCounted inserts rows through a BatchWriter of tbl in one insert
// and returns how many blocks the server wrote meanwhile, and how many of
// them it found sorted.
func insertCounted[T any](t *testing.T, s *chstore.Store, tbl chstore.Table[T], rows []T) (blocks, sorted uint64) {
	t.Helper()
	w := chstore.NewBatchWriter(s, tbl, chstore.BatchOptions{MaxRows: len(rows), FlushInterval: time.Hour}, zaptest.NewLogger(t), prometheus.NewRegistry())
	stop := runWriter(t, w)
	b0, s0 := sortEvents(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatalf("write %s: %v", tbl.Name, err)
	}
	b1, s1 := sortEvents(t, s)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	return b1 - b0, s1 - s0
}

// scrambled returns n rows of row(i), shuffled: keys that share prefixes,
// strings whose bytes order differently than their runes' case-folded
// forms ("é" after "z"), times that differ by the millisecond within one
// second and by seconds.
func scrambled[T any](n int, row func(i int) T) []T {
	rows := make([]T, n)
	for i := range rows {
		rows[i] = row(i)
	}
	rand.New(rand.NewPCG(5, 8)).Shuffle(n, func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return rows
}

var sortWords = []string{"a", "Z", "z", "é", "ab", "a b", ""}

// TestBlocksArriveSorted: a writer inserts the rows of every table with a
// Compare in the table's ORDER BY order, so that ClickHouse writes the
// part without sorting it: the order of Compare is the server's. Without
// Compare the same rows arrive unsorted (the count is not a constant).
func TestBlocksArriveSorted(t *testing.T) {
	s := chtest.NewStore(t)
	const n = 60
	at := func(i int) time.Time {
		return base.Add(time.Duration(i%3)*time.Second + time.Duration(i%5)*time.Millisecond)
	}
	w := func(i int) string { return sortWords[i%len(sortWords)] }
	fp := func(i int) uint64 { return uint64(i%4) << 62 >> uint(i%3) } // high bits: unsigned order

	check := func(name string, blocks, sorted uint64) {
		t.Helper()
		if blocks == 0 || sorted < 1 {
			t.Errorf("%s: %d of %d blocks arrived sorted, want the table's block sorted", name, sorted, blocks)
		}
	}
	b, sorted := insertCounted(t, s, chstore.FetchLog, scrambled(n, func(i int) chstore.FetchLogRow {
		ts := at(i)
		return chstore.FetchLogRow{CrawlID: w(i / 7), URL: fmt.Sprintf("u%d", i), URLFP: fp(i / 2), Host: w(i / 3),
			Attempt: uint16(i % 2), FetchedAt: ts.Truncate(time.Second), FetchedAtMs: chstore.Millis(ts)}
	}))
	check("fetch_log", b, sorted)
	b, sorted = insertCounted(t, s, chstore.URLSeen, scrambled(n, func(i int) chstore.SeenRow {
		return chstore.SeenRow{CrawlID: w(i), Partition: uint16(i % 3), FP: fp(i), URL: fmt.Sprintf("u%d", i), FirstSeen: base}
	}))
	check("url_seen", b, sorted)
	b, sorted = insertCounted(t, s, chstore.Documents, scrambled(n, func(i int) chstore.DocumentRow {
		return chstore.DocumentRow{CrawlID: w(i), URL: fmt.Sprintf("u%d", i), URLFP: fp(i) + uint64(i), Text: w(i / 2), FetchedAt: base}
	}))
	check("documents", b, sorted)
	b, sorted = insertCounted(t, s, chstore.DocumentMeta, scrambled(n, func(i int) chstore.DocumentMetaRow {
		return chstore.DocumentMetaRow{CrawlID: w(i), URL: fmt.Sprintf("u%d", i), URLFP: fp(i) + uint64(i), FetchedAt: base}
	}))
	check("document_meta", b, sorted)
	b, sorted = insertCounted(t, s, chstore.ContentSeen, scrambled(n, func(i int) chstore.ContentSeenRow {
		return chstore.ContentSeenRow{CrawlID: w(i / 5), ContentFP: fp(i), URL: w(i / 2), FirstSeen: base}
	}))
	check("content_seen", b, sorted)
	b, sorted = insertCounted(t, s, chstore.LinksDropped, scrambled(n, func(i int) chstore.LinksDroppedRow {
		return chstore.LinksDroppedRow{CrawlID: w(i / 9), Host: w(i / 3), Reason: w(i), Hour: base.Add(time.Duration(i%4) * time.Hour), N: 1}
	}))
	check("links_dropped_v2", b, sorted)
	b, sorted = insertCounted(t, s, chstore.URLEvents, scrambled(n, func(i int) chstore.URLEventRow {
		return chstore.URLEventRow{CrawlID: w(i / 9), URL: fmt.Sprintf("u%d", i), URLFP: fp(i / 3), State: w(i), Reason: w(i / 2), EventTime: base}
	}))
	check("url_events", b, sorted)

	// The control: the same kind of rows without Compare arrive as they
	// were written, unsorted.
	plain := chstore.Documents
	plain.Compare = nil
	rows := scrambled(n, func(i int) chstore.DocumentRow {
		return chstore.DocumentRow{CrawlID: "c", URL: fmt.Sprintf("u%d", i), URLFP: uint64(i + 1), FetchedAt: base}
	})
	if slices.IsSortedFunc(rows, chstore.Documents.Compare) {
		t.Fatal("the control rows are sorted already")
	}
	// system.events counts the whole server's inserts, and the suite's
	// other packages insert into the same server meanwhile (sorted blocks
	// of theirs): the control holds when a window of its insert saw a
	// block arrive unsorted, its own; three windows that saw none fail.
	var tries []string
	for range 3 {
		b, sorted := insertCounted(t, s, plain, rows)
		if b > sorted {
			return
		}
		tries = append(tries, fmt.Sprintf("%d of %d", sorted, b))
	}
	t.Errorf("documents without Compare: %v blocks arrived sorted in three inserts, want one unsorted in each", tries)
}
