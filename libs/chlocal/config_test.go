package chlocal

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

func TestLegacyVersion(t *testing.T) {
	tests := []struct {
		name string
		out  string
		want bool
	}{
		{"18.16 has no --version", "Unknown option specified: version\n", true},
		{"nothing printed", "", true},
		{"current release", "ClickHouse server version 24.8.4.13 (official build).\n", false},
		{"19.x", "ClickHouse server version 19.17.6.36 (official build).\n", false},
		{"18.x that prints one", "ClickHouse server version 18.16.1.\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := legacyVersion([]byte(tt.out)); got != tt.want {
				t.Errorf("legacyVersion(%q) = %v, want %v", tt.out, got, tt.want)
			}
		})
	}
}

// TestConfigWellFormed: the config renders to well-formed XML for both
// kinds of server (only the 18.x one can be started here).
func TestConfigWellFormed(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		t.Run("legacy="+strconv.FormatBool(legacy), func(t *testing.T) {
			var buf bytes.Buffer
			data := configData{Dir: "/d", TCPPort: 1, HTTPPort: 2, Legacy: legacy,
				TLSPort: 3, TLS: &TLS{CertFile: "/c.crt", KeyFile: "/c.key", ClientCAFile: "/ca.crt"},
				Users: []user{{Name: "trawl", PasswordSHA256: "00"}}, PartLog: true}
			if err := configTmpl.Execute(&buf, data); err != nil {
				t.Fatal(err)
			}
			d := xml.NewDecoder(&buf)
			for {
				_, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("config is not well-formed XML: %v", err)
				}
			}
		})
	}
}

// TestConfigApplied: the running server took the settings, and the
// invariant 18.16 needs holds: the pool entries that must be free before a
// merge is lowered stay below the pool size, or big merges never run.
func TestConfigApplied(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	srv, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	setting := func(table, name string) uint64 {
		t.Helper()
		var v string
		if err := conn.QueryRow(ctx, "SELECT value FROM system."+table+" WHERE name = ?", name).Scan(&v); err != nil {
			t.Fatalf("%s %s: %v", table, name, err)
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s %s = %q: %v", table, name, v, err)
		}
		return n
	}
	if got := setting("settings", "use_uncompressed_cache"); got != 1 {
		t.Errorf("use_uncompressed_cache = %d, want 1", got)
	}
	pool := setting("settings", "background_pool_size")
	lower := setting("merge_tree_settings", "number_of_free_entries_in_pool_to_lower_max_size_of_merge")
	if lower >= pool {
		t.Errorf("number_of_free_entries_in_pool_to_lower_max_size_of_merge = %d, not below background_pool_size %d", lower, pool)
	}
	if srv.legacy {
		if pool != 2 {
			t.Errorf("background_pool_size = %d, want 2", pool)
		}
		if got := setting("merge_tree_settings", "max_bytes_to_merge_at_max_space_in_pool"); got != 32<<20 {
			t.Errorf("max_bytes_to_merge_at_max_space_in_pool = %d, want %d", got, 32<<20)
		}
	}
	t.Logf("legacy=%v background_pool_size=%d lower-at-free-entries=%d", srv.legacy, pool, lower)
}

// TestClusterConfig: a cluster node's configuration is well-formed XML
// with its macros, the cluster's shards and ZooKeeper; a server that is not
// a node's has none of it (single-server configuration unchanged).
func TestClusterConfig(t *testing.T) {
	node := &nodeConfig{Name: "trawl", Shards: [][]int{{9001, 9002}, {9003, 9004}}, Shard: "02", Replica: "s2r1",
		InterserverPort: 9100, ZooKeeperPort: 2181}
	type doc struct {
		Macros struct {
			Shard   string `xml:"shard"`
			Replica string `xml:"replica"`
		} `xml:"macros"`
		Shards []struct {
			Internal bool `xml:"internal_replication"`
			Replicas []struct {
				Port int `xml:"port"`
			} `xml:"replica"`
		} `xml:"remote_servers>trawl>shard"`
		ZooKeeperPort   int    `xml:"zookeeper>node>port"`
		InterserverPort int    `xml:"interserver_http_port"`
		LoadBalancing   string `xml:"profiles>default>load_balancing"`
		ProductMode     string `xml:"profiles>default>distributed_product_mode"`
	}
	for _, n := range []*nodeConfig{node, nil} {
		var buf bytes.Buffer
		if err := configTmpl.Execute(&buf, configData{Dir: "/d", TCPPort: 9003, HTTPPort: 2, Legacy: true, Cluster: n}); err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := xml.Unmarshal(buf.Bytes(), &d); err != nil {
			t.Fatalf("config is not well-formed XML: %v", err)
		}
		if n == nil {
			if len(d.Shards) != 0 || d.Macros.Shard != "" || d.ZooKeeperPort != 0 || d.LoadBalancing != "" {
				t.Errorf("single server config has cluster settings: %+v", d)
			}
			continue
		}
		if d.Macros.Shard != "02" || d.Macros.Replica != "s2r1" || d.ZooKeeperPort != 2181 || d.InterserverPort != 9100 ||
			d.LoadBalancing != "in_order" || d.ProductMode != "global" {
			t.Errorf("node config: %+v", d)
		}
		if len(d.Shards) != 2 || !d.Shards[1].Internal || len(d.Shards[1].Replicas) != 2 || d.Shards[1].Replicas[1].Port != 9004 {
			t.Errorf("remote_servers: %+v", d.Shards)
		}
	}
}

// TestPartsLimitsAboveTheCap: 18.16 merges no part past the cap
// (max_bytes_to_merge_at_max_space_in_pool), so a table keeps a part per
// cap's worth of compressed data: documents has one per ~22 MiB of text,
// 161 parts after 1.1 M documents, and all crawls' documents share one
// partition. Under the server's parts limits a data dir of a few million
// documents would have its inserts delayed, then refused ("Too many
// parts"), however long the merges ran. A table whose merges are stopped
// takes partsOverOldLimit parts (over the 600 at which inserts were
// refused) with no insert delayed or refused.
func TestPartsLimitsAboveTheCap(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := Start(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if !srv.legacy {
		t.Skip("current releases merge past 32 MiB: no cap, no legacy parts limits")
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE TABLE default.parts (x UInt64) ENGINE = MergeTree ORDER BY x",
		"SYSTEM STOP MERGES default.parts",
	} {
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	event := func(name string) uint64 {
		t.Helper()
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT toUInt64(sum(value)) FROM system.events WHERE event = ?", name).Scan(&n); err != nil {
			t.Fatalf("event %s: %v", name, err)
		}
		return n
	}
	delayed, rejected := event("DelayedInserts"), event("RejectedInserts")
	const partsOverOldLimit = 660
	for i := range partsOverOldLimit {
		if err := conn.Exec(ctx, "INSERT INTO default.parts SELECT "+strconv.Itoa(i)); err != nil {
			t.Fatalf("insert %d (each a part, none merged): %v", i+1, err)
		}
	}
	var parts uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.parts WHERE database = 'default' AND table = 'parts' AND active").Scan(&parts); err != nil {
		t.Fatal(err)
	}
	if parts != partsOverOldLimit {
		t.Errorf("active parts = %d, want %d (one per insert, merges stopped)", parts, partsOverOldLimit)
	}
	if d, r := event("DelayedInserts")-delayed, event("RejectedInserts")-rejected; d != 0 || r != 0 {
		t.Errorf("inserts delayed %d, refused %d; want none below the parts limits", d, r)
	}
}
