// Package chstore is the ClickHouse adapter (clickhouse-go/v2, native
// protocol): connection, versioned schema migrations, the crawler's tables,
// and a batching writer that retries and never drops rows silently.
//
// DDL and queries stay within what both ClickHouse 18.16 (Debian) and
// current releases accept: no DateTime64, TTL, codecs or LowCardinality;
// every INSERT names its columns. Tables use ReplacingMergeTree keyed so
// that a repeated insert of the same row is collapsed (idempotent sinks);
// queries that must not double-count use FINAL or uniqExact.
//
// Config.Cluster turns on cluster mode (cluster.go): every table
// replicated on each shard as <table>_local, read and written through a
// Distributed table of the plain name; single-server mode, the default,
// is unchanged.
package chstore

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/tlsfiles"
)

// Config is the ClickHouse configuration shared by every service.
type Config struct {
	Addr        []string      // flag clickhouse-addr, comma separated native-protocol host:port (default 127.0.0.1:9000)
	Database    string        // flag clickhouse-database (default "crawler")
	Username    string        // flag clickhouse-user (default "default")
	DialTimeout time.Duration // flag clickhouse-dial-timeout (default 5s)
	// Password (flag clickhouse-password, deprecated: a flag's value
	// shows in process listings) or PasswordFile (flag
	// clickhouse-password-file: a file holding it, a mounted secret).
	Password     string
	PasswordFile string
	// TLS (flags clickhouse-tls, clickhouse-tls-ca-file,
	// clickhouse-tls-cert-file, clickhouse-tls-key-file,
	// clickhouse-tls-server-name, clickhouse-tls-insecure-skip-verify):
	// the native protocol over TLS (ClickHouse's tcp_port_secure, 9440;
	// ClickHouse Cloud's native port).
	TLS tlsfiles.Config
	// FlushInterval and BatchRows (flags clickhouse-flush-interval,
	// clickhouse-batch-rows) are every batch writer's BatchOptions: see
	// Config.Batch.
	FlushInterval time.Duration
	BatchRows     int
	// Cluster (flag clickhouse-cluster), when set, is the name of a
	// cluster in the servers' remote_servers configuration: migrations
	// create every table as a Replicated…MergeTree named <table>_local on
	// each shard, ON CLUSTER, and a Distributed table of the plain name
	// over them (cluster.go); inserts through it are synchronous. Their
	// ALTERs connect to every server of the cluster (system.clusters'
	// host_name and port) with these credentials. Empty (the default):
	// one server, plain tables.
	Cluster string
}

// Defaults of Config, applied by RegisterFlags.
const (
	DefaultAddr        = "127.0.0.1:9000"
	DefaultDatabase    = "crawler"
	DefaultUsername    = "default"
	DefaultDialTimeout = 5 * time.Second
	// DefaultFlushInterval: every insert makes a part that ClickHouse
	// merges again and again while the table is small (on a crawl of the
	// bench web, 2 244 inserts in 165 s made 11.8 M merged rows for 97 505
	// inserted, the server's largest cost). A second between inserts of a
	// table keeps parts few and large; services ack a record only after
	// its rows are in, so they keep their batches in flight meanwhile.
	// Two seconds rather than one: a part of a wide table is ~50 files
	// (fetch_log's insert also makes a part of each of its two rollups),
	// and creating and merging them was most of the server's CPU. On the
	// bench web, 2 s made 191 inserts instead of 325 and merged 297 K
	// rows instead of 634 K; the server's CPU fell from 14.0 to 9.8 s
	// (measured under the same load) with no change in the services'
	// peak memory.
	DefaultFlushInterval = 2 * time.Second
	DefaultBatchRows     = 10000
)

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.RegisterFlagsFlushing(fs, DefaultFlushInterval)
}

// RegisterFlagsFlushing is RegisterFlags with flush as the default of
// --clickhouse-flush-interval: a service whose writers are flushed when
// a consumer window fills (kafkaio.GroupConfig.OnFull) can wait longer
// between inserts, and ClickHouse then has fewer parts to merge.
func (c *Config) RegisterFlagsFlushing(fs *flag.FlagSet, flush time.Duration) {
	c.Addr = []string{DefaultAddr}
	fs.Func("clickhouse-addr", "comma separated ClickHouse native-protocol host:port list (default "+DefaultAddr+")", func(s string) error {
		c.Addr = splitAddrs(s)
		return nil
	})
	fs.StringVar(&c.Database, "clickhouse-database", DefaultDatabase, "ClickHouse database (created if missing)")
	fs.StringVar(&c.Password, "clickhouse-password", "", "ClickHouse password (deprecated: shows in process listings; use -clickhouse-password-file)")
	c.RegisterSecurityFlags(fs)
	fs.DurationVar(&c.DialTimeout, "clickhouse-dial-timeout", DefaultDialTimeout, "ClickHouse connect timeout")
	fs.DurationVar(&c.FlushInterval, "clickhouse-flush-interval", flush, "longest wait before buffered rows of a table are inserted (one part per insert)")
	fs.IntVar(&c.BatchRows, "clickhouse-batch-rows", DefaultBatchRows, "rows of a table inserted together at most")
	fs.StringVar(&c.Cluster, "clickhouse-cluster", "", "ClickHouse cluster (remote_servers) to create replicated, distributed tables on; empty: a single server")
}

