package chstore

import "context"

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
