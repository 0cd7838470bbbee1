package chstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestRepeatedInsertCollapses: redelivered rows (the same rows inserted
// again, as at-least-once delivery does) are counted once by FINAL and
// after OPTIMIZE, in every table.
func TestRepeatedInsertCollapses(t *testing.T) {
	const unique, repeats = 200, 3
	tests := []struct {
		name  string
		table string
		write func(ctx context.Context, s *chstore.Store, t *testing.T) error
	}{
		{name: "fetch_log", table: "fetch_log", write: func(ctx context.Context, s *chstore.Store, t *testing.T) error {
			return writeAll(ctx, t, s, chstore.FetchLog, unique, func(i int) chstore.FetchLogRow { return fetchRow("c1", i) })
		}},
		{name: "url_seen", table: "url_seen", write: func(ctx context.Context, s *chstore.Store, t *testing.T) error {
			return writeAll(ctx, t, s, chstore.URLSeen, unique, func(i int) chstore.SeenRow { return seenRow("c1", i%4, i) })
		}},
		{name: "documents", table: "documents", write: func(ctx context.Context, s *chstore.Store, t *testing.T) error {
			return writeAll(ctx, t, s, chstore.Documents, unique, func(i int) chstore.DocumentRow { return docRow("c1", i) })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			s := chtest.NewStore(t)
			for range repeats {
				if err := tt.write(ctx, s, t); err != nil {
					t.Fatalf("write: %v", err)
				}
			}
			if got := count(t, s, "SELECT count() FROM "+tt.table); got != unique*repeats {
				t.Fatalf("raw rows = %d, want %d (one insert per repeat)", got, unique*repeats)
			}
			if got := count(t, s, "SELECT count() FROM "+tt.table+" FINAL"); got != unique {
				t.Errorf("FINAL rows = %d, want %d", got, unique)
			}
			if tt.table == "fetch_log" {
				// The rollups count inserts: redelivered rows included.
				if got := count(t, s, "SELECT sum(pages) FROM fetch_per_host_minute"); got != unique*repeats {
					t.Errorf("rollup pages = %d, want %d (every insert)", got, unique*repeats)
				}
				if got := count(t, s, "SELECT sum(n) FROM fetch_status_minute"); got != unique*repeats {
					t.Errorf("rollup statuses = %d, want %d (every insert)", got, unique*repeats)
				}
			}
			if err := s.Conn().Exec(ctx, "OPTIMIZE TABLE "+tt.table+" FINAL"); err != nil {
				t.Fatalf("optimize: %v", err)
			}
			if got := count(t, s, "SELECT count() FROM "+tt.table); got != unique {
				t.Errorf("rows after OPTIMIZE = %d, want %d", got, unique)
			}
		})
	}
}

// writeAll writes n rows built by row through a fresh writer, in one batch.
func writeAll[T any](ctx context.Context, t *testing.T, s *chstore.Store, tbl chstore.Table[T], n int, row func(int) T) error {
	w := chstore.NewBatchWriter(s, tbl, chstore.BatchOptions{MaxRows: n, FlushInterval: 10 * time.Millisecond}, zaptest.NewLogger(t), nil)
	stop := runWriter(t, w)
	rows := make([]T, n)
	for i := range rows {
		rows[i] = row(i)
	}
	if err := w.Write(ctx, rows...); err != nil {
		return err
	}
	return stop()
}

func seenRow(crawl string, partition, i int) chstore.SeenRow {
	return chstore.SeenRow{
		CrawlID:   crawl,
		Partition: uint16(partition),
		FP:        uint64(i)*0x9e3779b97f4a7c15 + uint64(partition),
		URL:       fmt.Sprintf("http://p%d.test/%d", partition, i),
		Depth:     uint16(i % 4),
		FirstSeen: base.Add(time.Duration(i) * time.Second),
	}
}

func docRow(crawl string, i int) chstore.DocumentRow {
	return chstore.DocumentRow{
		CrawlID:     crawl,
		URL:         fmt.Sprintf("http://h%d.test/p/%d", i%7, i),
		URLFP:       uint64(i)*0x9e3779b97f4a7c15 + 1,
		Host:        fmt.Sprintf("h%d.test", i%7),
		FetchedAt:   base.Add(time.Duration(i) * time.Second),
		Status:      200,
		Title:       fmt.Sprintf("page %d", i),
		Text:        "some text",
		ContentFP:   uint64(i % 50),
		Outlinks:    uint32(i % 10),
		ContentType: "text/html",
		Language:    "en",
	}
}

// TestLoadSeen: LoadSeen returns exactly the fingerprints written for the
// partition, across crawls, and nothing of other partitions.
func TestLoadSeen(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := chtest.NewStore(t)
	type key struct {
		crawl string
		fp    uint64
	}
	want := map[int]map[key]bool{}
	var rows []chstore.SeenRow
	for i := range 3000 {
		crawl := []string{"c1", "c2"}[i%2]
		p := i % 5
		r := seenRow(crawl, p, i)
		rows = append(rows, r)
		if want[p] == nil {
			want[p] = map[key]bool{}
		}
		want[p][key{crawl, r.FP}] = true
	}
	w := chstore.NewBatchWriter(s, chstore.URLSeen, chstore.BatchOptions{MaxRows: 1000}, zaptest.NewLogger(t), nil)
	stop := runWriter(t, w)
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		partition int
		skip      []string
	}{
		{"partition 0", 0, nil}, {"partition 3", 3, nil}, {"empty partition", 9, nil},
		{"a retired crawl left out", 3, []string{"c2"}},
		{"every crawl retired", 3, []string{"c1", "c2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[key]bool{}
			err := s.LoadSeen(ctx, tt.partition, tt.skip, func(crawl string, fp uint64) { got[key{crawl, fp}] = true })
			if err != nil {
				t.Fatal(err)
			}
			wantP := maps.Clone(want[tt.partition])
			maps.DeleteFunc(wantP, func(k key, _ bool) bool { return slices.Contains(tt.skip, k.crawl) })
			if !maps.Equal(got, wantP) {
				t.Errorf("partition %d without %v: got %d fingerprints, want %d", tt.partition, tt.skip, len(got), len(wantP))
			}
			for _, crawl := range tt.skip { // what a crawl running again loads
				one := map[key]bool{}
				if err := s.LoadSeenCrawl(ctx, tt.partition, crawl, func(fp uint64) { one[key{crawl, fp}] = true }); err != nil {
					t.Fatal(err)
				}
				wantC := maps.Clone(want[tt.partition])
				maps.DeleteFunc(wantC, func(k key, _ bool) bool { return k.crawl != crawl })
				if !maps.Equal(one, wantC) {
					t.Errorf("LoadSeenCrawl(%d, %s): got %d fingerprints, want %d", tt.partition, crawl, len(one), len(wantC))
				}
			}
		})
	}
	if err := s.LoadSeen(ctx, 70000, nil, func(string, uint64) {}); err == nil {
		t.Error("LoadSeen(70000): want out-of-range error")
	}
}
