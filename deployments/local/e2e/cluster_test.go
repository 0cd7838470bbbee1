package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// crawlCounts is what a crawl left in ClickHouse, counted exactly
// (distinct keys or FINAL), and what the site saw.
type crawlCounts struct {
	Requests  int    // page requests the site served
	Admitted  uint64 // url_seen fingerprints
	FetchRows uint64 // fetch_log rows (FINAL)
	Terminal  uint64 // URLs with a final fetch_log row
	Documents uint64 // documents
	Status    string // the crawl_status analyst query's row, but for dropped
	PagesPerS float64
	// Events is url_events' distinct URLs per state, and Dropped
	// crawl_status' dropped column (the same): how many links to an
	// admitted URL arrive after it was admitted depends on timing, so
	// they are shown, not compared.
	Events  string
	Dropped uint64
}

// same is what two crawls of one site must agree on.
func (c crawlCounts) same() string {
	return fmt.Sprintf("requests %d, admitted %d, fetch_log rows %d, terminal %d, documents %d, crawl_status %s",
		c.Requests, c.Admitted, c.FetchRows, c.Terminal, c.Documents, c.Status)
}

func (c crawlCounts) String() string {
	return fmt.Sprintf("%s; url_events %s, dropped %d", c.same(), c.Events, c.Dropped)
}

// countCrawl reads the counts of the env's crawl.
func (e *crawlEnv) countCrawl(ctx context.Context) crawlCounts {
	e.t.Helper()
	t := e.t
	conn := e.p.Store.Conn()
	c := crawlCounts{Requests: len(pageRequests(e.site.Requests()))}
	for q, dst := range map[string]*uint64{
		"SELECT uniqExact(fp) FROM url_seen WHERE crawl_id = ?":                    &c.Admitted,
		"SELECT count() FROM fetch_log FINAL WHERE crawl_id = ?":                   &c.FetchRows,
		"SELECT uniqExact(url_fp) FROM fetch_log WHERE crawl_id = ? AND final = 1": &c.Terminal,
		"SELECT uniqExact(url_fp) FROM documents WHERE crawl_id = ?":               &c.Documents,
	} {
		if err := conn.QueryRow(ctx, q, e.crawlID).Scan(dst); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "SELECT state, uniqExact(url_fp) FROM url_events WHERE crawl_id = ? GROUP BY state ORDER BY state", e.crawlID)
	if err != nil {
		t.Fatalf("query url_events: %v", err)
	}
	var ev []string
	for rows.Next() {
		var (
			st string
			n  uint64
		)
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatalf("scan url_events: %v", err)
		}
		ev = append(ev, fmt.Sprintf("%s=%d", st, n))
	}
	rows.Close()
	c.Events = strings.Join(ev, " ")
	// The analyst query, unchanged: on the cluster it reads the
	// Distributed tables.
	rows, err = conn.Query(ctx, strings.TrimSuffix(analystQuery(t, "crawl_status"), ";"))
	if err != nil {
		t.Fatalf("crawl_status: %v", err)
	}
	for rows.Next() {
		var (
			crawl, st                                                         string
			admitted, terminal                                                uint64
			pending                                                           int64
			retrying, fetched, redirected, denied, failed, cx, spent, dropped uint64
		)
		if err := rows.Scan(&crawl, &admitted, &terminal, &pending, &retrying, &fetched, &redirected, &denied, &failed, &cx, &spent, &dropped, &st); err != nil {
			t.Fatalf("scan crawl_status: %v", err)
		}
		if crawl == e.crawlID {
			c.Status = fmt.Sprintf("[admitted %d terminal %d pending %d fetched %d redirected %d denied %d failed %d %s]",
				admitted, terminal, pending, fetched, redirected, denied, failed, st)
			c.Dropped = dropped
		}
	}
	rows.Close()
	return c
}

