package chstore

import (
	"reflect"
	"strings"
	"testing"
)

// TestClusterStatementsCoverMigrations checks that every migration
// statement has a cluster form: every table a sharding key, every
// statement one of the shapes clusterDDL rewrites, that no plain table
// name is left where the cluster form must name the local table, that
// CREATEs go ON CLUSTER and ALTERs do not (18.16's distributed DDL can hang
// on an ALTER of a replicated table: cluster.go).
func TestClusterStatementsCoverMigrations(t *testing.T) {
	c := clusterDDL{cluster: "trawl", db: "crawler"}
	for _, m := range Migrations() {
		for i, stmt := range m.Statements {
			out, err := c.statements(stmt)
			if err != nil {
				t.Errorf("migration %d statement %d: %v", m.Version, i+1, err)
				continue
			}
			for _, st := range out {
				if a := st.alter; a != nil {
					for _, o := range []string{a.alterLocal, a.alterDistributed, a.createDistributed} {
						if strings.Contains(o, " ON CLUSTER ") {
							t.Errorf("migration %d statement %d: ALTER step ON CLUSTER: %.80s", m.Version, i+1, o)
						}
					}
					if !strings.HasPrefix(a.alterLocal, "ALTER TABLE crawler."+a.local+" ") || !strings.HasSuffix(a.local, LocalSuffix) {
						t.Errorf("migration %d statement %d: ALTER not of the local table: %.80s", m.Version, i+1, a.alterLocal)
					}
					if strings.HasPrefix(a.alterDistributed, "ALTER TABLE crawler."+a.local+" ") ||
						!strings.Contains(a.createDistributed, "ENGINE = Distributed(trawl, crawler, "+a.local+", ") {
						t.Errorf("migration %d statement %d: distributed table's steps on the local table: %.80s; %.200s", m.Version, i+1, a.alterDistributed, a.createDistributed)
					}
					continue
				}
				o := st.sql
				switch {
				case strings.HasPrefix(o, "INSERT INTO "):
				case !strings.Contains(o+" ", " ON CLUSTER trawl "):
					t.Errorf("migration %d statement %d: no ON CLUSTER: %.80s", m.Version, i+1, o)
				case strings.HasPrefix(o, "ALTER "):
					t.Errorf("migration %d statement %d: ALTER ON CLUSTER: %.80s", m.Version, i+1, o)
				case strings.Contains(o, "MergeTree") && !strings.Contains(o, "ENGINE = Replicated"):
					t.Errorf("migration %d statement %d: unreplicated engine: %.80s", m.Version, i+1, o)
				case strings.HasPrefix(o, "CREATE MATERIALIZED VIEW") &&
					(!strings.Contains(o, " TO crawler.fetch_") || !strings.Contains(o, "FROM crawler.fetch_log_local")):
					t.Errorf("migration %d statement %d: view not on the local tables: %s", m.Version, i+1, o)
				}
			}
		}
	}
	got, err := c.statements("CREATE TABLE IF NOT EXISTS url_seen (\n\tpartition UInt16,\n\tfp UInt64\n) ENGINE = ReplacingMergeTree(fp) ORDER BY (partition, fp)")
	if err != nil {
		t.Fatal(err)
	}
	want := []clusterStep{
		{sql: "CREATE TABLE IF NOT EXISTS crawler.url_seen_local ON CLUSTER trawl (\n\tpartition UInt16,\n\tfp UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/crawler/url_seen_local', '{replica}', fp) ORDER BY (partition, fp)"},
		{sql: "CREATE TABLE IF NOT EXISTS crawler.url_seen ON CLUSTER trawl AS crawler.url_seen_local ENGINE = Distributed(trawl, crawler, url_seen_local, partition)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("url_seen:\n%+v\nwant\n%+v", got, want)
	}
	got, err = c.statements("ALTER TABLE url_seen ADD COLUMN depth UInt16 DEFAULT 0")
	if err != nil {
		t.Fatal(err)
	}
	want = []clusterStep{{alter: &clusterAlter{
		db:                "crawler",
		local:             "url_seen_local",
		column:            "depth",
		alterLocal:        "ALTER TABLE crawler.url_seen_local ADD COLUMN depth UInt16 DEFAULT 0",
		alterDistributed:  "ALTER TABLE crawler.url_seen ADD COLUMN depth UInt16 DEFAULT 0",
		createDistributed: "CREATE TABLE IF NOT EXISTS crawler.url_seen AS crawler.url_seen_local ENGINE = Distributed(trawl, crawler, url_seen_local, partition)",
	}}}
	if len(got) != 1 || got[0].alter == nil || !reflect.DeepEqual(*got[0].alter, *want[0].alter) {
		t.Errorf("ALTER url_seen: %+v, want %+v", got, *want[0].alter)
	}
	if _, err := c.statements("DROP TABLE x"); err == nil {
		t.Error("DROP TABLE: no error, want one (no cluster form)")
	}
	if _, err := c.statements("CREATE TABLE IF NOT EXISTS unknown (a UInt8) ENGINE = MergeTree ORDER BY a"); err == nil {
		t.Error("table without a sharding key: no error")
	}
}
