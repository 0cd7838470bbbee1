package chstore_test

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// clusterTestTimeout bounds a test on a cluster started here, its
// migration included: every CREATE ON CLUSTER (about 45 of them) goes
// through ZooKeeper's DDL queue to each server, the ALTERs server by
// server (12 s a migration on a quiet machine, several times that on a
// loaded one). A migration that met 18.16's DDL hang (an ALTER ON
// CLUSTER: chstore runs none now) spent 180 s before
// chtest.MigratedCluster started it again on a fresh cluster.
const clusterTestTimeout = 10 * time.Minute

// nodeCount returns a count(*) query's answer on one server of the
// cluster, its own tables only.
func nodeCount(ctx context.Context, t *testing.T, srv *chlocal.Server, db, query string, args ...any) uint64 {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, Auth: clickhouse.Auth{Database: db, Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var n uint64
	if err := conn.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatalf("%s on %s: %v", query, srv.Addr(), err)
	}
	return n
}

// syncReplicas waits until every replica of table (a local table) has
// fetched what its shard holds.
func syncReplicas(ctx context.Context, t *testing.T, c *chlocal.Cluster, shards, replicas int, db, table string) {
	t.Helper()
	for s := range shards {
		for r := range replicas {
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{c.Node(s, r).Addr()}, Auth: clickhouse.Auth{Database: db, Username: "default"}})
			if err != nil {
				t.Fatal(err)
			}
			err = conn.Exec(ctx, "SYSTEM SYNC REPLICA "+db+"."+table)
			conn.Close()
			if err != nil {
				t.Fatalf("sync replica %s on %s: %v", table, c.Node(s, r).Addr(), err)
			}
		}
	}
}