// insertProbe times n synchronous inserts of rows fetch_log rows each
// (a probe crawl's, apart from the test's) through the store, as the
// services' batch writers insert, and returns the median and the 90th
// percentile.
func insertProbe(ctx context.Context, t *testing.T, s *chstore.Store, probe string, n, rows int) (p50, p90 time.Duration) {
	t.Helper()
	var took []time.Duration
	now := time.Now().Truncate(time.Second)
	for i := range n {
		b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO fetch_log (crawl_id, url, url_fp, host, partition, attempt, fetched_at, status)")
		if err != nil {
			t.Fatalf("insert probe: %v", err)
		}
		for j := range rows {
			k := i*rows + j
			if err := b.Append(probe, fmt.Sprintf("http://h%d.probe/%d", k%50, k), uint64(k)+1, fmt.Sprintf("h%d.probe", k%50),
				uint16(k%8), uint16(0), now, uint16(200)); err != nil {
				t.Fatalf("insert probe: %v", err)
			}
		}
		start := time.Now()
		if err := b.Send(); err != nil {
			t.Fatalf("insert probe: %v", err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)*9/10]
}

// replicaLag is how far behind a server's replicas are: their queues'
// entries and the largest delay ClickHouse reports.
func replicaLag(ctx context.Context, t *testing.T, srv *chlocal.Server, db string) string {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, Auth: clickhouse.Auth{Database: "default", Username: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var (
		queue uint64
		delay uint64
	)
	if err := conn.QueryRow(ctx, "SELECT toUInt64(sum(queue_size)), toUInt64(max(absolute_delay)) FROM system.replicas WHERE database = ?", db).Scan(&queue, &delay); err != nil {
		return "unknown: " + err.Error()
	}
	return fmt.Sprintf("%d entries queued, %d s behind", queue, delay)
}

// TestClusterCrawl crawls one demo site twice, on the single test server
// and on a real ClickHouse cluster of two shards of two replicas (four
// servers and a ZooKeeper started here) in cluster mode, SIGKILLs one
// replica in the middle of the cluster crawl, and checks that the crawl
// completes with the counts of the single-node run; then restarts the
// scheduler, which reloads its seen set from the Distributed url_seen,
// re-seeds every URL of the site, and checks that none is fetched again.
// It prints pages/s and the time of an insert, single vs cluster.
// Skipped, saying so, only when ZooKeeper is not installed.
func TestClusterCrawl(t *testing.T) {
	// The cluster's migrations send no ALTER through distributed DDL any
	// more (libs/chstore alterOnNodes), but chtest.MigratedCluster still
	// starts a fresh cluster after a DDL hang, up to three, and a loaded CI
	// machine runs the cluster's DDL several times slower.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	site := demosite.Config{Hosts: 6, PagesPerHost: 60, FirstHostOctet: 140}
	const delay = 50 * time.Millisecond

	var (
		single, cluster crawlCounts
		probes          []string
	)
	const probeN, probeRows = 30, 1000
	probe := func(t *testing.T, name string, s *chstore.Store) {
		p50, p90 := insertProbe(ctx, t, s, "probe-"+strings.ReplaceAll(name, " ", "-"), probeN, probeRows)
		probes = append(probes, fmt.Sprintf("%s: median %s, p90 %s", name, p50.Round(100*time.Microsecond), p90.Round(100*time.Microsecond)))
	}
	t.Run("single", func(t *testing.T) {
		e := startEnv(t, ctx, envConfig{site: site, delay: delay})
		start := time.Now()
		e.seed(ctx, e.site.Seeds(), "")
		e.drain(ctx, 120*time.Second)
		took := time.Since(start)
		single = e.countCrawl(ctx)
		single.PagesPerS = float64(single.Requests) / took.Seconds()
		e.stop()
		if dups := checkCoverage(t, e.site, true); dups > 0 {
			t.Errorf("%d duplicate fetches", dups)
		}
		t.Logf("single node: %s", single)
		probe(t, "single node", e.p.Store)
	})
	if t.Failed() {
		return
	}
	t.Run("cluster", func(t *testing.T) {
		// The cluster is migrated before the services start, in the
		// subtest's database (chtest.ClusterConfig names it after the
		// test), so that the services find every migration applied: a
		// distributed DDL that ClickHouse 18.16 leaves hanging on a
		// replica (ClickHouse#17089; ALTERs no longer go that way) then
		// costs a fresh cluster, not the test (MigratedCluster).
		cl, _, _ := chtest.MigratedCluster(ctx, t, 2, 2, 1)
		// Under supervisors, as the launcher and Kubernetes run them: a
		// query in flight on the replica when it dies fails and is made
		// again, on its peer (docs/operations.md, "ClickHouse cluster");
		// no service may exit.
		e := startEnv(t, ctx, envConfig{site: site, delay: delay, cluster: cl, autoRestart: true})
		total := len(e.site.ReachableAllowed())
		start := time.Now()
		e.seed(ctx, e.site.Seeds(), "")
		// A third into the crawl, the first replica of shard 2 dies:
		// the services talk to shard 1's first server, whose
		// Distributed tables now write and read shard 2 on its second
		// replica.
		victim := cl.Node(1, 0)
		for len(pageRequests(e.site.Requests())) < total/3 {
			if err := e.p.Check(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for a third of the crawl: %v", ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		killedAt := len(pageRequests(e.site.Requests()))
		killedTime := time.Now()
		victim.Kill()
		t.Logf("SIGKILLed replica s2r1 (%s) at %d of %d pages; its peer s2r2: %s", victim.Addr(), killedAt, total,
			replicaLag(ctx, t, cl.Node(1, 1), e.p.Store.Database()))
		e.drain(ctx, 150*time.Second)
		took := time.Since(start)
		down := e.countCrawl(ctx)
		down.PagesPerS = float64(down.Requests) / took.Seconds()
		cluster = down
		// A service restarted after the kill may fetch again what its
		// previous run had not acknowledged: counted, not failed.
		dups := checkCoverage(t, e.site, false)
		t.Logf("with a replica killed: %d duplicate fetches", dups)
		if ev := e.supervisorEvents(); len(ev) > 0 {
			t.Errorf("services exited with a replica down: %v", ev)
		}
		// What the cluster answers with the replica still down: an acked
		// insert is on one replica's disk, and one the killed replica had
		// not yet passed on comes back with it (reported, not failed).
		if down.same() != single.same() {
			t.Logf("with the replica down: %s (differs from the single node run)", down)
		} else {
			t.Logf("with the replica down: the single node run's counts")
		}

		probe(t, "cluster, a replica down", e.p.Store)

		// With the long outages on (TestLongOutages), the replica stays
		// down for 2 minutes, the crawl's end included.
		if limit, err := time.ParseDuration(os.Getenv(longOutagesEnv)); err == nil && limit >= 2*time.Minute {
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(time.Until(killedTime.Add(2 * time.Minute))):
			}
		}
		t.Logf("replica s2r1 down for %s", time.Since(killedTime).Round(time.Second))
		// The replica comes back and catches up; then the counts must be
		// the single node run's.
		chtest.RestartReplica(ctx, t, victim)
		syncCluster(ctx, t, cl, e.p.Store.Database())
		probe(t, "cluster, all replicas up", e.p.Store)
		after := e.countCrawl(ctx)
		if after.same() != single.same() {
			t.Errorf("cluster counts differ from the single node run:\ncluster %s\nsingle  %s", after, single)
		}

		// The scheduler restarts and reloads its partitions' seen sets
		// from the cluster; every URL of the site seeded again is a
		// duplicate: nothing is fetched twice.
		proc := e.p.Process("scheduler")
		if err := proc.Kill(); err != nil {
			t.Fatalf("kill scheduler: %v", err)
		}
		if err := e.p.Restart(ctx, proc); err != nil {
			t.Fatalf("restart scheduler: %v", err)
		}
		all := e.site.ReachableAllowed()
		seeds := filepath.Join(t.TempDir(), "all.txt")
		if err := os.WriteFile(seeds, []byte(strings.Join(all, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := len(pageRequests(e.site.Requests()))
		e.seed(ctx, nil, seeds)
		e.drain(ctx, 60*time.Second)
		if got := len(pageRequests(e.site.Requests())); got != before {
			t.Errorf("after a scheduler restart, re-seeding the %d URLs of the site fetched %d pages again; want none (seen set reloaded)", len(all), got-before)
		}
		var dupSeeds uint64
		if err := e.p.Store.Conn().QueryRow(ctx, "SELECT uniqExact(url_fp) FROM url_events WHERE crawl_id = ? AND state = 'duplicate'",
			e.crawlID).Scan(&dupSeeds); err != nil {
			t.Fatal(err)
		}
		if dupSeeds < uint64(len(all)) {
			t.Errorf("%d URLs recorded duplicate, want at least the %d re-seeded", dupSeeds, len(all))
		}
		e.stop()
		t.Logf("cluster: %s", after)
	})
	if t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ClickHouse single node vs cluster (2 shards x 2 replicas, replica s2r1 SIGKILLed a third into the crawl), %d pages, %s delay, %d hosts:\n"+
		"  pages/s: single %.1f, cluster %.1f",
		single.Requests, delay, site.Hosts, single.PagesPerS, cluster.PagesPerS)
	fmt.Fprintf(&b, "\n  one insert of %d fetch_log rows (%d times): %s", probeRows, probeN, strings.Join(probes, "; "))
	t.Log(b.String())
	fmt.Println("e2e:", b.String())
}

// syncCluster waits until every replica of every local table of db has
// fetched what its shard holds.
func syncCluster(ctx context.Context, t *testing.T, cl *chlocal.Cluster, db string) {
	t.Helper()
	for _, addr := range cl.Addrs() {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: clickhouse.Auth{Database: db, Username: "default"}})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ? AND engine LIKE 'Replicated%'", db)
		if err != nil {
			t.Fatalf("list replicated tables on %s: %v", addr, err)
		}
		var tables []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		rows.Close()
		for _, tb := range tables {
			if !strings.HasSuffix(tb, chstore.LocalSuffix) && tb != "schema_migrations" {
				continue
			}
			if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA `"+db+"`.`"+tb+"`"); err != nil {
				t.Fatalf("sync replica %s on %s: %v", tb, addr, err)
			}
		}
		conn.Close()
	}
}