// RegisterSecurityFlags binds the user, the password file and the TLS
// settings (RegisterFlags includes them; a launcher that passes them on
// to services registers them alone).
func (c *Config) RegisterSecurityFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Username, "clickhouse-user", DefaultUsername, "ClickHouse user")
	fs.StringVar(&c.PasswordFile, "clickhouse-password-file", "", "file holding the ClickHouse password (a mounted secret; a trailing line break is ignored)")
	c.TLS.RegisterFlags(fs, "clickhouse", "ClickHouse servers")
}

// Batch returns the options of the service's batch writers: flush every
// FlushInterval or BatchRows rows (zero fields take the writer's defaults).
func (c Config) Batch() BatchOptions {
	return BatchOptions{MaxRows: c.BatchRows, FlushInterval: c.FlushInterval}
}

func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate reports a configuration error.
func (c Config) Validate() error {
	if len(c.Addr) == 0 {
		return errors.New("clickhouse-addr: at least one address required")
	}
	for _, a := range c.Addr {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("clickhouse-addr: %q is not host:port", a)
		}
	}
	if !identRE.MatchString(c.Database) {
		return fmt.Errorf("clickhouse-database: %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)", c.Database)
	}
	if c.Username == "" {
		return errors.New("clickhouse-user: must not be empty")
	}
	if c.Cluster != "" && !identRE.MatchString(c.Cluster) {
		return fmt.Errorf("clickhouse-cluster: %q is not a plain identifier ([A-Za-z_][A-Za-z0-9_]*)", c.Cluster)
	}
	if c.DialTimeout <= 0 {
		return errors.New("clickhouse-dial-timeout: must be positive")
	}
	if c.FlushInterval < 0 || c.BatchRows < 0 {
		return errors.New("clickhouse-flush-interval and clickhouse-batch-rows: must not be negative")
	}
	// The files are read here too, so that a missing or malformed one
	// fails the service at start naming its flag.
	if _, err := c.connSecurity(); err != nil {
		return err
	}
	return nil
}

// connSecurity is the password and TLS configuration of the connections.
type connSecurity struct {
	password string
	tls      *tls.Config // nil: plain text
}

// connSecurity reads the password file and the TLS files.
func (c Config) connSecurity() (connSecurity, error) {
	var errs []error
	password := c.Password
	if c.PasswordFile != "" {
		if c.Password != "" {
			errs = append(errs, errors.New("clickhouse-password, clickhouse-password-file: give one, not both"))
		}
		p, err := tlsfiles.ReadSecret("clickhouse-password-file", c.PasswordFile)
		if err != nil {
			errs = append(errs, err)
		}
		password = p
	}
	t, err := c.TLS.Load("clickhouse")
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return connSecurity{}, err
	}
	return connSecurity{password: password, tls: t}, nil
}

// Store is an open ClickHouse connection to the crawler's database. Safe
// for concurrent use.
type Store struct {
	conn    driver.Conn
	db      string
	cluster string // Config.Cluster
	log     *zap.Logger
	avail   *availability // whether reads and inserts are waiting for the server
	// boot opens a connection to the server's default database, to
	// create the crawler's database again (recreate).
	boot func() (driver.Conn, error)
	// dial opens a connection to one server of the cluster, its default
	// database, with the store's credentials and TLS settings (cluster
	// migrations' ALTERs: cluster_alter.go).
	dial func(addr string) (driver.Conn, error)
	// lockOwner names this store in the schema migration lock
	// (migrate_lock.go): a migration retried after an outage takes back
	// the lock it left.
	lockOwner string
}

func options(c Config, sec connSecurity, db string) *clickhouse.Options {
	o := &clickhouse.Options{
		Addr:             c.Addr,
		Auth:             clickhouse.Auth{Database: db, Username: c.Username, Password: sec.password},
		TLS:              sec.tls,
		DialTimeout:      c.DialTimeout,
		MaxOpenConns:     10,
		MaxIdleConns:     5,
		ConnMaxLifetime:  time.Hour,
		ConnOpenStrategy: clickhouse.ConnOpenInOrder,
		// A connection keeps the buffer of its largest block between
		// queries. Inserts send blocks of about BlockBytes (1 MiB), so
		// that is 1-2 MiB a connection; freeing it after each query
		// made every insert regrow it, half of what the driver
		// allocated per documents insert (BenchmarkDocumentsInsert:
		// 11.0 MB against 5.4 MB per batch of 3.2 MB of text).
		FreeBufOnConnRelease: false,
	}
	if c.Cluster != "" {
		o.Settings = clusterSettings()
	}
	return o
}

