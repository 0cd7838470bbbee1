package e2e_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// webEnv is one test's crawl of a generated web (internal/websim): the
// web, the pipeline, and, when the test restarts it, the test's own
// embedded broker.
type webEnv struct {
	*crawlEnv
	web     *websim.Web
	dataDir string

	// With ownBroker: the broker the pipeline was given (BrokerAddr),
	// its address and data directory, so that restartBroker can bring it
	// back where the services expect it.
	broker     *kafkaembed.Broker
	brokerAddr string
	brokerDir  string

	// With ownClickHouse: the test's own server.
	ch *chlocal.Server
}

type webEnvConfig struct {
	web   websim.Config
	delay time.Duration
	args  map[string][]string
	// ownBroker starts the embedded broker in the test rather than in the
	// pipeline, on a fixed address, so restartBroker can stop and start it.
	ownBroker bool
	// ownClickHouse starts a ClickHouse server of the test's own (e.ch)
	// instead of using the shared test server, so that it can be stopped
	// and restarted.
	ownClickHouse bool
	// autoRestart puts the services under the launcher's supervisors
	// (supervise.DefaultPolicy); every exit they handle is recorded.
	autoRestart bool
	// volume, when set, holds the data of the test's own broker and
	// ClickHouse (ownBroker, ownClickHouse): a small volume a test fills.
	volume string
}

// startWebEnv starts the generated web and the pipeline (separate
// processes, real ClickHouse with a fresh database). On failure the tail
// of every service log is logged.
func startWebEnv(t *testing.T, ctx context.Context, wc webEnvConfig) *webEnv {
	t.Helper()
	b := serviceBins(t)
	web, err := websim.Start(ctx, wc.web)
	if err != nil {
		t.Fatalf("start websim: %v", err)
	}
	t.Cleanup(func() { web.Close() })
	e := &webEnv{
		crawlEnv: &crawlEnv{t: t, delay: wc.delay, crawlID: "e2e-" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "-")},
		web:      web,
		dataDir:  t.TempDir(),
	}
	if wc.ownBroker {
		ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("reserve a broker port: %v", err)
		}
		e.brokerAddr = ln.Addr().String()
		ln.Close()
		e.brokerDir = filepath.Join(cmp.Or(wc.volume, e.dataDir), "kafka")
		if e.broker, err = kafkaembed.Start(ctx, e.brokerDir, e.brokerAddr); err != nil {
			t.Fatalf("start broker: %v", err)
		}
		// Registered before the pipeline's cleanup: runs after it.
		t.Cleanup(func() {
			if e.broker != nil {
				e.broker.Close()
			}
		})
	}
	var chAddr, chDB string
	if wc.ownClickHouse {
		srv, err := chlocal.Start(ctx, filepath.Join(cmp.Or(wc.volume, e.dataDir), "clickhouse"))
		if err != nil {
			t.Fatalf("start clickhouse: %v", err)
		}
		e.ch = srv
		// Registered before the pipeline's cleanup: runs after it.
		t.Cleanup(func() { _ = srv.Stop() })
		chAddr, chDB = srv.Addr(), "e2e"
	} else {
		ch := chtest.Config(t)
		chAddr, chDB = ch.Addr[0], ch.Database
	}
	start := time.Now()
	p, err := pipeline.Start(ctx, pipeline.Config{
		DataDir: e.dataDir, Bins: b, BrokerAddr: e.brokerAddr, ClickHouseAddr: chAddr, Database: chDB,
		Partitions: 8, SessionTimeout: 4 * time.Second, Delay: wc.delay, AllowPrivate: true,
		Args: wc.args, LogLevel: "debug", StopGrace: 20 * time.Second,
		AutoRestart: wc.autoRestart,
		OnRestart: func(ev supervise.Event) {
			t.Logf("supervisor: %s", ev)
			e.mu.Lock()
			e.restarts = append(e.restarts, ev)
			e.mu.Unlock()
		},
	})
	if err != nil {
		t.Fatalf("start pipeline: %v\n%s", err, tails(e.dataDir))
	}
	t.Logf("pipeline ready in %s", time.Since(start).Round(time.Millisecond))
	e.p = p
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs (%s):\n%s", e.dataDir, p.LogTails(40))
		}
		if !e.stopped {
			p.Kill()
		}
		p.Close()
	})
	return e
}

