//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// webConfig is the generated web of a crawl: small sites, so that a polite
// crawl of hundreds of hosts takes seconds per host.
type webConfig struct {
	Hosts, Articles, MinLinks, MaxLinks int
	// ScriptShare is the share of the hosts whose pages scripts build in
	// the browser (websim --script-share).
	ScriptShare float64
}

// smallWeb is the scenarios' web: 200 hosts of 6 articles, each host about
// a dozen requests (robots.txt, index, list, articles, a redirect chain, a
// 404, a PDF, the 500 and its retries).
var smallWeb = webConfig{Hosts: 200, Articles: 6, MinLinks: 4, MaxLinks: 8}

// crawlConfig is one crawl of the lab.
type crawlConfig struct {
	crawlers int // crawler hosts used, from c1
	web      webConfig
	// env is added to every crawler-host service's environment after the
	// guide's files (the scenario's tuning).
	env []string
	// fetcherEnv is added to the fetchers' environment after env.
	fetcherEnv []string
	// crawlerLink, when set, is a tc qdisc spec on the link of every
	// crawler host used (shapeLink): a host's bandwidth.
	crawlerLink string
}

// labDelay is the politeness delay of every crawl: the guide's.
const labDelay = time.Second

// jitter is how much closer than the delay the web may see two requests
// of one host. The web measures from the start of the last write of one
// answer to the arrival of the next request (websim.Gap), a lower bound
// of the fetcher's own wait from reading the answer's end to sending the
// next request, whatever the web's scheduling; jitter only absorbs the
// reading of two clocks. (The handler's return, measured before, came up
// to 51 ms after the fetcher had read the answer when every site's first
// pages were served at once, on two cores with the race detector.)
const jitter = 2 * time.Millisecond

// crawl is one running crawl: its web, its services on the crawler hosts,
// its own topics (a topic prefix) and ClickHouse database.
type crawl struct {
	t      *testing.T
	lab    *lab
	id     string
	dir    string
	kafka  kafkaio.Config
	chc    chstore.Config
	store  *chstore.Store
	web    *supervise.Process
	ready  websim.Ready
	cfg    crawlConfig
	svcs   []*svc
	seeded time.Time

	mu       sync.Mutex
	stopping map[*svc]bool
	events   []supervise.Event // the supervisors' restarts
	crashErr error             // the first crash loop

	supCancel context.CancelFunc
	sups      sync.WaitGroup
}

// svc is a service process on a crawler host.
type svc struct {
	host    host
	service string
	proc    *supervise.Process
	admin   string // host:port of its admin server, on the host's address
	logFile string
}

func (s *svc) name() string { return s.host.name + "/" + s.service }

var crawlSeq atomic.Int32

