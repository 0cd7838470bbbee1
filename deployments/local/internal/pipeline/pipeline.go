// Package pipeline runs a whole crawl pipeline on one machine: an embedded
// broker (unless one is given), the ClickHouse schema, and the five
// services as separate processes with their admin servers on known loopback
// ports. The launcher (cmd/crawl) and the end-to-end tests both drive it.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Services are the service binaries, in start order of the long-running
// ones (the seeder is run last, once).
var Services = []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"}

// Config configures a pipeline.
type Config struct {
	DataDir        string              // logs in DataDir/logs, broker log in DataDir/kafka
	Bins           map[string]string   // service -> binary (see supervise.Build)
	BrokerAddr     string              // comma-separated brokers of an existing Kafka; "" starts an embedded broker
	ClickHouseAddr string              // native host:port (comma-separated for several)
	Database       string              // ClickHouse database (default "crawler")
	Partitions     int                 // default 32
	TopicPrefix    string              // default "crawler."
	SessionTimeout time.Duration       // consumer session timeout (default 6s)
	Fetchers       int                 // fetcher processes (default 1)
	Delay          time.Duration       // per-host delay (always passed; 0 means 1ms, the fetcher's smallest)
	AllowPrivate   bool                // fetchers fetch, and the seeder reads sitemaps from, private addresses
	WarcDir        string              // when set, fetcher i archives every fetch as WARC in WarcDir/fetcher-i (its --warc-dir)
	Render         string              // when set, the fetchers' --render (never, auto, always)
	LogLevel       string              // default "info"
	Args           map[string][]string // extra arguments per service
	Echo           io.Writer           // optional: service output is copied here
	StopGrace      time.Duration       // SIGTERM to SIGKILL (default 30s)
	// ProfileDir, when set, has every service process write a CPU profile
	// of its run and an allocation profile at its exit into
	// ProfileDir/<process name> (the services' --profile-dir).
	ProfileDir string
	// MemoryLimits are the Go runtime's soft memory limits by service
	// (the services' --memory-limit); nil takes DefaultMemoryLimits, an
	// empty map sets none.
	MemoryLimits map[string]int64

	// AutoRestart puts every long-running service under a
	// supervise.Supervisor: one that exits without being asked to is
	// restarted after a back-off (Restart, zero fields default), each
	// exit reported to OnRestart, and a crash loop is what Check reports.
	// Off, Check reports any such exit at once: tests that SIGKILL
	// services and restart them themselves (Pipeline.Restart) keep it off,
	// so that their kill/restart timing is their own and any other exit
	// fails them.
	AutoRestart bool
	Restart     supervise.Policy
	// OnRestart, optional, is called with every exit a supervisor
	// handles, from the supervisor's goroutine.
	OnRestart func(supervise.Event)
	// Weather, optional, says why a dependency the caller runs is down
	// ("" when none is): a service's exit meanwhile is not counted toward
	// its crash loop (supervise.Supervisor.Excuse). The launcher passes
	// its private ClickHouse's (chboot.Server.Weather).
	Weather func() string

	// ClickHouseCluster, when set, runs the schema and every service in
	// ClickHouse cluster mode on that cluster (the services'
	// --clickhouse-cluster; see libs/chstore/cluster.go).
	ClickHouseCluster string

	// Security is the TLS and authentication of an existing Kafka
	// (BrokerAddr) and ClickHouse, for the pipeline's connections and
	// every service's (zero: plain text, ClickHouse user default).
	Security Security
}