// webScope is the scope and limits of a crawl of the generated web.
type webScope struct {
	AllowHosts []string // host names (no port)
	MaxDepth   uint32
}

// seedScoped publishes the crawl's spec (the body of POST /v1/crawls,
// through the seeder's --spec, as the launcher does) and seeds every
// host's index page.
func (e *webEnv) seedScoped(ctx context.Context, sc webScope) {
	e.t.Helper()
	req := map[string]any{
		"crawl_id": e.crawlID,
		"name":     e.t.Name(),
		"scope":    map[string]any{"allow_hosts": sc.AllowHosts},
		"limits":   map[string]any{"max_depth": sc.MaxDepth},
	}
	body, err := json.Marshal(req)
	if err != nil {
		e.t.Fatal(err)
	}
	spec := filepath.Join(e.dataDir, "spec.json")
	if err := os.WriteFile(spec, body, 0o644); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.p.Seed(ctx, pipeline.SeedRun{CrawlID: e.crawlID, Seeds: e.web.Seeds(), SpecFile: spec}); err != nil {
		e.t.Fatalf("seed: %v", err)
	}
}

// hostNames returns the host names (addresses without the port) of the
// web's crawl hosts: its scope.
func (e *webEnv) hostNames() []string {
	var out []string
	for _, h := range e.web.Hosts() {
		name, _, err := net.SplitHostPort(h)
		if err != nil {
			e.t.Fatalf("host %q: %v", h, err)
		}
		out = append(out, name)
	}
	return out
}

// waitPages waits until the web has served n distinct content pages.
func (e *webEnv) waitPages(ctx context.Context, n int) {
	e.t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for e.web.Stats().Pages < n {
		if err := e.p.Check(); err != nil {
			e.t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("waiting for %d pages: %v (served %d)", n, ctx.Err(), e.web.Stats().Pages)
		case <-tick.C:
		}
	}
}

// restartBroker stops the test's broker (it flushes its log and group
// state to its data directory, as a broker does at shutdown), keeps it
// down for down, and starts it again on the same address and directory.
func (e *webEnv) restartBroker(ctx context.Context, down time.Duration) {
	e.t.Helper()
	if e.broker == nil {
		e.t.Fatal("restartBroker needs webEnvConfig.ownBroker")
	}
	e.broker.Close()
	e.broker = nil
	select {
	case <-ctx.Done():
		e.t.Fatalf("broker down: %v", ctx.Err())
	case <-time.After(down):
	}
	e.startBrokerAgain(ctx)
}