// startCrawl starts a crawl's web and services and seeds it. Everything it
// starts is stopped by the test's cleanup.
func startCrawl(t *testing.T, cfg crawlConfig) *crawl {
	t.Helper()
	l := needLab(t)
	ctx := t.Context()
	n := crawlSeq.Add(1)
	c := &crawl{t: t, lab: l, cfg: cfg, stopping: map[*svc]bool{},
		id:  fmt.Sprintf("mh-%s", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))),
		dir: filepath.Join(l.dir, fmt.Sprintf("crawl-%02d", n))}
	start := time.Now()
	c.startWeb(ctx)

	// The wiring every service reads, parsed from the guide's file as
	// the services parse it, with the crawl's own topics and database.
	overlay := []string{
		fmt.Sprintf("CRAWLER_KAFKA_TOPIC_PREFIX=mh%02d.", n),
		fmt.Sprintf("CRAWLER_CLICKHOUSE_DATABASE=mh%02d", n),
	}
	var err error
	c.kafka, c.chc, err = l.wiring(overlay)
	if err != nil {
		t.Fatal(err)
	}
	if c.kafka.Brokers[0] != brokerAddr || c.chc.Addr[0] != chAddr {
		t.Fatalf("deployments/bare/env/cluster.env names brokers %v and ClickHouse %v; the lab's store is %s and %s",
			c.kafka.Brokers, c.chc.Addr, brokerAddr, chAddr)
	}
	// The topics and the schema are the services' to create, as on bare
	// hosts (the guide): every one of them starts on an empty broker
	// prefix and an absent database at once.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs (%s):\n%s", c.dir, c.logTails(25))
		}
		c.kill()
	})
	if cfg.crawlerLink != "" {
		for _, h := range crawlers[:cfg.crawlers] {
			if err := shapeLink(ctx, h, cfg.crawlerLink); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = shapeLink(context.WithoutCancel(t.Context()), h, "") })
		}
	}
	// The scenario's services: scheduler, fetcher and parser on every
	// crawler host used, the proxy pool on the first.
	for i, h := range crawlers[:cfg.crawlers] {
		services := []string{"scheduler", "fetcher", "parser"}
		if i == 0 {
			services = append(services, "proxypool")
		}
		for _, s := range services {
			c.startService(h, s, overlay)
		}
	}
	for _, s := range c.svcs {
		if err := c.waitReady(ctx, s, 90*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if c.store, err = chstore.Open(ctx, c.chc, zap.NewNop()); err != nil {
		t.Fatalf("open clickhouse: %v", err)
	}
	t.Cleanup(func() { _ = c.store.Close() })
	// Seeded only once every group has all its members: a member that
	// joins later takes partitions over, and the first owner's robots.txt
	// and host state may not have reached ClickHouse yet.
	names := make([]string, cfg.crawlers)
	for i, h := range crawlers[:cfg.crawlers] {
		names[i] = h.name
	}
	for _, service := range []string{"scheduler", "fetcher", "parser"} {
		if _, ok := c.stableAssignment(ctx, service, 30*time.Second, names...); !ok {
			t.Fatalf("the %s group did not settle on %v", service, names)
		}
	}
	t.Logf("crawl %s: web of %d hosts (%d pages), %d crawler host(s), ready in %s",
		c.id, len(c.ready.Hosts), c.ready.Pages, cfg.crawlers, time.Since(start).Round(time.Millisecond))
	c.supervise()
	c.seed(ctx, overlay)
	return c
}

// supervise restarts a service that exits, as the guide's units do
// (Restart=always, RestartSec=2). Every restart is recorded (restarts);
// a crash loop fails check.
func (c *crawl) supervise() {
	// The supervisors live until stop or kill, after the test's context.
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.t.Context()))
	c.supCancel = cancel
	policy := supervise.Policy{Backoff: 2 * time.Second, MaxBackoff: 2 * time.Second, MaxRestarts: 10, Window: 2 * time.Minute}
	for _, s := range c.svcs {
		sup := supervise.NewSupervisor(s.proc, policy, func(ev supervise.Event) {
			c.t.Logf("supervisor: %s", ev)
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		})
		c.sups.Add(1)
		go func() {
			defer c.sups.Done()
			if err := sup.Run(ctx); err != nil {
				c.mu.Lock()
				if c.crashErr == nil {
					c.crashErr = err
				}
				c.mu.Unlock()
			}
		}()
	}
}

// stopSupervisors stops the supervisors and waits for them.
func (c *crawl) stopSupervisors() {
	if c.supCancel != nil {
		c.supCancel()
		c.sups.Wait()
		c.supCancel = nil
	}
}

// restarts returns the supervisors' restarts so far.
func (c *crawl) restarts() []supervise.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]supervise.Event(nil), c.events...)
}

// wiring returns the Kafka and ClickHouse configuration the guide's
// cluster.env gives a service, with overlay applied after it.
func (l *lab) wiring(overlay []string) (kafkaio.Config, chstore.Config, error) {
	env := map[string]string{}
	for k, v := range l.env["cluster"] {
		env[k] = v
	}
	for _, kv := range overlay {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var (
		kc  kafkaio.Config
		chc chstore.Config
	)
	fs := flag.NewFlagSet("wiring", flag.ContinueOnError)
	kc.RegisterFlags(fs)
	chc.RegisterFlags(fs)
	err := envflag.Parse(fs, nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return kc, chc, fmt.Errorf("deployments/bare/env/cluster.env: %w", err)
	}
	return kc, chc, nil
}

// serviceEnv is the environment of a service: the guide's cluster.env and
// <service>.env, then the lab's overlay (private targets allowed: the web
// is on 10.78/16; the crawl's topics and database), then the scenario's.
func (c *crawl) serviceEnv(h host, service string, overlay []string) []string {
	env := baseEnv()
	for _, file := range []string{"cluster", service} {
		vars := c.lab.env[file]
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+vars[k])
		}
	}
	env = append(env, "CRAWLER_ALLOW_PRIVATE=true", "CRAWLER_INSTANCE_ID="+service+"-"+h.name)
	env = append(env, overlay...)
	if service != "seeder" {
		env = append(env, c.cfg.env...)
	}
	if service == "fetcher" {
		env = append(env, c.cfg.fetcherEnv...)
	}
	return env
}