// TestCluster migrates a database on a real cluster of two shards of two
// replicas (ClickHouse and ZooKeeper started here) and checks the cluster
// form of the schema: every table replicated on every server, rows spread
// over shards by their sharding key (a partition's seen set on one
// shard), a repeated insert collapsing on its shard, rollups filled on
// each shard and read whole through the Distributed table, reads and
// writes going on with one replica killed, and a restarted service
// migrating without waiting for it.
func TestCluster(t *testing.T) {
	const shards, replicas = 2, 2
	ctx, cancel := context.WithTimeout(t.Context(), clusterTestTimeout)
	defer cancel()
	// Two services migrating at once.
	c, cfg, stores := chtest.MigratedCluster(ctx, t, shards, replicas, 2)
	s := stores[0]
	applied, err := s.AppliedMigrations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != len(chstore.Migrations()) {
		t.Errorf("applied %v, want %d versions", applied, len(chstore.Migrations()))
	}
	// Every server has every table: local ones replicated, plain ones
	// Distributed, views on the local tables.
	for sh := range shards {
		for r := range replicas {
			srv := c.Node(sh, r)
			if n := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.tables WHERE database = ? AND name = 'fetch_log_local' AND engine = 'ReplicatedReplacingMergeTree'", cfg.Database); n != 1 {
				t.Errorf("%s: fetch_log_local not a ReplicatedReplacingMergeTree", srv.Addr())
			}
			if n := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.tables WHERE database = ? AND name = 'url_seen' AND engine = 'Distributed'", cfg.Database); n != 1 {
				t.Errorf("%s: url_seen not Distributed", srv.Addr())
			}
			if n := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.tables WHERE database = ? AND engine LIKE 'Replicated%'", cfg.Database); n < 15 {
				t.Errorf("%s: %d replicated tables, want every table's", srv.Addr(), n)
			}
			// Every ALTER reached every replica's local table and every
			// server's Distributed table (each has its local table's
			// columns).
			local := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.columns WHERE database = ? AND endsWith(table, '_local')", cfg.Database)
			dist := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.columns WHERE database = ? AND table IN (SELECT name FROM system.tables WHERE database = ? AND engine = 'Distributed')", cfg.Database, cfg.Database)
			want := nodeCount(ctx, t, c.Node(0, 0), "default", "SELECT count() FROM system.columns WHERE database = ? AND endsWith(table, '_local')", cfg.Database)
			if local != want || dist != want {
				t.Errorf("%s: %d columns in the local tables, %d in the Distributed ones, want %d (the first server's)", srv.Addr(), local, dist, want)
			}
		}
	}

	reg := prometheus.NewRegistry()
	fw := chstore.NewBatchWriter(s, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, zaptest.NewLogger(t), reg)
	sw := chstore.NewBatchWriter(s, chstore.URLSeen, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, zaptest.NewLogger(t), reg)
	stopF, stopS := runWriter(t, fw), runWriter(t, sw)
	const n = 200
	write := func(from, to int) {
		t.Helper()
		var fr []chstore.FetchLogRow
		var sr []chstore.SeenRow
		for i := from; i < to; i++ {
			r := fetchRow("c1", i)
			fr = append(fr, r)
			sr = append(sr, chstore.SeenRow{CrawlID: "c1", Partition: r.Partition, FP: r.URLFP, URL: r.URL, FirstSeen: base})
		}
		if err := fw.Write(ctx, fr...); err != nil {
			t.Fatalf("write fetch_log: %v", err)
		}
		if err := sw.Write(ctx, sr...); err != nil {
			t.Fatalf("write url_seen: %v", err)
		}
	}
	write(0, n)
	write(0, n/2) // redelivered
	// Synchronous inserts: the rows are readable at once.
	if got := count(t, s, "SELECT count() FROM fetch_log FINAL WHERE crawl_id = 'c1'"); got != n {
		t.Errorf("fetch_log FINAL: %d rows, want %d", got, n)
	}
	if got := count(t, s, "SELECT sum(pages) FROM fetch_per_host_minute WHERE crawl_id = 'c1'"); got != n+n/2 {
		t.Errorf("rollup through the Distributed table: %d pages, want %d (inserts)", got, n+n/2)
	}
	// Each partition's seen set on one shard; both shards used.
	perShard := make([]uint64, shards)
	for sh := range shards {
		perShard[sh] = nodeCount(ctx, t, c.Node(sh, 0), cfg.Database, "SELECT uniqExact(fp) FROM url_seen_local")
		parts := nodeCount(ctx, t, c.Node(sh, 0), cfg.Database, "SELECT uniqExact(partition) FROM url_seen_local")
		t.Logf("shard %d: %d fingerprints, %d partitions", sh+1, perShard[sh], parts)
		if perShard[sh] == 0 {
			t.Errorf("shard %d holds no fingerprint", sh+1)
		}
	}
	if perShard[0]+perShard[1] != n {
		t.Errorf("fingerprints on the shards: %v, want %d in all (each on one shard)", perShard, n)
	}
	loadSeen := func(s *chstore.Store) map[uint64]bool {
		got := map[uint64]bool{}
		for p := range 7 {
			if err := s.LoadSeen(ctx, p, nil, func(_ string, fp uint64) { got[fp] = true }); err != nil {
				t.Fatalf("load seen %d: %v", p, err)
			}
		}
		return got
	}
	if got := loadSeen(s); len(got) != n {
		t.Errorf("LoadSeen: %d fingerprints, want %d", len(got), n)
	}
	// A lookup with PREWHERE through the Distributed table (the parser's
	// content dedup) reaches the shards' rows.
	want := map[uint64]string{7: "http://a.test/7", 1 << 62: "http://b.test/8"}
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO content_seen_v2 (crawl_id, content_fp, url, first_seen)")
	if err != nil {
		t.Fatal(err)
	}
	for fp, url := range want {
		if err := b.Append("c1", fp, url, base); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("insert content_seen_v2: %v", err)
	}
	if got, err := s.SeenContent(ctx, "c1", []uint64{7, 1 << 62, 9}); err != nil || !maps.Equal(got, want) {
		t.Errorf("SeenContent through the Distributed table = %v, %v; want %v", got, err, want)
	}
	syncReplicas(ctx, t, c, shards, replicas, cfg.Database, "url_seen_local")

	// A replica down: a shard's other replica takes the reads and writes;
	// a service starting meanwhile migrates (nothing to apply) at once.
	c.Node(1, 0).Kill()
	write(n, 2*n)
	if got := count(t, s, "SELECT count() FROM fetch_log FINAL WHERE crawl_id = 'c1'"); got != 2*n {
		t.Errorf("fetch_log FINAL with a replica down: %d rows, want %d", got, 2*n)
	}
	s2, err := chstore.Open(ctx, cfg, zap.NewNop())
	if err != nil {
		t.Fatalf("open with a replica down: %v", err)
	}
	defer s2.Close()
	mctx, mcancel := context.WithTimeout(ctx, 20*time.Second)
	err = s2.Migrate(mctx)
	mcancel()
	if err != nil {
		t.Fatalf("migrate with a replica down: %v", err)
	}
	if got := loadSeen(s2); len(got) != 2*n {
		t.Errorf("LoadSeen with a replica down: %d fingerprints, want %d", len(got), 2*n)
	}
	if err := stopF(); err != nil {
		t.Fatal(err)
	}
	if err := stopS(); err != nil {
		t.Fatal(err)
	}
	// The replica comes back and catches up.
	chtest.RestartReplica(ctx, t, c.Node(1, 0))
	syncReplicas(ctx, t, c, shards, replicas, cfg.Database, "url_seen_local")
	var counts []string
	for sh := range shards {
		a := nodeCount(ctx, t, c.Node(sh, 0), cfg.Database, "SELECT uniqExact(fp) FROM url_seen_local")
		b := nodeCount(ctx, t, c.Node(sh, 1), cfg.Database, "SELECT uniqExact(fp) FROM url_seen_local")
		counts = append(counts, fmt.Sprintf("shard %d: %d/%d", sh+1, a, b))
		if a != b {
			t.Errorf("shard %d replicas differ after sync: %d vs %d fingerprints", sh+1, a, b)
		}
	}
	sort.Strings(counts)
	t.Logf("replicas after the restart: %v", counts)
}