// clusterSettings are the query settings of every connection in cluster
// mode: insert_distributed_sync, so that an insert into a Distributed
// table returns once every shard's block is written to one of its
// replicas, not when it is queued on the server the client talks to. A
// service acks a Kafka record after its rows are inserted, so the ack
// means the rows are on a replica of their shard (at-least-once);
// replication to the shard's other replicas follows asynchronously.
//
// The cluster's servers must also set, in the profile of the crawler's
// user, load_balancing = in_order and distributed_product_mode = global
// (docs/operations.md; chlocal's cluster does): string settings cannot be
// sent per query to an 18.16 server over the native protocol.
func clusterSettings() clickhouse.Settings {
	return clickhouse.Settings{"insert_distributed_sync": 1}
}

// Open connects, creating the database if it does not exist. It does not
// migrate; call Migrate.
func Open(ctx context.Context, c Config, log *zap.Logger) (*Store, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("validate clickhouse config: %w", err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	sec, err := c.connSecurity()
	if err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	boot, err := clickhouse.Open(options(c, sec, "default"))
	if err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	err = createDatabase(ctx, boot, c.Database, c.Cluster)
	if err != nil && !isAlreadyExists(err) {
		boot.Close()
		return nil, fmt.Errorf("create database %s: %w", c.Database, err)
	}
	boot.Close()
	conn, err := clickhouse.Open(options(c, sec, c.Database))
	if err != nil {
		return nil, fmt.Errorf("open clickhouse: %w", err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ping clickhouse %s: %w", strings.Join(c.Addr, ","), err)
	}
	return &Store{conn: conn, db: c.Database, cluster: c.Cluster, log: log, avail: &availability{log: log, addr: c.Addr},
		lockOwner: lockOwner(),
		boot:      func() (driver.Conn, error) { return clickhouse.Open(options(c, sec, "default")) },
		dial: func(addr string) (driver.Conn, error) {
			o := options(c, sec, "default")
			o.Addr = []string{addr}
			return clickhouse.Open(o)
		}}, nil
}

// createDatabase creates db if the server does not have it; in cluster
// mode on every server of the cluster (ON CLUSTER waits for all of them,
// which is why it is not run when the server asked has the database: a
// service restarting while a replica is down must not wait for it).
func createDatabase(ctx context.Context, conn driver.Conn, db, cluster string) error {
	if cluster == "" {
		return conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+db+"`")
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	return conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS `"+db+"` ON CLUSTER "+cluster)
}

// Ping connects to the server of c (its "default" database, which every
// server has) and pings it: whether the address answers and takes the
// credentials and TLS settings of c. It creates nothing.
func Ping(ctx context.Context, c Config) error {
	sec, err := c.connSecurity()
	if err != nil {
		return fmt.Errorf("ping clickhouse: %w", err)
	}
	conn, err := clickhouse.Open(options(c, sec, "default"))
	if err != nil {
		return fmt.Errorf("ping clickhouse: %w", err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping clickhouse %s: %w", strings.Join(c.Addr, ","), err)
	}
	return nil
}

// Conn exposes the driver connection for queries.
func (s *Store) Conn() driver.Conn { return s.conn }

// Cluster returns the cluster of cluster mode, "" for a single server.
func (s *Store) Cluster() string { return s.cluster }

// Database returns the database name.
func (s *Store) Database() string { return s.db }

// Ping checks the connection (for readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping clickhouse %s: %w", strings.Join(s.avail.addr, ","), err)
	}
	return nil
}

// Close closes the connection.
func (s *Store) Close() error {
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("close clickhouse: %w", err)
	}
	return nil
}

// ClickHouse error codes this package reacts to.
const (
	codeTableAlreadyExists    = 57
	codeDatabaseAlreadyExists = 82
	codeDuplicateColumn       = 15 // ALTER TABLE … ADD COLUMN of an existing column (current releases)
	codeIllegalColumn         = 44 // the same on 18.16, among other column errors
)

// isAlreadyExists reports an "already exists" error, which concurrent
// "CREATE … IF NOT EXISTS" statements can still raise on older servers when
// two of them race.
func isAlreadyExists(err error) bool {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		return ex.Code == codeTableAlreadyExists || ex.Code == codeDatabaseAlreadyExists
	}
	return false
}

// isColumnExists reports that "ALTER TABLE … ADD COLUMN" found the column
// there already: a migration applied but not recorded, or applied by
// another service at the same moment. 18.16 has no ADD COLUMN IF NOT
// EXISTS; it answers code 44 ("column with this name already exists"),
// current releases code 15.
func isColumnExists(err error) bool {
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) {
		return false
	}
	return ex.Code == codeDuplicateColumn ||
		ex.Code == codeIllegalColumn && strings.Contains(ex.Message, "already exists")
}