// lookup returns the last value of key in env.
func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func (c *crawl) startService(h host, service string, overlay []string) {
	c.t.Helper()
	env := c.serviceEnv(h, service, overlay)
	_, port, err := net.SplitHostPort(lookup(env, "CRAWLER_ADMIN_ADDR"))
	if err != nil || port == "0" {
		c.t.Fatalf("deployments/bare/env/%s.env: CRAWLER_ADMIN_ADDR needs a fixed port (%v)", service, err)
	}
	s := &svc{host: h, service: service, admin: net.JoinHostPort(h.addr, port),
		logFile: filepath.Join(c.dir, "logs", h.name+"-"+service+".log")}
	s.proc, err = startIn(h, service, s.logFile, env, c.lab.bins[service])
	if err != nil {
		c.t.Fatal(err)
	}
	c.svcs = append(c.svcs, s)
}

// startWeb starts the web host's web and waits for its ready line.
func (c *crawl) startWeb(ctx context.Context) {
	c.t.Helper()
	w := c.cfg.web
	logFile := filepath.Join(c.dir, "logs", "web.log")
	var err error
	c.web, err = startIn(webHost, "websim", logFile, nil, c.lab.bins["websim"],
		"--private", "--trap-every", "-1", "--big-every", "-1", "--slow-every", "-1", "--first-addr", webFirst, "--hosts", fmt.Sprint(w.Hosts), "--articles", fmt.Sprint(w.Articles),
		"--min-links", fmt.Sprint(w.MinLinks), "--max-links", fmt.Sprint(w.MaxLinks),
		"--stats-addr", webHost.addr+":8080", "--script-share", fmt.Sprint(w.ScriptShare))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = c.web.Stop(5 * time.Second) })
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !readyLine(logFile, &c.ready) {
		select {
		case <-c.web.Done():
			c.t.Fatalf("web host exited: %v\n%s", c.web.ExitError(), c.web.LogTail(20))
		case <-ctx.Done():
			c.t.Fatalf("web host not ready: %v", ctx.Err())
		case <-tick.C:
		}
	}
}

// strict reports whether TRAWL_MULTIHOST_STRICT asks for no repeated
// request and no politeness violation at all, where the default run of the
// scale-out and lossy-link crawls tolerates two: a request now and then
// reaches the web twice within a millisecond with one fetch_log row
// (docs/operations.md, "Bare hosts").
func strict() bool { return os.Getenv("TRAWL_MULTIHOST_STRICT") != "" }

// repeatBound is the most requests a fault may cost the web again: 0.5 %
// of the crawl's requests (issue 34's bound for any fault).
func repeatBound(o outcome) int { return o.Stats.Requests / 200 }

// tolerate returns n, or 0 in strict mode.
func tolerate(n int) int {
	if strict() {
		return 0
	}
	return n
}

// readyLine reads the web host's ready line (websim.Ready) from its log.
func readyLine(logFile string, r *websim.Ready) bool {
	b, err := os.ReadFile(logFile)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), r) == nil {
			return true
		}
	}
	return false
}

// webHostNames returns the web's host addresses without the port.
func (c *crawl) webHostNames() []string {
	out := make([]string, 0, len(c.ready.Hosts))
	for _, h := range c.ready.Hosts {
		name, _, _ := net.SplitHostPort(h)
		out = append(out, name)
	}
	return out
}

