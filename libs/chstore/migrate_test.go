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
			stores := openStores(ctx, t, cfg, tt.workers)
			for range tt.runs {
				migrateAtOnce(ctx, t, stores)
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

// TestMigrateManyAtOnce: six services migrating a fresh database at the
// same moment, several times over. ClickHouse 18.16 checks an ALTER
// against the table's columns before it locks the table, so without the
// migration lock two services adding the same column failed with
// std::bad_alloc or "Different expressions with the same alias", or the
// server died of a segmentation fault (within ten rounds, in two runs of
// four).
func TestMigrateManyAtOnce(t *testing.T) {
	for round := range 20 {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		cfg := chtest.Config(t) // a fresh database each round, dropped at the end
		stores := openStores(ctx, t, cfg, 16)
		migrateAtOnce(ctx, t, stores)
		got, err := stores[0].AppliedMigrations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := allVersions(); !slices.Equal(got, want) {
			t.Errorf("round %d: applied versions = %v, want %v", round, got, want)
		}
		if n := lockTables(ctx, t, stores[0], cfg.Database); n != 0 {
			t.Errorf("round %d: %d migration lock tables left after every service migrated, want 0", round, n)
		}
	}
}

// openStores opens n stores on cfg, closed when the test ends.
func openStores(ctx context.Context, t *testing.T, cfg chstore.Config, n int) []*chstore.Store {
	t.Helper()
	var stores []*chstore.Store
	for range n {
		s, err := chstore.Open(ctx, cfg, zap.NewNop())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() }) // nothing buffered: only DDL and reads
		stores = append(stores, s)
	}
	return stores
}

// migrateAtOnce migrates with every store at the same moment, as services
// started together do, and fails the test on any store's error.
func migrateAtOnce(ctx context.Context, t *testing.T, stores []*chstore.Store) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrate (store %d of %d at once): %v", i, len(stores), err)
		}
	}
}

// TestMigrateWaitsForTheLock: while another service holds the migration
// lock (and beats), a service applies nothing; it migrates once the lock
// is released.
func TestMigrateWaitsForTheLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, lock := lockHeld(ctx, t, "the other service")
	done := make(chan error, 1)
	go func() { done <- s.Migrate(ctx) }()
	holderBeats := time.NewTicker(500 * time.Millisecond)
	defer holderBeats.Stop()
	for range 6 { // 3 s, the holder beating
		<-holderBeats.C
		if err := s.Conn().Exec(ctx, "INSERT INTO "+lock+" SELECT 'the other service', now()"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("migrate returned (%v) while another service held the lock", err)
		default:
		}
	}
	if got, err := s.AppliedMigrations(ctx); err != nil || len(got) != 0 {
		t.Fatalf("applied while the lock was held: %v (%v), want none", got, err)
	}
	if err := s.Conn().Exec(ctx, "DROP TABLE "+lock); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("migrate after the lock was released: %v", err)
	}
	if got, err := s.AppliedMigrations(ctx); err != nil || !slices.Equal(got, allVersions()) {
		t.Errorf("applied = %v (%v), want every version", got, err)
	}
}

