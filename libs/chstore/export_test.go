package chstore

import (
	"context"
	"time"
)

// MigrateBefore applies the migrations below version only: a test of a
// migration's carry-over fills the schema it starts from.
func (s *Store) MigrateBefore(ctx context.Context, version uint32) error {
	var ms []Migration
	for _, m := range Migrations() {
		if m.Version < version {
			ms = append(ms, m)
		}
	}
	return s.migrate(ctx, ms)
}

// ApplyMigrations applies those of ms not yet recorded: a test of the
// migrator itself, with statements of its own.
func (s *Store) ApplyMigrations(ctx context.Context, ms []Migration) error {
	return s.migrate(ctx, ms)
}

// MigrationLockTable is the schema migration lock's table.
const MigrationLockTable = migrationLockTable

// SetMigrationLockStale sets how long a silent lock is waited for, for
// the rest of the test.
func SetMigrationLockStale(t interface{ Cleanup(func()) }, d time.Duration) {
	old := migrationLockStale
	migrationLockStale = d
	t.Cleanup(func() { migrationLockStale = old })
}