// seed runs the seeder once on the first crawler host with the crawl's
// spec (scope: the web's hosts) and every host's index page.
func (c *crawl) seed(ctx context.Context, overlay []string) {
	c.t.Helper()
	spec, err := json.Marshal(map[string]any{
		"crawl_id": c.id, "name": c.t.Name(),
		"scope":  map[string]any{"allow_hosts": c.webHostNames()},
		"limits": map[string]any{"max_depth": 6},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	specFile := filepath.Join(c.dir, "spec.json")
	seedsFile := filepath.Join(c.dir, "seeds.txt")
	if err := os.WriteFile(specFile, spec, 0o644); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(seedsFile, []byte(strings.Join(c.ready.Seeds, "\n")+"\n"), 0o644); err != nil {
		c.t.Fatal(err)
	}
	proc, err := startIn(crawlers[0], "seeder", filepath.Join(c.dir, "logs", "c1-seeder.log"),
		c.serviceEnv(crawlers[0], "seeder", overlay), c.lab.bins["seeder"],
		"--crawl-id", c.id, "--spec", specFile, "--seeds-file", seedsFile)
	if err != nil {
		c.t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := proc.Wait(wctx); err != nil {
		_ = proc.Kill()
		c.t.Fatalf("seeder: %v\n%s", err, proc.LogTail(20))
	}
	c.seeded = time.Now()
}

// waitReady polls a service's /readyz over the bridge until it answers 200.
func (c *crawl) waitReady(ctx context.Context, s *svc, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		code, _ := readyz(ctx, s)
		if code == http.StatusOK {
			return nil
		}
		select {
		case <-s.proc.Done():
			return fmt.Errorf("%s exited before it was ready (%w):\n%s", s.name(), s.proc.ExitError(), s.proc.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last /readyz %d):\n%s", s.name(), ctx.Err(), code, s.proc.LogTail(20))
		case <-tick.C:
		}
	}
}

// readyz returns the status and body of a service's /readyz (0 when it
// does not answer).
func readyz(ctx context.Context, s *svc) (int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.admin+"/readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b) // a short body; a cut one is still an answer
	return resp.StatusCode, strings.TrimSpace(b.String())
}

// check reports a service that exited without being asked to (its
// supervisor restarts it, as the guide's units would, but no scenario
// expects an exit).
func (c *crawl) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashErr != nil {
		return c.crashErr
	}
	if len(c.events) > 0 {
		ev := c.events[0]
		return fmt.Errorf("%s; log tail:\n%s", ev, c.logTailOf(ev.Name, 30))
	}
	if c.supCancel != nil {
		return nil // the supervisors restart what exits
	}
	for _, s := range c.svcs {
		if !c.stopping[s] && !s.proc.Running() {
			return fmt.Errorf("%s exited unexpectedly (%w):\n%s", s.name(), s.proc.ExitError(), s.proc.LogTail(30))
		}
	}
	return nil
}

// drain waits until the crawl is drained (every group's lag and the
// frontier empty for a few polls) and the web has served every page.
func (c *crawl) drain(ctx context.Context, timeout time.Duration) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m := progress.NewMonitor(c.kafka, c.store.Conn(), c.id)
	defer m.Close()
	s, err := m.WaitDrained(ctx, progress.DrainConfig{
		Interval: 500 * time.Millisecond, StablePolls: 4, Check: c.check, IdleTimeout: 20 * time.Second,
	})
	if err != nil {
		c.t.Fatalf("crawl did not drain: %v (last: %s; web: %+v)", err, s.Line(), c.webStats(ctx))
	}
}

// stop stops every service with SIGTERM, all at once, and requires clean
// exits.
func (c *crawl) stop() {
	c.t.Helper()
	c.stopSupervisors()
	if err := c.check(); err != nil {
		c.t.Error(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(c.svcs))
	c.mu.Lock()
	for _, s := range c.svcs {
		c.stopping[s] = true
	}
	c.mu.Unlock()
	for i, s := range c.svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.proc.Stop(20 * time.Second); err != nil {
				errs[i] = fmt.Errorf("%s: %w\n%s", s.name(), err, s.proc.LogTail(10))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Errorf("services did not stop cleanly: %v", err)
	}
}

// kill kills whatever still runs (cleanup).
func (c *crawl) kill() {
	c.stopSupervisors()
	c.mu.Lock()
	for _, s := range c.svcs {
		c.stopping[s] = true
	}
	c.mu.Unlock()
	for _, s := range c.svcs {
		_ = s.proc.Kill() // cleanup: exit status no longer matters
	}
}

// logTailOf returns the log tail of the service named like a process
// ("c1/scheduler").
func (c *crawl) logTailOf(name string, n int) string {
	for _, s := range c.svcs {
		if s.proc.Name() == name {
			return s.proc.LogTail(n)
		}
	}
	return ""
}

func (c *crawl) logTails(n int) string {
	var b strings.Builder
	for _, s := range c.svcs {
		fmt.Fprintf(&b, "==== %s (%s)\n%s\n", s.name(), s.logFile, supervise.Tail(s.logFile, n))
	}
	return b.String()
}

// service returns the crawl's service on host h.
func (c *crawl) service(h host, service string) *svc {
	for _, s := range c.svcs {
		if s.host == h && s.service == service {
			return s
		}
	}
	c.t.Fatalf("no %s on %s", service, h.name)
	return nil
}

// getJSON reads a JSON answer of the web host.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func (c *crawl) webStats(ctx context.Context) websim.Stats {
	var s websim.Stats
	if err := getJSON(ctx, c.ready.Stats, &s); err != nil {
		c.t.Fatalf("web stats: %v", err)
	}
	return s
}

