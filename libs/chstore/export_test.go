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

// LockState is what a waiter reads of the migration lock.
type LockState = lockState

// Holder is the owner of the lock's last heartbeat.
func (st LockState) Holder() string { return st.holder }

// ReadLock reads db's migration lock on s's server as a waiter does.
func (s *Store) ReadLock(ctx context.Context) (LockState, error) {
	return readLock(ctx, s.conn, s.db)
}

// BreakLock breaks the migration lock a waiter read as st, and reports
// whether it did.
func (s *Store) BreakLock(ctx context.Context, st LockState) (bool, error) {
	return breakLock(ctx, s.conn, s.db, st)
}

// BrokenLockPrefix begins the names of broken migration locks.
const BrokenLockPrefix = brokenLockPrefix

// SetBrokenLockKeep sets how long broken locks are kept, for the rest of
// the test.
func SetBrokenLockKeep(t interface{ Cleanup(func()) }, d time.Duration) {
	old := brokenLockKeep
	brokenLockKeep = d
	t.Cleanup(func() { brokenLockKeep = old })
}

// StaleLock reports whether a waiter breaks the lock it read as st.
func (s *Store) StaleLock(st LockState) bool { return st.stale() }