// startBrokerAgain starts the test's broker again on its address and
// data directory, after restartBroker or a dependency outage stopped it.
func (e *webEnv) startBrokerAgain(ctx context.Context) {
	e.t.Helper()
	var err error
	for range 50 { // the port may linger a moment
		if e.broker, err = kafkaembed.Start(ctx, e.brokerDir, e.brokerAddr); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("restart broker: %v", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.t.Fatalf("restart broker on %s: %v", e.brokerAddr, err)
}

// siteCost is what a crawl cost the site beyond the one request per
// resource it needs, from the site's own request log.
type siteCost struct {
	Stats websim.Stats
	// MaxHits is the most requests one resource received, and MaxHitsOf
	// the resource.
	MaxHits   int
	MaxHitsOf string
	// Errors5xx are the resources answered with a 5xx at least once.
	Errors5xx int
	// Repeated lists the resources requested again after a final answer
	// (the duplicates), with the times of their requests.
	Repeated []string
}

// extra is the requests that fetched nothing new: duplicates and
// robots.txt requests beyond one per host.
func (c siteCost) extra() int { return c.Stats.Duplicates + c.Stats.RobotsMore }

func costOf(web *websim.Web) siteCost {
	c := siteCost{Stats: web.Stats()}
	for _, r := range web.Resources() {
		if len(r.Hits) > c.MaxHits {
			c.MaxHits, c.MaxHitsOf = len(r.Hits), r.ID
		}
		final := false
		var times []string
		for _, h := range r.Hits {
			if h.Status >= 500 {
				c.Errors5xx++
				break
			}
		}
		for _, h := range r.Hits {
			times = append(times, fmt.Sprintf("%s/%d", h.At.Format("15:04:05.000"), h.Status))
		}
		for i, h := range r.Hits {
			if final && i > 0 {
				c.Repeated = append(c.Repeated, r.ID+" "+strings.Join(times, " "))
				break
			}
			final = final || (h.Status > 0 && h.Status < 500)
		}
	}
	sort.Strings(c.Repeated)
	return c
}

// unfetched returns the URLs the scheduler admitted (url_seen) that have
// no fetch_log row: work lost on its way to the fetcher (invariant 4).
func (e *webEnv) unfetched(ctx context.Context) []string {
	e.t.Helper()
	rows, err := e.p.Store.Conn().Query(ctx, `SELECT url FROM url_seen FINAL WHERE crawl_id = ?
		AND fp NOT IN (SELECT url_fp FROM fetch_log WHERE crawl_id = ?) ORDER BY url`, e.crawlID, e.crawlID)
	if err != nil {
		e.t.Fatalf("query url_seen: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			e.t.Fatalf("scan url_seen: %v", err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatalf("read url_seen: %v", err)
	}
	return out
}

// lostRedirects returns the redirect chains the site started and the
// crawl did not follow: a /r/<k> answered (301 to /r/<k>/hop, a resource
// no page links) whose hop was never requested.
func lostRedirects(web *websim.Web) []string {
	got := map[string]bool{}
	for _, r := range web.Resources() {
		got[r.ID] = true
	}
	var out []string
	for id := range got {
		if i := strings.Index(id, " /r/"); i >= 0 && !strings.HasSuffix(id, "/hop") && !got[id+"/hop"] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// frontier returns how many of the crawl's URLs waited in the scheduler's
// frontier table (host quota, paused crawl), and how many still wait.
func (e *webEnv) frontier(ctx context.Context) (deferred, pending uint64) {
	e.t.Helper()
	err := e.p.Store.Conn().QueryRow(ctx, `SELECT count(), countIf(st = 0) FROM
		(SELECT fp, max(state) AS st FROM frontier_v2 WHERE crawl_id = ? GROUP BY fp)`, e.crawlID).Scan(&deferred, &pending)
	if err != nil {
		e.t.Fatalf("query frontier: %v", err)
	}
	return deferred, pending
}

// missingPages returns the content pages the web never served.
func missingPages(web *websim.Web) []string {
	got := map[string]bool{}
	for _, r := range web.Resources() {
		got[r.ID] = true
	}
	var out []string
	for _, id := range web.ContentIDs() {
		if !got[id] {
			out = append(out, id)
		}
	}
	return out
}

// explainMissing says, for each content page never requested (an ID of
// missingPages), what the scheduler did with its URL: its url_events rows
// (state, reason, depth of the dropped discovery) or that it never came.
func (e *webEnv) explainMissing(ctx context.Context, ids []string) []string {
	e.t.Helper()
	hosts := e.web.Hosts()
	var out []string
	for _, id := range ids {
		h, p, ok := strings.Cut(id, " ")
		i, err := strconv.Atoi(h)
		if !ok || err != nil || i < 0 || i >= len(hosts) {
			continue
		}
		u := "http://" + hosts[i] + p
		rows, err := e.p.Store.Conn().Query(ctx,
			"SELECT state, reason, depth FROM url_events WHERE crawl_id = ? AND url = ? ORDER BY depth", e.crawlID, u)
		if err != nil {
			e.t.Fatalf("query url_events: %v", err)
		}
		var events []string
		for rows.Next() {
			var (
				state, reason string
				depth         uint16
			)
			if err := rows.Scan(&state, &reason, &depth); err != nil {
				e.t.Fatalf("scan url_events: %v", err)
			}
			events = append(events, fmt.Sprintf("%s/%s at depth %d", state, reason, depth))
		}
		rows.Close()
		if len(events) == 0 {
			events = []string{"never discovered"}
		}
		out = append(out, u+": "+strings.Join(events, ", "))
	}
	return out
}