func (c *crawl) webResources(ctx context.Context) []websim.Resource {
	var r []websim.Resource
	if err := getJSON(ctx, strings.TrimSuffix(c.ready.Stats, "/stats")+"/resources", &r); err != nil {
		c.t.Fatalf("web resources: %v", err)
	}
	return r
}

// outcome is what the web saw of a crawl and what the crawl left behind.
type outcome struct {
	Stats      websim.Stats
	Violations int           // consecutive requests of one host closer than the delay
	MinGap     time.Duration // the closest two, and where
	MinGapHost string
	Close      []closePair // the violations, in time order
	Repeated   []string    // resources requested again after a final answer, with their requests' times
	Missing    int         // content pages the web never served
	Unfetched  []string    // URLs admitted (url_seen) without a fetch_log row
	Window     time.Duration
	ReqPerS    float64 // requests per second over the content window
}

// closePair is two consecutive requests of one host closer than the
// delay: the resources, when the web sent the first one's answer (the
// start of its last write) and when the second request arrived.
type closePair struct {
	Host     string
	A, B     string
	AtA, AtB time.Time
}

func (p closePair) String(ref time.Time) string {
	return fmt.Sprintf("host %s: %s answered at %+.3fs, %s arrived at %+.3fs (%s apart)", p.Host, p.A, p.AtA.Sub(ref).Seconds(),
		p.B, p.AtB.Sub(ref).Seconds(), p.AtB.Sub(p.AtA).Round(time.Millisecond))
}

// outcome reads what the web saw and what ClickHouse holds.
func (c *crawl) outcome(ctx context.Context) outcome {
	c.t.Helper()
	o := outcome{Stats: c.webStats(ctx)}
	type hit struct {
		id string
		websim.Hit
	}
	byHost := map[string][]hit{}
	for _, r := range c.webResources(ctx) {
		h, _, _ := strings.Cut(r.ID, " ")
		final, repeated := false, false
		for _, x := range r.Hits {
			byHost[h] = append(byHost[h], hit{r.ID, x})
			repeated = repeated || final
			final = final || (x.Status > 0 && x.Status < 500)
		}
		if repeated {
			var times []string
			for _, y := range r.Hits {
				times = append(times, fmt.Sprintf("%s/%d", y.At.Format("15:04:05.000000"), y.Status))
			}
			o.Repeated = append(o.Repeated, r.ID+" "+strings.Join(times, " "))
		}
	}
	o.MinGap = time.Duration(1 << 62)
	for h, hs := range byHost {
		slices.SortFunc(hs, func(a, b hit) int { return a.Arrived.Compare(b.Arrived) })
		for i := 1; i < len(hs); i++ {
			g := websim.Gap(hs[i-1].Hit, hs[i].Hit)
			if g < labDelay-jitter {
				o.Violations++
				o.Close = append(o.Close, closePair{Host: h, A: hs[i-1].id, B: hs[i].id, AtA: hs[i-1].Sent, AtB: hs[i].Arrived})
			}
			if g < o.MinGap {
				o.MinGap, o.MinGapHost = g, h
			}
		}
	}
	slices.SortFunc(o.Close, func(a, b closePair) int { return a.AtB.Compare(b.AtB) })
	o.Missing = o.Stats.PagesTotal - o.Stats.Pages
	o.Window = o.Stats.LastPage.Sub(o.Stats.First)
	if o.Window > 0 {
		o.ReqPerS = float64(o.Stats.PageRequests) / o.Window.Seconds()
	}
	rows, err := c.store.Conn().Query(ctx, `SELECT url FROM url_seen FINAL WHERE crawl_id = ?
		AND fp NOT IN (SELECT url_fp FROM fetch_log WHERE crawl_id = ?) ORDER BY url`, c.id, c.id)
	if err != nil {
		c.t.Fatalf("query url_seen: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			c.t.Fatalf("scan url_seen: %v", err)
		}
		o.Unfetched = append(o.Unfetched, u)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatalf("read url_seen: %v", err)
	}
	return o
}

