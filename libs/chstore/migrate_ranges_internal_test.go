package chstore

import "testing"

// TestMigrationRanges: each area's migrations stay in its range
// (Migrations), but for the two applied before the ranges held.
func TestMigrationRanges(t *testing.T) {
	applied := map[uint32]bool{203: true, 204: true} // see Migrations
	for _, area := range []struct {
		name     string
		ms       []Migration
		min, max uint32
	}{
		{"core", coreMigrations(), 1, 99},
		{"fetcher", fetcherMigrations, 100, 199},
		{"parser", parserMigrations, 200, 299},
		{"scheduler", schedulerMigrations, 300, 399},
		{"jobs", jobsMigrations, 400, 499},
		{"warc", warcMigrations, 500, 599},
	} {
		for _, m := range area.ms {
			if (m.Version < area.min || m.Version > area.max) && !applied[m.Version] {
				t.Errorf("%s migration %d (%s) outside its range %d-%d", area.name, m.Version, m.Name, area.min, area.max)
			}
		}
	}
}
