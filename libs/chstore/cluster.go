package chstore

import (
	"fmt"
	"regexp"
	"strings"
)

// Cluster mode (Config.Cluster, flag clickhouse-cluster).
//
// Single-node mode, the default, runs every migration statement as
// written. In cluster mode each statement is rewritten (clusterStatements)
// so that every table exists on every shard, replicated, and is read and
// written through a Distributed table of the plain name:
//
//   - CREATE TABLE x (…) ENGINE = E(args) … becomes
//     x_local ON CLUSTER with ReplicatedE('/clickhouse/tables/{shard}/<db>/x_local',
//     '{replica}', args), plus x ON CLUSTER AS x_local ENGINE =
//     Distributed(<cluster>, <db>, x_local, <sharding key of x>);
//   - a materialized view reads and writes the local tables (each shard
//     rolls up its own rows; the rollup is read through its Distributed);
//   - ALTER TABLE x ADD|MODIFY COLUMN runs without ON CLUSTER, server by
//     server (cluster_alter.go): on x_local of one replica of each shard,
//     whose replication carries it to the shard's other replicas (waited
//     for), then on x of every server;
//   - INSERT … SELECT runs as written, through the Distributed tables.
//
// Why CREATE goes ON CLUSTER and ALTER does not: a server's distributed
// DDL worker runs a CREATE (or DROP) itself, on its own tables, and
// answers; an ALTER of a replicated table it runs on one replica of the
// shard while the others wait for that one, and 18.16 can leave that wait
// hanging for ever on a replica that is not the table's leader (fixed in
// 20.12, ClickHouse#17089): the statement fails after
// distributed_ddl_task_timeout and the replica's DDL queue stays stuck
// behind it. Every hang seen in the cluster tests was an ALTER; none was a
// CREATE. The CREATEs stay ON CLUSTER, which also creates the tables of a
// server that is down when it comes back.
//
// Readers, writers and the analyst queries keep the plain names. Names are
// qualified with the database, since a statement ON CLUSTER runs on the
// other servers in their default database. The {shard} and {replica}
// macros come from each server's configuration.

// LocalSuffix is appended to a table's name for its replicated table on
// each shard in cluster mode; the plain name is the Distributed table.
const LocalSuffix = "_local"

// shardingKeys is, for every table, the expression the Distributed table
// spreads inserted rows over shards by. Each is a function of the table's
// sort key columns (or, for partition, of the host in it), so a repeated
// insert of a row goes to the shard that holds the first one and the
// ReplacingMergeTree there collapses them; and each keeps together what is
// read together: a partition's seen set, frontier, revisits and robots.txt
// on one shard (the scheduler's and fetcher's partition loads read one
// shard), a host's fetches (so the per-host rollups of each shard are
// whole) and documents. A table missing here fails cluster migrations.
var shardingKeys = map[string]string{
	// Read by partition (LoadSeen, the frontier pump, revisit loads,
	// LoadRobots) or carrying it: the Kafka partition, a function of the
	// host, so all of a host's URLs, fetches and events meet.
	"url_seen":    "partition",
	"frontier":    "partition",
	"frontier_v2": "partition",
	"revisits":    "partition",
	"robots_txt":  "partition",
	"url_events":  "partition",
	"fetch_log":   "partition",
	// Parser tables without the partition: by host.
	"documents":         "cityHash64(host)",
	"documents_carried": "cityHash64(host)",
	"document_meta":     "cityHash64(host)",
	"near_duplicates":   "cityHash64(host)",
	"change_history":    "cityHash64(host)",
	"links_dropped":     "cityHash64(host)",
	"links_dropped_v2":  "cityHash64(host)",
	"links":             "cityHash64(target_host)",
	// Looked up by their key's second column across hosts.
	"content_seen":    "content_fp",
	"content_seen_v2": "content_fp",
	"simhash_bands":   "band_key",
	"warc_files":      "cityHash64(file)",
	// Filled on each shard by materialized views over fetch_log_local,
	// never inserted into through the Distributed table.
	"fetch_per_host_minute": "cityHash64(host)",
	"fetch_status_minute":   "rand()",
}

var (
	createTableRE = regexp.MustCompile(`(?s)^CREATE TABLE IF NOT EXISTS (\w+) \((.*)\) ENGINE = (\w*MergeTree)(?:\(([^)]*)\))?(.*)$`)
	createViewRE  = regexp.MustCompile(`(?s)^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+) TO (\w+) AS(.*\sFROM )(\w+)(\s.*)$`)
	alterColumnRE = regexp.MustCompile(`(?s)^ALTER TABLE (\w+) ((?:ADD|MODIFY) COLUMN (\w+) .*)$`)
	insertRE      = regexp.MustCompile(`(?s)^INSERT INTO `)
)