func (c *Config) setDefaults() {
	if c.Database == "" {
		c.Database = chstore.DefaultDatabase
	}
	if c.Partitions == 0 {
		c.Partitions = kafkaio.DefaultPartitions
	}
	if c.TopicPrefix == "" {
		c.TopicPrefix = "crawler."
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = 6 * time.Second
	}
	if c.Fetchers == 0 {
		c.Fetchers = 1
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.StopGrace == 0 {
		c.StopGrace = 30 * time.Second
	}
}

// DefaultMemoryLimits are the soft memory limits of a local crawl's
// services: each a little above what the service holds live on the bench
// web (the Go collector otherwise lets the heap grow to twice the live
// data before it runs), so that a crawl fits a laptop. A limit below the
// live heap makes the collector run without pause: on the bench web a
// 64 MiB parser spent three times its CPU in it, and at 144 MiB a tenth of
// its CPU went to returning memory to the system and faulting it back.
// The fetcher holds 35-40 MiB live and 6-12 MiB of goroutine stacks in a
// crawl of 2 000 hosts (the requests it may hold, about 500 bytes each,
// the connections of the hosts in flight, pages on their way to the
// broker): its limit of 56 MiB, set on a crawl of 200 hosts where it held
// 20, sat below that, and the collector ran without pause (57% of its CPU,
// twice the cost per page). At 96 MiB the collector took 7-9% of the
// fetcher's CPU at 15 000 and 150 000 requests, but a crawl of 20 000
// hosts keeps 2 100-2 300 of them in flight, each with its kept
// connection (two goroutines, their stacks and buffers, about 20 KiB):
// 57 MiB of heap and 22 MiB of stacks, and the collector ran 712 times
// in six minutes, 43% of the fetcher's CPU. 160 MiB is above that
// bound: the requests a fetcher may hold and one connection for each of
// httpfetch.DefaultMaxIdleConns hosts.
//
// The scheduler holds the rows of the discovered URLs in flight until
// their insert (--max-in-flight per partition): 32 MiB live at 8 × 1 000
// on a crawl of 20 000 hosts, where its limit of 48 MiB made it collect
// 730 times in seven minutes.
//
// The parser's recent-links table grows to 32 MiB on a crawl of a million
// URLs or more (--recent-links); 176 MiB, set when it stopped at 8 MiB,
// was 12 MiB above the parser's peak on a crawl of 1.5 M pages. Its
// documents writer holds up to 32 MiB of documents (inserts of 16 MiB
// instead of 500 documents, about 4 MiB), and at 240 MiB its peak on a
// crawl of 1.5 M pages was 248 MiB (the collector 3.7 % of its CPU):
// 208 MiB became 256.
var DefaultMemoryLimits = map[string]int64{
	"fetcher":   160 << 20,
	"parser":    256 << 20,
	"scheduler": 96 << 20,
	"proxypool": 24 << 20,
	"seeder":    32 << 20,
}

// Pipeline is a running pipeline. Its methods are meant for one
// goroutine (the launcher's or a test's); the supervisors it runs with
// AutoRestart are its own goroutines.
type Pipeline struct {
	cfg      Config
	broker   *kafkaembed.Broker
	Kafka    kafkaio.Config
	Store    *chstore.Store
	procs    []*supervise.Process          // long-running services, start order
	seeder   *supervise.Process            // the last seeder run
	admin    map[*supervise.Process]string // admin address file (CommonEnv)
	stopping map[*supervise.Process]bool

	// Supervisors (AutoRestart): each runs in its own goroutine until its
	// cancel is called; sups counts them; crashErr is the first crash loop.
	supCancels []context.CancelFunc
	sups       sync.WaitGroup
	mu         sync.Mutex
	crashErr   error
}

func newPipeline(cfg Config) *Pipeline {
	cfg.setDefaults()
	return &Pipeline{cfg: cfg, admin: map[*supervise.Process]string{}, stopping: map[*supervise.Process]bool{}}
}

// Start starts the broker (when needed), creates the topics, migrates the
// ClickHouse schema and starts scheduler, fetchers, parser and proxypool,
// waiting until each reports ready. On error everything started is stopped.
func Start(ctx context.Context, cfg Config) (_ *Pipeline, err error) {
	for _, s := range Services {
		if cfg.Bins[s] == "" {
			return nil, fmt.Errorf("start pipeline: no binary for %s", s)
		}
	}
	if err := cfg.Restart.Validate(); err != nil {
		return nil, fmt.Errorf("start pipeline: %w", err)
	}
	sec, err := cfg.Security.Absolute()
	if err != nil {
		return nil, fmt.Errorf("start pipeline: %w", err)
	}
	cfg.Security = sec
	p := newPipeline(cfg)
	cfg = p.cfg
	defer func() {
		if err != nil {
			p.Kill()
		}
	}()
	addr := cfg.BrokerAddr
	if addr == "" {
		b, err := kafkaembed.Start(ctx, filepath.Join(cfg.DataDir, "kafka"), "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p.broker = b
		addr = b.Addr()
	}
	p.Kafka = kafkaio.Config{
		Brokers:          splitList(addr),
		Partitions:       cfg.Partitions,
		TopicPrefix:      cfg.TopicPrefix,
		SessionTimeout:   cfg.SessionTimeout,
		RebalanceTimeout: cfg.SessionTimeout,
		MaxMessageBytes:  16 << 20,
		TLS:              cfg.Security.Kafka.TLS,
		SASL:             cfg.Security.Kafka.SASL,
	}
	if err := kafkaio.EnsureTopics(ctx, p.Kafka); err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	chc := cfg.Security.ClickHouseConfig(cfg.ClickHouseAddr, cfg.Database)
	chc.Cluster = cfg.ClickHouseCluster
	p.Store, err = chstore.Open(ctx, chc, zap.NewNop())
	if err != nil {
		return nil, err
	}
	if err := p.Store.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate clickhouse: %w", err)
	}
	if _, err := p.StartService(ctx, "scheduler", "scheduler", nil); err != nil {
		return nil, err
	}
	for i := range cfg.Fetchers {
		if _, err := p.StartService(ctx, "fetcher", fmt.Sprintf("fetcher-%d", i), p.fetcherArgs(i)); err != nil {
			return nil, err
		}
	}
	if _, err := p.StartService(ctx, "parser", "parser", p.parserArgs()); err != nil {
		return nil, err
	}
	if _, err := p.StartService(ctx, "proxypool", "proxypool", nil); err != nil {
		return nil, err
	}
	return p, nil
}

// parserArgs are the parser's own flags: PDFium's compiled module is kept
// in DataDir/pdfium, so that a restarted parser's first PDF (and the next
// crawl's) costs about 0.1 s instead of 2-10 s of compilation.
func (p *Pipeline) parserArgs() []string {
	if p.cfg.DataDir == "" {
		return nil
	}
	return []string{"--pdf-cache-dir", filepath.Join(p.cfg.DataDir, "pdfium")}
}

// FetcherDelay is the fetchers' --delay for a crawl's delay d: the
// fetcher requires a positive delay, so "no delay" (benchmarks) becomes
// the smallest one that still keeps requests to a host sequential.
func FetcherDelay(d time.Duration) time.Duration { return max(d, time.Millisecond) }

// FetcherDelay is the fetchers' --delay: FetcherDelay(Config.Delay).
func (p *Pipeline) FetcherDelay() time.Duration { return FetcherDelay(p.cfg.Delay) }

func (p *Pipeline) fetcherArgs(i int) []string {
	a := []string{"--instance-id", fmt.Sprintf("fetcher-%d", i), "--allow-private=" + strconv.FormatBool(p.cfg.AllowPrivate)}
	a = append(a, "--delay", p.FetcherDelay().String())
	if p.cfg.WarcDir != "" { // a directory per fetcher: each locks its own
		a = append(a, "--warc-dir", filepath.Join(p.cfg.WarcDir, fmt.Sprintf("fetcher-%d", i)))
	}
	if p.cfg.Render != "" {
		a = append(a, "--render", p.cfg.Render)
	}
	return a
}

// CommonEnv returns the environment of the service process name: this
// process's environment plus the settings every service shares as
// CRAWLER_* variables. A service ignores the variables of flags it does
// not define (the proxypool has no ClickHouse flags, for one), which
// command-line flags would not allow.
//
// The user's CRAWLER_* variables pass through (CRAWLER_USER_AGENT reaches
// the fetchers), except where the pipeline decides: the wiring (brokers,
// partitions, topic prefix, consumer timeouts, ClickHouse address and
// database, the Kafka and ClickHouse security settings, admin address,
// profile directory) is always the pipeline's, since a service that
// disagreed with the others or with the launcher about them would break
// the crawl or its progress display. The tuning the pipeline only
// defaults (log level and format, memory limit, GC target) yields to a
// CRAWLER_* variable the user set.
//
// A service's admin server listens on a loopback port the kernel chooses;
// when adminFile is not empty the service writes its pid and that address
// there (telemetry.WriteAddrFile). A port the launcher picked free could
// be taken by another process, or by an outgoing connection's local port,
// before the service binds it.
func (p *Pipeline) CommonEnv(name, adminFile string) []string {
	env, user := userEnv()
	owned := []string{
		"CRAWLER_KAFKA_BROKERS=" + strings.Join(p.Kafka.Brokers, ","),
		"CRAWLER_KAFKA_PARTITIONS=" + strconv.Itoa(p.Kafka.Partitions),
		"CRAWLER_KAFKA_TOPIC_PREFIX=" + p.Kafka.TopicPrefix,
		"CRAWLER_KAFKA_SESSION_TIMEOUT=" + p.Kafka.SessionTimeout.String(),
		"CRAWLER_KAFKA_REBALANCE_TIMEOUT=" + p.Kafka.RebalanceTimeout.String(),
		"CRAWLER_CLICKHOUSE_ADDR=" + p.cfg.ClickHouseAddr,
		"CRAWLER_CLICKHOUSE_DATABASE=" + p.cfg.Database,
		"CRAWLER_CLICKHOUSE_CLUSTER=" + p.cfg.ClickHouseCluster,
		"CRAWLER_ADMIN_ADDR=127.0.0.1:0",
		"CRAWLER_ADMIN_ADDR_FILE=" + adminFile,
		"CRAWLER_PROFILE_DIR=",
	}
	if p.cfg.ProfileDir != "" {
		owned[len(owned)-1] += filepath.Join(p.cfg.ProfileDir, name)
	}
	owned = append(owned, p.cfg.Security.Env()...)
	defaults := []string{
		"CRAWLER_LOG_LEVEL=" + p.cfg.LogLevel,
		"CRAWLER_LOG_FORMAT=json",
	}
	limits := p.cfg.MemoryLimits
	if limits == nil {
		limits = DefaultMemoryLimits
	}
	if l := limits[serviceOf(name)]; l > 0 {
		defaults = append(defaults, "CRAWLER_MEMORY_LIMIT="+strconv.FormatInt(l, 10))
	}
	for _, kv := range owned {
		k, _, _ := strings.Cut(kv, "=")
		delete(user, k)
	}
	for _, kv := range defaults {
		if k, _, _ := strings.Cut(kv, "="); user[k] == "" {
			delete(user, k)
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(user)) {
		env = append(env, k+"="+user[k])
	}
	return append(env, owned...)
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// serviceOf is the service of a process name ("fetcher-1" -> "fetcher").
func serviceOf(name string) string {
	for _, s := range Services {
		if name == s || strings.HasPrefix(name, s+"-") {
			return s
		}
	}
	return name
}

// LogFile returns the log path of a process name.
func (p *Pipeline) LogFile(name string) string {
	return filepath.Join(p.cfg.DataDir, "logs", name+".log")
}

// StartService starts one long-running service process (as name) and waits
// until its /readyz answers 200; with AutoRestart it is supervised from
// then on.
func (p *Pipeline) StartService(ctx context.Context, service, name string, extra []string) (*supervise.Process, error) {
	return p.StartServiceEnv(ctx, service, name, extra, nil)
}

// StartServiceEnv is StartService with env (KEY=value) added to the
// process's environment: for secrets that must not show in its command
// line (the API token of seeder serve).
func (p *Pipeline) StartServiceEnv(ctx context.Context, service, name string, extra, env []string) (*supervise.Process, error) {
	admin := filepath.Join(p.cfg.DataDir, "run", name+".admin")
	if err := os.MkdirAll(filepath.Dir(admin), 0o755); err != nil {
		return nil, fmt.Errorf("create the admin address directory: %w", err)
	}
	// A file left by an earlier launcher on this data directory names a
	// process that is gone (whose pid a new one may have taken).
	if err := os.Remove(admin); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("remove the old admin address file: %w", err)
	}
	args := append(extra, p.cfg.Args[service]...)
	proc, err := supervise.Start(supervise.Spec{
		Name: name, Path: p.cfg.Bins[service], Args: args, Env: append(p.CommonEnv(name, admin), env...),
		LogFile: p.LogFile(name), Echo: p.cfg.Echo,
	})
	if err != nil {
		return nil, err
	}
	p.procs = append(p.procs, proc)
	p.admin[proc] = admin
	if err := p.WaitReady(ctx, proc); err != nil {
		return nil, err
	}
	if p.cfg.AutoRestart {
		p.supervise(proc)
	}
	return proc, nil
}

// supervise starts proc's supervisor; stopSupervisors ends it.
func (p *Pipeline) supervise(proc *supervise.Process) {
	sup := supervise.NewSupervisor(proc, p.cfg.Restart, p.cfg.OnRestart)
	if p.cfg.Weather != nil {
		sup.Excuse(p.cfg.Weather)
	}
	// Not the caller's ctx: a supervisor lives as long as the pipeline,
	// until Stop or Kill.
	ctx, cancel := context.WithCancel(context.Background())
	p.supCancels = append(p.supCancels, cancel)
	p.sups.Add(1)
	go func() {
		defer p.sups.Done()
		if err := sup.Run(ctx); err != nil {
			p.mu.Lock()
			if p.crashErr == nil {
				p.crashErr = err
			}
			p.mu.Unlock()
		}
	}()
}

// stopSupervisors stops every supervisor and waits for them, so that the
// services can be stopped without being restarted.
func (p *Pipeline) stopSupervisors() {
	for _, cancel := range p.supCancels {
		cancel()
	}
	p.supCancels = nil
	p.sups.Wait()
}

// WaitReady polls the process's /readyz until it answers 200 (bounded by
// ctx and 90s), failing early if the process exits.
func (p *Pipeline) WaitReady(ctx context.Context, proc *supervise.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if addr := p.AdminAddr(proc); addr != "" {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
			if err != nil {
				return fmt.Errorf("build readyz request: %w", err)
			}
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("%s exited before it was ready (%w); log tail:\n%s", proc.Name(), proc.ExitError(), proc.LogTail(30))
		case <-ctx.Done():
			return fmt.Errorf("wait for %s to be ready: %w; log tail:\n%s", proc.Name(), ctx.Err(), proc.LogTail(30))
		case <-t.C:
		}
	}
}

// Restart restarts a process that exited (for example after Kill) with the
// same arguments and waits until it is ready. With AutoRestart, a process
// its supervisor restarted first is only waited for.
func (p *Pipeline) Restart(ctx context.Context, proc *supervise.Process) error {
	if err := proc.Restart(); err != nil && !(p.cfg.AutoRestart && errors.Is(err, supervise.ErrRunning)) {
		return err
	}
	return p.WaitReady(ctx, proc)
}

// Restarts returns per long-running process how many times it was
// restarted (by its supervisor or by Restart).
func (p *Pipeline) Restarts() map[string]int {
	out := make(map[string]int, len(p.procs))
	for _, proc := range p.procs {
		out[proc.Name()] = proc.Usage().Starts - 1
	}
	return out
}

// Process returns the long-running process with the given name
// ("scheduler", "fetcher-0", "parser", "proxypool"), or nil.
func (p *Pipeline) Process(name string) *supervise.Process {
	for _, proc := range p.procs {
		if proc.Name() == name {
			return proc
		}
	}
	return nil
}

// AdminAddr returns the admin server address of a long-running process's
// current run, as it wrote it once it listened; "" for one the pipeline
// did not start, or whose current run has not listened yet.
func (p *Pipeline) AdminAddr(proc *supervise.Process) string {
	file, ok := p.admin[proc]
	if !ok {
		return ""
	}
	pid, addr, err := telemetry.ReadAddrFile(file)
	if err != nil || pid != proc.Pid() {
		return ""
	}
	return addr
}

// Processes returns the long-running processes in start order.
func (p *Pipeline) Processes() []*supervise.Process {
	return append([]*supervise.Process(nil), p.procs...)
}

// SeedRun is one run of the seeder.
type SeedRun struct {
	CrawlID   string
	Seeds     []string // --seed
	SeedsFile string   // --seeds-file, when not empty
	// SpecFile, when not empty, is the crawl's request (the body of POST
	// /v1/crawls) for the seeder's --spec: it publishes the crawl's spec
	// to the control topic, which every service follows, before the seeds.
	SpecFile string
}

// Seed runs the seeder once and waits for it to exit. The returned process
// holds the exit status and log.
func (p *Pipeline) Seed(ctx context.Context, run SeedRun) (*supervise.Process, error) {
	args := []string{"--crawl-id", run.CrawlID, "--allow-private=" + strconv.FormatBool(p.cfg.AllowPrivate)}
	for _, s := range run.Seeds {
		args = append(args, "--seed", s)
	}
	if run.SeedsFile != "" {
		args = append(args, "--seeds-file", run.SeedsFile)
	}
	if run.SpecFile != "" {
		args = append(args, "--spec", run.SpecFile)
	}
	args = append(args, p.cfg.Args["seeder"]...)
	proc, err := supervise.Start(supervise.Spec{
		Name: "seeder", Path: p.cfg.Bins["seeder"], Args: args, Env: p.CommonEnv("seeder", ""),
		LogFile: p.LogFile("seeder"), Echo: p.cfg.Echo,
	})
	if err != nil {
		return nil, err
	}
	p.seeder = proc
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := proc.Wait(wctx); err != nil {
		_ = proc.Kill()
		return proc, fmt.Errorf("run seeder: %w; log tail:\n%s", err, proc.LogTail(30))
	}
	return proc, nil
}

// SetState runs `seeder state` once: the crawl's next spec revision, with
// state (running, paused or cancelled), on the control topic; every service
// obeys within seconds.
func (p *Pipeline) SetState(ctx context.Context, crawlID, state string) error {
	name := "seeder-state"
	proc, err := supervise.Start(supervise.Spec{
		Name: name, Path: p.cfg.Bins["seeder"], Args: []string{"state", "--crawl-id", crawlID, "--state", state},
		Env: p.CommonEnv(name, ""), LogFile: p.LogFile(name), Echo: p.cfg.Echo,
	})
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := proc.Wait(wctx); err != nil {
		_ = proc.Kill()
		return fmt.Errorf("set crawl %s %s: %w; log tail:\n%s", crawlID, state, err, proc.LogTail(20))
	}
	return nil
}

// Check reports a long-running process that exited without being asked
// to; with AutoRestart, only a crash loop (a *supervise.CrashLoopError with
// the service's log tail): a process that is down is being restarted.
func (p *Pipeline) Check() error {
	p.mu.Lock()
	err := p.crashErr
	p.mu.Unlock()
	if err != nil || p.cfg.AutoRestart {
		return err
	}
	for _, proc := range p.procs {
		if !p.stopping[proc] && !proc.Running() {
			return fmt.Errorf("%s exited unexpectedly (%w); log tail:\n%s", proc.Name(), proc.ExitError(), proc.LogTail(30))
		}
	}
	return nil
}

// Monitor returns a progress monitor of crawlID.
func (p *Pipeline) Monitor(crawlID string) *progress.Monitor {
	return progress.NewMonitor(p.Kafka, p.Store.Conn(), crawlID)
}

// Stop stops the supervisors, then the services in pipeline order
// (scheduler, fetchers, parser, proxypool) with SIGTERM, each within
// StopGrace. It returns every process that did not exit cleanly with code
// 0, except, with AutoRestart, one that was already down: its exit was
// reported (OnRestart, a crash loop through Check) when it happened. The
// store and broker stay open until Close.
func (p *Pipeline) Stop() error {
	p.stopSupervisors()
	var errs []error
	for _, proc := range p.procs {
		p.stopping[proc] = true
		if p.cfg.AutoRestart && !proc.Running() {
			continue
		}
		if err := proc.Stop(p.cfg.StopGrace); err != nil {
			errs = append(errs, fmt.Errorf("%w; log tail:\n%s", err, proc.LogTail(20)))
		}
	}
	return errors.Join(errs...)
}

// Close closes the ClickHouse connection and the embedded broker; call it
// after Stop.
func (p *Pipeline) Close() { p.closeInfra() }

// Kill kills every service at once and closes the broker (cleanup after a
// failure).
func (p *Pipeline) Kill() {
	p.stopSupervisors()
	for _, proc := range p.procs {
		p.stopping[proc] = true
		_ = proc.Kill()
	}
	p.closeInfra()
}

func (p *Pipeline) closeInfra() {
	if p.Store != nil {
		_ = p.Store.Close()
		p.Store = nil
	}
	if p.broker != nil {
		p.broker.Close()
		p.broker = nil
	}
}

// Usage returns per process name the CPU time and peak memory used (after
// the processes exited).
func (p *Pipeline) Usage() map[string]supervise.Usage {
	out := make(map[string]supervise.Usage, len(p.procs)+1)
	for _, proc := range p.procs {
		out[proc.Name()] = proc.Usage()
	}
	if p.seeder != nil {
		out[p.seeder.Name()] = p.seeder.Usage()
	}
	return out
}

// LogTails returns the last n lines of every process log, for test
// failures.
func (p *Pipeline) LogTails(n int) string {
	var b strings.Builder
	names := []string{"seeder"}
	for _, proc := range p.procs {
		names = append(names, proc.Name())
	}
	for _, name := range names {
		fmt.Fprintf(&b, "==== %s (%s)\n%s\n", name, p.LogFile(name), supervise.Tail(p.LogFile(name), n))
	}
	return b.String()
}