// TestMigrateBreaksAStaleLock: a lock whose holder died (no heartbeat for
// the stale time) is broken, and the migrations are applied.
func TestMigrateBreaksAStaleLock(t *testing.T) {
	chstore.SetMigrationLockStale(t, 2*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, _ := lockHeld(ctx, t, "a dead service")
	start := time.Now()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if waited := time.Since(start); waited < 2*time.Second {
		t.Errorf("migrated after %v: the lock was broken before it went stale (2 s)", waited)
	}
	if got, err := s.AppliedMigrations(ctx); err != nil || !slices.Equal(got, allVersions()) {
		t.Errorf("applied = %v (%v), want every version", got, err)
	}
	if n := lockTables(ctx, t, s, s.Database()); n != 0 {
		t.Errorf("%d migration lock tables left, want 0", n)
	}
}

// TestBreakingAStaleLockOnce: two waiters read the same stale lock; the
// first breaks it and takes the next lock; the second's break must leave
// that lock alone (a DROP in its place dropped it, and both migrated at
// once). The broken lock's table goes with a later release once it is
// old.
func TestBreakingAStaleLockOnce(t *testing.T) {
	chstore.SetMigrationLockStale(t, time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, lock := lockHeld(ctx, t, "a dead service")
	var first, second chstore.LockState
	waitTrue(t, ctx, "the lock stale", func() bool {
		var err error
		if first, err = s.ReadLock(ctx); err != nil {
			t.Fatal(err)
		}
		return first.Holder() == "a dead service" && s.StaleLock(first)
	})
	second = first // the second waiter read it at the same moment
	if broke, err := s.BreakLock(ctx, first); err != nil || !broke {
		t.Fatalf("first break = %v, %v; want it broken", broke, err)
	}
	if err := s.Conn().Exec(ctx, "CREATE TABLE "+lock+" (owner String, beat DateTime) ENGINE = Memory"); err != nil {
		t.Fatalf("the first waiter takes the lock: %v", err)
	}
	if err := s.Conn().Exec(ctx, "INSERT INTO "+lock+" SELECT 'the first waiter', now()"); err != nil {
		t.Fatal(err)
	}
	if broke, err := s.BreakLock(ctx, second); err != nil || broke {
		t.Fatalf("second break of the same stale lock = %v, %v; want nothing broken", broke, err)
	}
	if st, err := s.ReadLock(ctx); err != nil || st.Holder() != "the first waiter" {
		t.Fatalf("after the second break the lock is %q (%v), want the first waiter's", st.Holder(), err)
	}
	if n := brokenLocks(ctx, t, s); n != 1 {
		t.Errorf("%d broken locks, want 1", n)
	}

	// The first waiter's release, once the broken lock is old, drops it.
	chstore.SetBrokenLockKeep(t, time.Second)
	if err := s.Conn().Exec(ctx, "DROP TABLE "+lock); err != nil { // the first waiter is done
		t.Fatal(err)
	}
	waitTrue(t, ctx, "the broken lock old", func() bool { return brokenLocks(ctx, t, s, "AND metadata_modification_time < now() - 1") == 1 })
	if err := s.ApplyMigrations(ctx, []chstore.Migration{{Version: 1 << 30, Name: "a later migration",
		Statements: []string{"CREATE TABLE IF NOT EXISTS later (a UInt8) ENGINE = Memory"}}}); err != nil {
		t.Fatalf("a later migration: %v", err)
	}
	if n := brokenLocks(ctx, t, s); n != 0 {
		t.Errorf("%d broken locks after a later release, want 0", n)
	}
}

// brokenLocks counts the broken migration locks of s's database that
// match the extra condition.
func brokenLocks(ctx context.Context, t *testing.T, s *chstore.Store, extra ...string) uint64 {
	t.Helper()
	var n uint64
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND startsWith(name, ?) "+strings.Join(extra, " "),
		s.Database(), chstore.BrokenLockPrefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lockHeld opens a store on a fresh database whose migration lock holder
// has taken the lock and beaten once, and returns the store and the lock
// table's qualified name.
func lockHeld(ctx context.Context, t *testing.T, holder string) (*chstore.Store, string) {
	t.Helper()
	cfg := chtest.Config(t)
	s := openStores(ctx, t, cfg, 1)[0]
	lock := cfg.Database + "." + chstore.MigrationLockTable
	if err := s.Conn().Exec(ctx, "CREATE TABLE "+lock+" (owner String, beat DateTime) ENGINE = Memory"); err != nil {
		t.Fatal(err)
	}
	if err := s.Conn().Exec(ctx, "INSERT INTO "+lock+" SELECT ?, now()", holder); err != nil {
		t.Fatal(err)
	}
	return s, lock
}

// lockTables counts the migration lock tables in db.
func lockTables(ctx context.Context, t *testing.T, s *chstore.Store, db string) uint64 {
	t.Helper()
	var n uint64
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?",
		db, chstore.MigrationLockTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
