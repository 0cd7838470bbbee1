package chstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/zap"
)

// Migration is one versioned schema change. Every statement is idempotent
// (IF NOT EXISTS, or an ADD COLUMN whose "already exists" answer counts
// as done), so a migration that was applied but not yet recorded, or
// that two services apply at the same moment, is harmless to repeat.
// Statements run on the Store's database; names are unqualified.
type Migration struct {
	Version    uint32
	Name       string
	Statements []string
}

// createMigrationsTable records applied versions. ReplacingMergeTree
// collapses the rows two concurrent Migrate calls may both insert.
const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version UInt32,
	name String,
	applied_at DateTime
) ENGINE = ReplacingMergeTree ORDER BY version`

// Migrations returns the schema migrations in version order; never edit an
// applied one. The core tables are versions 1-99; each area keeps its own
// range in its own file so areas evolve without renumbering each other:
// fetcher 100-199 (schema_fetcher.go), parser 200-299 (schema_parser.go),
// scheduler 300-399 (schema_scheduler.go), crawl jobs and proxies 400-499
// (schema_jobs.go). Two exceptions stay as they were applied: the
// fetcher's 203 (fetch_log.final) and the WARC archive's 204
// (schema_warc.go) were numbered after the parser's 200-202 before the
// ranges held; renumbering them would apply them again on every existing
// database. New fetcher migrations take 101 onwards, the WARC archive's
// 500-599. Versions are applied in ascending order, each once
// (TestMigrationRanges).
func Migrations() []Migration {
	ms := slices.Concat(coreMigrations(), fetcherMigrations, parserMigrations, schedulerMigrations, jobsMigrations,
		warcMigrations)
	slices.SortStableFunc(ms, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	return ms
}

func coreMigrations() []Migration {
	return []Migration{
		{
			Version: 1,
			Name:    "fetch_log, url_seen, documents",
			Statements: []string{
				// One row per fetch attempt. The key includes the attempt and
				// its millisecond timestamp, so a redelivered attempt collapses
				// while distinct attempts of one URL are all kept. The
				// partition key is part of every row's identity (fetched_at),
				// so duplicates always land in the same partition.
				`CREATE TABLE IF NOT EXISTS fetch_log (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	partition UInt16,
	attempt UInt16,
	fetched_at DateTime,
	fetched_at_ms UInt16,
	status UInt16,
	error_kind String,
	error_message String,
	bytes UInt64,
	content_type String,
	duration_ms UInt32,
	redirect_location String,
	depth UInt16,
	fetcher String
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(fetched_at) ORDER BY (crawl_id, host, url_fp, fetched_at, fetched_at_ms, attempt)`,
				// The admitted URL fingerprints of each scheduler partition,
				// reloaded by the partition's new owner (LoadSeen). Ordered by
				// partition first so that reload reads one contiguous range.
				// Not partitioned by time: a fingerprint re-admitted later
				// must still collapse with its first row.
				`CREATE TABLE IF NOT EXISTS url_seen (
	crawl_id String,
	partition UInt16,
	fp UInt64,
	url String,
	depth UInt16,
	first_seen DateTime
) ENGINE = ReplacingMergeTree ORDER BY (partition, crawl_id, fp)`,
				// Extracted documents; a re-crawl of the URL replaces the
				// older version (version column fetched_at). Not partitioned
				// by time so that versions of one URL always collapse.
				`CREATE TABLE IF NOT EXISTS documents (
	crawl_id String,
	url String,
	url_fp UInt64,
	host String,
	fetched_at DateTime,
	status UInt16,
	title String,
	text String,
	content_fp UInt64,
	outlinks UInt32,
	content_type String,
	language String
) ENGINE = ReplacingMergeTree(fetched_at) ORDER BY (crawl_id, url_fp)`,
			},
		},
		{
			Version: 2,
			Name:    "per-minute rollups of fetch_log",
			Statements: []string{
				// Materialized views see every inserted block, before any
				// ReplacingMergeTree merge: they count inserts, including
				// redelivered duplicates. Exact figures come from
				// fetch_log FINAL; the rollups are cheap dashboards.
				`CREATE TABLE IF NOT EXISTS fetch_per_host_minute (
	crawl_id String,
	host String,
	minute DateTime,
	pages UInt64,
	errors UInt64,
	bytes UInt64,
	duration_ms_sum UInt64
) ENGINE = SummingMergeTree PARTITION BY toYYYYMM(minute) ORDER BY (crawl_id, host, minute)`,
				`CREATE MATERIALIZED VIEW IF NOT EXISTS fetch_per_host_minute_mv TO fetch_per_host_minute AS
SELECT
	crawl_id,
	host,
	toStartOfMinute(fetched_at) AS minute,
	count() AS pages,
	countIf(error_kind != '') AS errors,
	sum(bytes) AS bytes,
	sum(toUInt64(duration_ms)) AS duration_ms_sum
FROM fetch_log
GROUP BY crawl_id, host, minute`,
				`CREATE TABLE IF NOT EXISTS fetch_status_minute (
	crawl_id String,
	minute DateTime,
	status UInt16,
	error_kind String,
	n UInt64
) ENGINE = SummingMergeTree PARTITION BY toYYYYMM(minute) ORDER BY (crawl_id, minute, status, error_kind)`,
				`CREATE MATERIALIZED VIEW IF NOT EXISTS fetch_status_minute_mv TO fetch_status_minute AS
SELECT
	crawl_id,
	toStartOfMinute(fetched_at) AS minute,
	status,
	error_kind,
	count() AS n
FROM fetch_log
GROUP BY crawl_id, minute, status, error_kind`,
			},
		},
	}
}

// Migrate applies every schema migration not yet recorded in the
// schema_migrations table, in version order. Safe to run concurrently from
// several services: one applies them at a time (migrate_lock.go), and
// every statement is idempotent.
//
// A server that cannot be reached is waited for, as reads and inserts do:
// the migrations are idempotent, so they are run again from the start.
func (s *Store) Migrate(ctx context.Context) error {
	b := newWaitBackoff()
	for {
		err := s.migrate(ctx, Migrations())
		if err == nil || ctx.Err() != nil || !isUnavailable(err) {
			if err == nil {
				s.avail.up()
			}
			return err
		}
		s.avail.down("migrate", err)
		if werr := b.Wait(ctx); werr != nil {
			return err
		}
	}
}

func (s *Store) migrate(ctx context.Context, ms []Migration) error {
	if err := s.createMigrationsTable(ctx); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	pending, err := s.pendingMigrations(ctx, ms)
	if err != nil || len(pending) == 0 {
		return err
	}
	// The cluster's servers, connected when there is something to apply
	// (a service with nothing to apply connects to none, so it starts
	// while a replica is down): the lock is on the first of them.
	var nodes clusterNodes
	defer func() { nodes.close() }()
	lockConn := s.conn
	if s.cluster != "" {
		if nodes, err = s.openClusterNodes(ctx); err != nil {
			return err
		}
		lockConn = nodes[0].conn
	}
	// Another service may apply them while this one waits for the lock.
	needed := func(ctx context.Context) (bool, error) {
		pending, err = s.pendingMigrations(ctx, ms)
		return len(pending) > 0, err
	}
	lock, err := acquireMigrationLock(ctx, lockConn, s.db, s.lockOwner, s.log, needed)
	if err != nil || lock == nil {
		return err
	}
	defer lock.release(s.log)
	if more, err := needed(ctx); err != nil || !more {
		return err
	}
	for _, m := range pending {
		for i, stmt := range m.Statements {
			if err := s.apply(ctx, stmt, nodes); err != nil {
				return fmt.Errorf("apply migration %d (%s) statement %d: %w", m.Version, m.Name, i+1, err)
			}
		}
		if err := s.recordMigration(ctx, m); err != nil {
			return fmt.Errorf("record migration %d: %w", m.Version, err)
		}
		s.log.Info("applied schema migration", zap.Uint32("version", m.Version), zap.String("name", m.Name))
	}
	return nil
}

// pendingMigrations returns those of ms not recorded in schema_migrations.
func (s *Store) pendingMigrations(ctx context.Context, ms []Migration) ([]Migration, error) {
	applied, err := s.AppliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(ms), func(m Migration) bool {
		_, found := slices.BinarySearch(applied, m.Version)
		return found
	}), nil
}

// apply runs one migration statement: as written on a single server, in
// its cluster form in cluster mode (cluster.go), whose ALTERs run server
// by server on nodes.
func (s *Store) apply(ctx context.Context, stmt string, nodes clusterNodes) error {
	if s.cluster == "" {
		return s.execIdempotent(ctx, stmt)
	}
	steps, err := clusterDDL{cluster: s.cluster, db: s.db}.statements(stmt)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.alter == nil {
			if err := s.execIdempotent(ctx, st.sql); err != nil {
				return err
			}
			continue
		}
		if err := alterOnNodes(ctx, nodes, st.alter); err != nil {
			return err
		}
	}
	return nil
}

// createMigrationsTable creates schema_migrations. In cluster mode it is
// created ON CLUSTER only when the server asked lacks it: such a statement
// waits for every server, and a service restarting while one replica is
// down must still start.
func (s *Store) createMigrationsTable(ctx context.Context) error {
	if s.cluster == "" {
		return s.execIdempotent(ctx, createMigrationsTable)
	}
	var n uint64
	if err := s.conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = 'schema_migrations'", s.db).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	return s.execIdempotent(ctx, clusterDDL{cluster: s.cluster, db: s.db}.migrationsTable())
}

// AppliedMigrations returns the recorded migration versions in ascending
// order.
func (s *Store) AppliedMigrations(ctx context.Context) ([]uint32, error) {
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT version FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []uint32
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("scan schema_migrations: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return out, nil
}

// execIdempotent runs an IF NOT EXISTS statement, treating the "already
// exists" error that racing creators can get as success, or an ALTER
// TABLE … ADD COLUMN, treating the column's presence as success (18.16 has
// no ADD COLUMN IF NOT EXISTS).
func (s *Store) execIdempotent(ctx context.Context, stmt string) error {
	return execIdempotent(ctx, s.conn, stmt)
}

// execIdempotent is Store.execIdempotent on conn.
func execIdempotent(ctx context.Context, conn driver.Conn, stmt string) error {
	if err := conn.Exec(ctx, stmt); err != nil && !isAlreadyExists(err) && !isColumnExists(err) {
		return err
	}
	return nil
}

// recordMigration inserts m into schema_migrations. (A batch, not
// "INSERT … VALUES" through Exec, which 18.16 leaves waiting for data.)
func (s *Store) recordMigration(ctx context.Context, m Migration) error {
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO schema_migrations (version, name, applied_at)")
	if err != nil {
		return err
	}
	if err := b.Append(m.Version, m.Name, time.Now().Truncate(time.Second)); err != nil {
		_ = b.Abort()
		return err
	}
	return b.Send()
}