// checkComplete fails the test unless every content page was served and
// every admitted URL fetched, and unless the politeness violations and the
// extra requests (duplicates, robots.txt again) are at most the given
// bounds.
func (c *crawl) checkComplete(o outcome, maxExtra, maxViolations int) {
	c.t.Helper()
	if o.Missing > 0 {
		c.t.Errorf("%d of %d content pages never requested", o.Missing, o.Stats.PagesTotal)
	}
	if len(o.Unfetched) > 0 {
		c.t.Errorf("%d admitted URLs without a fetch: %v", len(o.Unfetched), o.Unfetched[:min(10, len(o.Unfetched))])
	}
	if o.Violations > maxViolations {
		c.t.Errorf("%d politeness violations at the web host, want at most %d (closest: %s apart on host %s, delay %s)",
			o.Violations, maxViolations, o.MinGap, o.MinGapHost, labDelay)
		for i, p := range o.Close {
			if i == 20 {
				break
			}
			c.t.Logf("too close (times from the seeding): partition %d, %s", c.partitionOfHost(p.Host), p.String(c.seeded))
		}
	}
	if extra := o.Stats.Duplicates + o.Stats.RobotsMore; extra > maxExtra {
		c.t.Errorf("%d extra requests (%d duplicates; %d robots.txt again), want at most %d; repeated: %v",
			extra, o.Stats.Duplicates, o.Stats.RobotsMore, maxExtra, o.Repeated[:min(10, len(o.Repeated))])
	}
	if o.Stats.Offsite > 0 || o.Stats.Disallowed > 0 {
		c.t.Errorf("%d off-site and %d disallowed requests", o.Stats.Offsite, o.Stats.Disallowed)
	}
}

// assignment is one "partitions assigned" line of a fetcher's log.
type assignment struct {
	Generation int
	Partitions []int
}

// assignments reads the assignments of a service's consumer group (the
// scheduler's, fetcher's or parser's) from its log, in order.
func (c *crawl) assignments(s *svc) []assignment {
	c.t.Helper()
	f, err := os.Open(s.logFile)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	group := c.kafka.GroupFor(s.service)
	var out []assignment
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Msg        string `json:"msg"`
			Group      string `json:"group"`
			Generation int    `json:"generation"`
			Partitions []int  `json:"partitions"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "partitions assigned" || line.Group != group {
			continue
		}
		out = append(out, assignment{Generation: line.Generation, Partitions: line.Partitions})
	}
	return out
}

// owned returns the latest assignment of each instance of a service, by
// host.
func (c *crawl) owned(service string) map[string][]int {
	out := map[string][]int{}
	for _, s := range c.svcs {
		if s.service != service {
			continue
		}
		if a := c.assignments(s); len(a) > 0 {
			out[s.host.name] = a[len(a)-1].Partitions
		} else {
			out[s.host.name] = nil
		}
	}
	return out
}

// logLines returns the lines of a service's log that contain every one of
// the strings.
func logLines(s *svc, all ...string) []string {
	b, err := os.ReadFile(s.logFile)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, w := range all {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			out = append(out, line)
		}
	}
	return out
}

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// waitPages waits until the web served n content pages.
func (c *crawl) waitPages(ctx context.Context, n int) {
	c.t.Helper()
	if !waitFor(ctx, 3*time.Minute, func() bool { return c.check() == nil && c.webStats(ctx).Pages >= n }) {
		if err := c.check(); err != nil {
			c.t.Fatal(err)
		}
		c.t.Fatalf("the web never served %d pages (%d)", n, c.webStats(ctx).Pages)
	}
}
