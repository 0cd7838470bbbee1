package chstore

import (
	"strings"
	"testing"
)

// TestClusterStatementsCoverMigrations checks that every migration
// statement has a cluster form: every table a sharding key, every
// statement one of the shapes clusterDDL rewrites, and that no plain table
// name is left where the cluster form must name the local table.
func TestClusterStatementsCoverMigrations(t *testing.T) {
	c := clusterDDL{cluster: "trawl", db: "crawler"}
	for _, m := range Migrations() {
		for i, stmt := range m.Statements {
			out, err := c.statements(stmt)
			if err != nil {
				t.Errorf("migration %d statement %d: %v", m.Version, i+1, err)
				continue
			}
			for _, o := range out {
				switch {
				case strings.HasPrefix(o, "INSERT INTO "):
				case !strings.Contains(o+" ", " ON CLUSTER trawl "):
					t.Errorf("migration %d statement %d: no ON CLUSTER: %.80s", m.Version, i+1, o)
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
	want := []string{
		"CREATE TABLE IF NOT EXISTS crawler.url_seen_local ON CLUSTER trawl (\n\tpartition UInt16,\n\tfp UInt64\n) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/crawler/url_seen_local', '{replica}', fp) ORDER BY (partition, fp)",
		"CREATE TABLE IF NOT EXISTS crawler.url_seen ON CLUSTER trawl AS crawler.url_seen_local ENGINE = Distributed(trawl, crawler, url_seen_local, partition)",
	}
	if strings.Join(got, "\n--\n") != strings.Join(want, "\n--\n") {
		t.Errorf("url_seen:\n%s\nwant\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
	}
	if _, err := c.statements("DROP TABLE x"); err == nil {
		t.Error("DROP TABLE: no error, want one (no cluster form)")
	}
	if _, err := c.statements("CREATE TABLE IF NOT EXISTS unknown (a UInt8) ENGINE = MergeTree ORDER BY a"); err == nil {
		t.Error("table without a sharding key: no error")
	}
}
