package chstore_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func allVersions() []uint32 {
	var vs []uint32
	for _, m := range chstore.Migrations() {
		vs = append(vs, m.Version)
	}
	return vs
}

func TestMigrationsOrdered(t *testing.T) {
	var last uint32
	for _, m := range chstore.Migrations() {
		if m.Version <= last {
			t.Fatalf("migration %d (%s) after %d: versions must increase", m.Version, m.Name, last)
		}
		last = m.Version
	}
}

func TestMigrate(t *testing.T) {
	tests := []struct {
		name    string
		runs    int // sequential Migrate calls
		workers int // concurrent stores per run
	}{
		{name: "empty database", runs: 1, workers: 1},
		{name: "twice", runs: 2, workers: 1},
		{name: "concurrently", runs: 1, workers: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cfg := chtest.Config(t)
			var stores []*chstore.Store
			for range tt.workers {
				s, err := chstore.Open(ctx, cfg, zap.NewNop())
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer s.Close()
				stores = append(stores, s)
			}
			for range tt.runs {
				var wg sync.WaitGroup
				errs := make([]error, len(stores))
				for i, s := range stores {
					wg.Go(func() { errs[i] = s.Migrate(ctx) })
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Fatalf("migrate (worker %d): %v", i, err)
					}
				}
			}
			got, err := stores[0].AppliedMigrations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := allVersions(); !slices.Equal(got, want) {
				t.Errorf("applied versions = %v, want %v", got, want)
			}
			for _, table := range []string{"schema_migrations", "fetch_log", "url_seen", "documents",
				"fetch_per_host_minute", "fetch_per_host_minute_mv", "fetch_status_minute", "fetch_status_minute_mv"} {
				var n uint64
				err := stores[0].Conn().QueryRow(ctx,
					"SELECT count() FROM system.tables WHERE database = ? AND name = ?", cfg.Database, table).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				if n != 1 {
					t.Errorf("table %s: found %d, want 1", table, n)
				}
			}
		})
	}
}

// TestContentSeenCarriedOver: migration 206 moves content_seen into
// content_seen_v2 (granules of 256 rows); what a crawl recorded before is
// found after it, and the new table has the small granules.
func TestContentSeenCarriedOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cfg := chtest.Config(t)
	s, err := chstore.Open(ctx, cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if err := s.MigrateBefore(ctx, 206); err != nil {
		t.Fatalf("migrate to 205: %v", err)
	}
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO content_seen (crawl_id, content_fp, url, first_seen)")
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"http://a.test/2", "http://a.test/1"} {
		if err := b.Append("c1", uint64(42), url, seen); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	got, err := s.SeenContent(ctx, "c1", []uint64{42, 43})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[uint64]string{42: "http://a.test/1"}; !maps.Equal(got, want) {
		t.Errorf("SeenContent after the migration = %v, want %v", got, want)
	}
	var ddl string
	if err := s.Conn().QueryRow(ctx, "SELECT create_table_query FROM system.tables WHERE database = ? AND name = 'content_seen_v2'", cfg.Database).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "index_granularity = 256") {
		t.Errorf("content_seen_v2: %s, want granules of 256 rows", ddl)
	}
}
