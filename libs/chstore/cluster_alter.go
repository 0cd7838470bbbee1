package chstore

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/libs/backoff"
)

// A cluster migration's ALTERs run server by server, without ON CLUSTER
// (cluster.go says why): the store asks the server it is connected to for
// the cluster's servers (system.clusters), connects to each with its own
// credentials and TLS settings, and
//
//  1. on each shard, runs the ALTER of the local table on its first
//     replica (the lowest replica_num; every service migrating at once
//     picks the same one, so their ALTERs meet on one server and the
//     second finds the column there), then waits until each other replica
//     of the shard shows the same columns: replication carries the ALTER
//     of a Replicated…MergeTree through ZooKeeper (18.16 and current
//     releases alike), the wait makes sure it arrived;
//  2. on every server, runs the ALTER of the Distributed table (its own,
//     not replicated), after every shard's local tables have the column
//     so that no server's Distributed table asks a shard for a column it
//     lacks.
//
// Every server must answer: an ALTER the Distributed table of a server
// that is down missed would never reach it. An unreachable server fails
// the migration with its address, and Migrate waits for it as for any
// server that cannot be reached.

// replicaAlterWait bounds the wait for a replica to apply an ALTER its
// shard's first replica ran: replication of a metadata change takes
// milliseconds on a healthy shard; a replica still behind after this long
// is broken (ZooKeeper session lost, replication queue stuck), which the
// error names, rather than slow.
const replicaAlterWait = 3 * time.Minute

// clusterNode is one server of the cluster, connected.
type clusterNode struct {
	shard, replica uint32 // system.clusters' shard_num and replica_num
	addr           string // host:port, native protocol
	conn           driver.Conn
}

func (n clusterNode) String() string {
	return fmt.Sprintf("%s (shard %d replica %d)", n.addr, n.shard, n.replica)
}

// clusterNodes are the servers of the cluster, by shard, then replica.
type clusterNodes []clusterNode

// close closes every connection.
func (ns clusterNodes) close() {
	for _, n := range ns {
		_ = n.conn.Close() // nothing buffered: only DDL and reads ran on it
	}
}

// openClusterNodes connects to every server of the store's cluster, as
// the server the store is connected to knows them (system.clusters). The
// addresses are the host names of remote_servers (those a TLS
// certificate names; host_address is their resolution on that server) and
// their port, the native protocol's. The caller closes them.
func (s *Store) openClusterNodes(ctx context.Context) (clusterNodes, error) {
	rows, err := s.conn.Query(ctx, `SELECT toUInt32(shard_num), toUInt32(replica_num), host_name, toUInt16(port)
FROM system.clusters WHERE cluster = ? ORDER BY shard_num, replica_num`, s.cluster)
	if err != nil {
		return nil, fmt.Errorf("read the servers of cluster %s: %w", s.cluster, err)
	}
	defer rows.Close()
	var ns clusterNodes
	for rows.Next() {
		var (
			n    clusterNode
			host string
			port uint16
		)
		if err := rows.Scan(&n.shard, &n.replica, &host, &port); err != nil {
			return nil, fmt.Errorf("scan system.clusters: %w", err)
		}
		n.addr = net.JoinHostPort(host, strconv.Itoa(int(port)))
		ns = append(ns, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the servers of cluster %s: %w", s.cluster, err)
	}
	if len(ns) == 0 {
		return nil, fmt.Errorf("cluster %s: no such cluster in system.clusters of the server asked", s.cluster)
	}
	for i := range ns {
		conn, err := s.dial(ns[i].addr)
		if err == nil {
			if err = conn.Ping(ctx); err != nil {
				_ = conn.Close() // the ping's error is the one to report
			}
		}
		if err != nil {
			ns[:i].close()
			return nil, fmt.Errorf("connect to %s of cluster %s: %w", ns[i], s.cluster, err)
		}
		ns[i].conn = conn
	}
	return ns, nil
}

// shards returns the nodes grouped by shard, each group by replica.
func (ns clusterNodes) shards() []clusterNodes {
	var out []clusterNodes
	for i, n := range ns {
		if i == 0 || n.shard != ns[i-1].shard {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], n)
	}
	return out
}

// alterOnNodes applies a on the cluster's servers (see the top of this
// file). Every statement is idempotent: a column already there (added
// before a crash, or by another service at the same moment) counts as
// added, and a missing Distributed table is created first.
func alterOnNodes(ctx context.Context, ns clusterNodes, a *clusterAlter) error {
	for _, shard := range ns.shards() {
		first := shard[0]
		if err := execIdempotent(ctx, first.conn, a.alterLocal); err != nil {
			return fmt.Errorf("alter %s.%s on %s: %w", a.db, a.local, first, err)
		}
		for _, n := range shard[1:] {
			if err := waitColumn(ctx, a, first, n); err != nil {
				return err
			}
		}
	}
	for _, n := range ns {
		if err := execIdempotent(ctx, n.conn, a.createDistributed); err != nil {
			return fmt.Errorf("create the distributed table over %s.%s on %s: %w", a.db, a.local, n, err)
		}
		if err := execIdempotent(ctx, n.conn, a.alterDistributed); err != nil {
			return fmt.Errorf("alter the distributed table over %s.%s on %s: %w", a.db, a.local, n, err)
		}
	}
	return nil
}

// columnType returns the type of a table's column on one server, "" when
// the table has no such column.
func columnType(ctx context.Context, conn driver.Conn, db, table, column string) (string, error) {
	rows, err := conn.Query(ctx, "SELECT type FROM system.columns WHERE database = ? AND table = ? AND name = ?", db, table, column)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var typ string
	for rows.Next() {
		if err := rows.Scan(&typ); err != nil {
			return "", err
		}
	}
	return typ, rows.Err()
}

// waitColumn waits, at most replicaAlterWait, until a's column of the
// local table on replica n is what the ALTER on its shard's replica first
// made it: there, with the same type. Both are read at every look: another
// service migrating at the same moment may alter the table further
// meanwhile, and only the column of this ALTER is compared, not the
// others a later one adds.
func waitColumn(ctx context.Context, a *clusterAlter, first, n clusterNode) error {
	wctx, cancel := context.WithTimeout(ctx, replicaAlterWait)
	defer cancel()
	b := backoff.New(20*time.Millisecond, time.Second)
	for {
		want, err := columnType(wctx, first.conn, a.db, a.local, a.column)
		if err == nil && want == "" {
			err = fmt.Errorf("column %s missing on %s, which the alter ran on", a.column, first)
		}
		var got string
		if err == nil {
			got, err = columnType(wctx, n.conn, a.db, a.local, a.column)
		}
		if err == nil && got == want {
			return nil
		}
		if werr := b.Wait(wctx); werr != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("wait for replica %s to apply the alter of %s.%s: %w", n, a.db, a.local, ctx.Err())
			}
			if err == nil {
				err = fmt.Errorf("column %s is %q there, %q on %s", a.column, got, want, first)
			}
			return fmt.Errorf("replica %s did not apply the alter of %s.%s made on %s within %v (is its replication running? system.replicas there says): %w",
				n, a.db, a.local, first, replicaAlterWait, err)
		}
	}
}