// execOn runs a statement on one server of the cluster.
func execOn(ctx context.Context, t *testing.T, srv *chlocal.Server, stmt string) {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, Auth: clickhouse.Auth{Database: "default", Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, stmt); err != nil {
		t.Fatalf("%s on %s: %v", stmt, srv.Addr(), err)
	}
}

// TestClusterAlter checks the cluster form of a migration's ALTERs, run
// server by server without ON CLUSTER (18.16's distributed DDL can hang
// on them): the local table altered on every replica of every shard, the
// Distributed table on every server, a Distributed table that an earlier
// release's migration, stopped halfway, left dropped created again, and
// the migration applied again after a crash before it was recorded.
func TestClusterAlter(t *testing.T) {
	const shards, replicas = 2, 2
	ctx, cancel := context.WithTimeout(t.Context(), clusterTestTimeout)
	defer cancel()
	c, cfg, stores := chtest.MigratedCluster(ctx, t, shards, replicas, 1)
	s := stores[0]
	// Releases before this one dropped the Distributed table and created
	// it again around an ALTER.
	execOn(ctx, t, c.Node(1, 1), "DROP TABLE "+cfg.Database+".url_seen")
	m := chstore.Migration{Version: 60001, Name: "probe column", Statements: []string{
		"ALTER TABLE url_seen ADD COLUMN probe UInt8 DEFAULT 0",
		"ALTER TABLE url_seen MODIFY COLUMN probe UInt16 DEFAULT 0",
	}}
	if err := s.ApplyMigrations(ctx, []chstore.Migration{m}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	m.Version = 60002 // the same statements, as when a crash left them unrecorded
	if err := s.ApplyMigrations(ctx, []chstore.Migration{m}); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	for sh := range shards {
		for r := range replicas {
			srv := c.Node(sh, r)
			for _, table := range []string{"url_seen_local", "url_seen"} {
				if n := nodeCount(ctx, t, srv, "default", "SELECT count() FROM system.columns WHERE database = ? AND table = ? AND name = 'probe' AND type = 'UInt16'", cfg.Database, table); n != 1 {
					t.Errorf("%s: %s has no probe UInt16 column", srv.Addr(), table)
				}
			}
		}
	}
	w := chstore.NewBatchWriter(s, chstore.URLSeen, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, zaptest.NewLogger(t), prometheus.NewRegistry())
	stop := runWriter(t, w)
	var rows []chstore.SeenRow
	for i := range 20 {
		rows = append(rows, chstore.SeenRow{CrawlID: "c1", Partition: uint16(i % 7), FP: uint64(i + 1), URL: fmt.Sprintf("https://h%d.example/", i), FirstSeen: base})
	}
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatalf("write url_seen: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := count(t, s, "SELECT count() FROM url_seen WHERE probe = 0"); got != uint64(len(rows)) {
		t.Errorf("url_seen through the Distributed table: %d rows with probe 0, want %d", got, len(rows))
	}
}