// clusterDDL rewrites migration statements for a cluster.
type clusterDDL struct {
	cluster, db string
}

// clusterStep is one step of a migration statement's cluster form: either
// a statement run on the server the store is connected to (sql: DDL ON
// CLUSTER, or an INSERT … SELECT through the Distributed tables), or an
// ALTER run server by server (alter).
type clusterStep struct {
	sql   string
	alter *clusterAlter
}

// clusterAlter is an ALTER TABLE of a table's column in cluster mode: of
// its replicated local table on one replica of each shard, then of its
// Distributed table on every server (alterOnNodes). No statement here is
// ON CLUSTER.
type clusterAlter struct {
	db, local string // the local table's database and name, for system.columns
	column    string // the column added or modified
	// alterLocal is the ALTER of the local table, run on one replica of
	// each shard; alterDistributed the ALTER of the Distributed table,
	// run on every server.
	alterLocal, alterDistributed string
	// createDistributed creates the Distributed table on a server that
	// lacks it (a migration of an earlier release, which dropped and
	// created it again, stopped halfway), with the local table's columns.
	createDistributed string
}

// statements returns the steps that apply stmt on the cluster, or an
// error for a statement it does not know how to distribute (a migration
// added without thinking of clusters: TestClusterStatementsCoverMigrations
// catches it).
func (c clusterDDL) statements(stmt string) ([]clusterStep, error) {
	on := " ON CLUSTER " + c.cluster
	q := func(name string) string { return c.db + "." + name }
	if m := createTableRE.FindStringSubmatch(stmt); m != nil {
		name, cols, engine, args, rest := m[1], m[2], m[3], m[4], m[5]
		key, ok := shardingKeys[name]
		if !ok {
			return nil, fmt.Errorf("cluster ddl: table %s has no sharding key (chstore.shardingKeys)", name)
		}
		local := name + LocalSuffix
		rargs := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", c.db, local)
		if strings.TrimSpace(args) != "" {
			rargs += ", " + args
		}
		return []clusterStep{
			{sql: "CREATE TABLE IF NOT EXISTS " + q(local) + on + " (" + cols + ") ENGINE = Replicated" + engine + "(" + rargs + ")" + rest},
			{sql: c.distributed(name, key, on)},
		}, nil
	}
	if m := createViewRE.FindStringSubmatch(stmt); m != nil {
		return []clusterStep{{sql: "CREATE MATERIALIZED VIEW IF NOT EXISTS " + q(m[1]) + on + " TO " + q(m[2]+LocalSuffix) +
			" AS" + m[3] + q(m[4]+LocalSuffix) + m[5]}}, nil
	}
	if m := alterColumnRE.FindStringSubmatch(stmt); m != nil {
		name, command, column := m[1], m[2], m[3]
		key, ok := shardingKeys[name]
		if !ok {
			return nil, fmt.Errorf("cluster ddl: table %s has no sharding key (chstore.shardingKeys)", name)
		}
		// Without ON CLUSTER (see the top of this file): the local
		// tables' ALTER on one replica of each shard, replicated to the
		// others, and the Distributed tables' on each server (not
		// replicated: every server has its own).
		return []clusterStep{{alter: &clusterAlter{
			db:                c.db,
			local:             name + LocalSuffix,
			column:            column,
			alterLocal:        "ALTER TABLE " + q(name+LocalSuffix) + " " + command,
			alterDistributed:  "ALTER TABLE " + q(name) + " " + command,
			createDistributed: c.distributed(name, key, ""),
		}}}, nil
	}
	if insertRE.MatchString(stmt) {
		return []clusterStep{{sql: stmt}}, nil
	}
	return nil, fmt.Errorf("cluster ddl: no cluster form for statement %.60q", stmt)
}

// distributed is the DDL of the Distributed table name over its local
// tables, spread by key; on is " ON CLUSTER <cluster>", or "" for the
// server it runs on alone.
func (c clusterDDL) distributed(name, key, on string) string {
	return "CREATE TABLE IF NOT EXISTS " + c.db + "." + name + on + " AS " + c.db + "." + name + LocalSuffix +
		fmt.Sprintf(" ENGINE = Distributed(%s, %s, %s, %s)", c.cluster, c.db, name+LocalSuffix, key)
}

// migrationsTable is the DDL of schema_migrations: in cluster mode one
// replicated table with a replica on every server of the cluster (its
// ZooKeeper path has no {shard}), so that each server answers which
// versions are applied.
func (c clusterDDL) migrationsTable() string {
	return "CREATE TABLE IF NOT EXISTS " + c.db + ".schema_migrations ON CLUSTER " + c.cluster + ` (
	version UInt32,
	name String,
	applied_at DateTime
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/all/` + c.db + `/schema_migrations', '{shard}-{replica}') ORDER BY version`
}
