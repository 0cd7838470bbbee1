// Package chstore is the ClickHouse adapter (clickhouse-go/v2, native
// protocol): connection, versioned schema migrations, the crawler's tables,
// and a batching writer that retries and never drops rows silently.
//
// DDL and queries stay within what both ClickHouse 18.16 (Debian) and
// current releases accept: no DateTime64, TTL, codecs or LowCardinality;
// every INSERT names its columns. Tables use ReplacingMergeTree keyed so
// that a repeated insert of the same row is collapsed (idempotent sinks);
// queries that must not double-count use FINAL or uniqExact.
package chstore

import (
	"context"
	"flag"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config is the ClickHouse configuration shared by every service.
type Config struct {
	Addr        []string      // flag clickhouse-addr, comma separated native-protocol host:port (default 127.0.0.1:9000)
	Database    string        // flag clickhouse-database (default "crawler")
	Username    string        // flag clickhouse-user (default "default")
	Password    string        // flag clickhouse-password
	DialTimeout time.Duration // flag clickhouse-dial-timeout (default 5s)
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) { panic("unimplemented") }

// Validate reports a configuration error.
func (c Config) Validate() error { panic("unimplemented") }

// Store is an open ClickHouse connection to the crawler's database. Safe
// for concurrent use.
type Store struct{}

// Open connects, creating the database if it does not exist. It does not
// migrate; call Migrate.
func Open(ctx context.Context, c Config, log *zap.Logger) (*Store, error) { panic("unimplemented") }

// Migrate applies every schema migration not yet recorded in the
// schema_migrations table, in version order. Safe to run concurrently from
// several services (every statement is idempotent).
func (s *Store) Migrate(ctx context.Context) error { panic("unimplemented") }

// Conn exposes the driver connection for queries.
func (s *Store) Conn() driver.Conn { panic("unimplemented") }

// Database returns the database name.
func (s *Store) Database() string { panic("unimplemented") }

// Ping checks the connection (for readiness).
func (s *Store) Ping(ctx context.Context) error { panic("unimplemented") }

// Close closes the connection.
func (s *Store) Close() error { panic("unimplemented") }

// FetchLogRow is one fetch attempt (table fetch_log).
type FetchLogRow struct {
	CrawlID          string
	URL              string
	URLFP            uint64
	Host             string
	Partition        uint16
	Attempt          uint16
	FetchedAt        time.Time // second precision in ClickHouse
	FetchedAtMs      uint16    // millisecond part of FetchedAt, kept for ordering
	Status           uint16    // HTTP status, 0 when none
	ErrorKind        string    // "" on success; e.g. timeout, connect, dns, body_too_large, robots_denied, not_html, refused_address, redirect
	ErrorMessage     string
	Bytes            uint64
	ContentType      string
	DurationMs       uint32
	RedirectLocation string
	Depth            uint16
	Fetcher          string // instance id
}

// SeenRow is one admitted URL fingerprint of a partition (table url_seen).
type SeenRow struct {
	CrawlID   string
	Partition uint16
	FP        uint64
	URL       string
	Depth     uint16
	FirstSeen time.Time
}

// DocumentRow is one extracted document (table documents).
type DocumentRow struct {
	CrawlID     string
	URL         string
	URLFP       uint64
	Host        string
	FetchedAt   time.Time
	Status      uint16
	Title       string
	Text        string
	ContentFP   uint64
	Outlinks    uint32
	ContentType string
	Language    string
}

// Table describes how rows of type T are inserted.
type Table[T any] struct {
	Name    string
	Columns []string
	Values  func(T) []any // in Columns order
}

// The crawler's tables.
var (
	FetchLog  Table[FetchLogRow]
	URLSeen   Table[SeenRow]
	Documents Table[DocumentRow]
)

// BatchOptions tunes a BatchWriter.
type BatchOptions struct {
	MaxRows       int           // flush when this many rows are buffered (default 1000)
	FlushInterval time.Duration // flush at least this often (default 200ms)
	MaxBuffered   int           // Write blocks while this many rows wait (default 10 * MaxRows): bounded memory
	RetryBackoff  time.Duration // first retry delay, doubled up to 5s (default 100ms)
}

// BatchWriter buffers rows of one table and inserts them in batches. A
// failed insert is retried with back-off until it succeeds or the writer's
// run context is done; rows are never dropped silently. Safe for concurrent
// use.
type BatchWriter[T any] struct{}

// NewBatchWriter returns a writer for table t. reg receives
// clickhouse_rows_written_total{table}, clickhouse_insert_errors_total{table},
// clickhouse_flush_seconds{table}.
func NewBatchWriter[T any](s *Store, t Table[T], o BatchOptions, log *zap.Logger, reg prometheus.Registerer) *BatchWriter[T] {
	panic("unimplemented")
}

// Write adds rows and blocks until the batch containing them has been
// inserted (durable), or ctx is done, or the writer stopped. Concurrent
// callers share batches.
func (w *BatchWriter[T]) Write(ctx context.Context, rows ...T) error { panic("unimplemented") }

// Run flushes batches until ctx is done, then flushes what is buffered
// (bounded by a short deadline) and returns. Write fails after Run returns.
func (w *BatchWriter[T]) Run(ctx context.Context) error { panic("unimplemented") }

// LoadSeen streams every fingerprint stored for a partition (all crawls).
func (s *Store) LoadSeen(ctx context.Context, partition int, fn func(crawlID string, fp uint64)) error {
	panic("unimplemented")
}
