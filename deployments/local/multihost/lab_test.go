//go:build linux && (amd64 || arm64)

// Package multihost_test runs trawl on several "machines" made of Linux
// network namespaces on one box (issue 30): a store host (the development
// broker as a process of its own and Debian's clickhouse-server), three
// crawler hosts (scheduler, fetcher and parser each; proxypool and the
// seeder on the first) and a web host serving the generated web
// (internal/websim) on hundreds of addresses of its own. The hosts are
// joined by veth pairs to one bridge and reach each other only over it, so
// a host can be cut off (its veth down), slowed or made lossy (tc netem)
// while the others go on. Every service is configured by the environment
// files of the bare-host guide (deployments/bare/env, docs/operations.md
// "Bare hosts"), plus what a scenario changes.
//
// The tests need root, iproute2 (ip, tc), nsenter and clickhouse-server;
// without them they skip saying why. Names start with "tmh" and addresses
// are in 10.77.0.0/16 (hosts) and 10.78.0.0/16 (the web); leftovers of a
// crashed run are removed before a run, and a lock file keeps two runs
// apart.
package multihost_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
)

// The lab's names and addresses.
const (
	namePrefix = "tmh" // namespaces tmh-<host>, veths tmh-<host>, bridge tmh-br
	bridgeName = namePrefix + "-br"
	rootAddr   = "10.77.0.1"    // the bridge's address: where the test itself stands
	hostNet    = "10.77.0.0/16" // the hosts' network
	webNet     = "10.78.0.0/16" // the web's hosts: local addresses of the web host
	webFirst   = "10.78.0.1"    // host 0 of the web
	lockFile   = "/run/lock/trawl-multihost.lock"
)

// host is one namespace.
type host struct {
	name string // store, c1, c2, c3, web
	addr string
}

func (h host) ns() string   { return namePrefix + "-" + h.name }
func (h host) veth() string { return namePrefix + "-" + h.name } // the bridge side; eth0 inside
func (h host) nsPath() string {
	return "/run/netns/" + h.ns()
}

var (
	storeHost = host{"store", "10.77.0.2"}
	crawlers  = []host{{"c1", "10.77.0.11"}, {"c2", "10.77.0.12"}, {"c3", "10.77.0.13"}}
	webHost   = host{"web", "10.77.0.20"}
	allHosts  = append(append([]host{storeHost}, crawlers...), webHost)
)

// The store host's services.
var (
	brokerAddr = storeHost.addr + ":9092"
	chAddr     = storeHost.addr + ":9000"
)

// lab is the network and the store host, set up once for the package's
// tests (the first test that needs it) and torn down by TestMain.
type lab struct {
	dir    string
	repo   string
	bins   map[string]string
	broker *supervise.Process
	ch     *supervise.Process
	lock   *os.File
	env    map[string]map[string]string // env file (without .env) -> its variables
}

var (
	labOnce    sync.Once
	theLab     *lab
	labErr     error
	labSkip    string
	httpClient = &http.Client{Timeout: 3 * time.Second}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theLab != nil {
		theLab.teardown()
	}
	httpClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "multihost: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// needLab returns the lab, setting it up on first use; it skips the test
// when the machine cannot run it.
func needLab(t *testing.T) *lab {
	t.Helper()
	labOnce.Do(func() {
		labSkip = skipReason()
		if labSkip != "" {
			return
		}
		// The lab outlives this test, until TestMain.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Minute)
		defer cancel()
		start := time.Now()
		theLab, labErr = setupLab(ctx)
		if labErr == nil {
			fmt.Fprintf(os.Stderr, "multihost: lab ready in %s\n", time.Since(start).Round(time.Millisecond))
		}
	})
	if labSkip != "" {
		t.Skip(labSkip)
	}
	if labErr != nil {
		t.Fatalf("set up the lab: %v", labErr)
	}
	return theLab
}

// skipReason says why this machine cannot run the lab ("" when it can).
func skipReason() string {
	if os.Geteuid() != 0 {
		return "the multi-host lab needs root (network namespaces, veth, tc)"
	}
	for _, tool := range []string{"ip", "tc", "nsenter", "clickhouse-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("the multi-host lab needs %s on the PATH (iproute2, util-linux, clickhouse-server)", tool)
		}
	}
	if _, err := os.Stat("/etc/clickhouse-server/config.xml"); err != nil {
		return "the multi-host lab runs Debian's clickhouse-server configuration (/etc/clickhouse-server/config.xml): " + err.Error()
	}
	probe := namePrefix + "-probe"
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil { //nolint:noctx // a probe of a few milliseconds
		return fmt.Sprintf("ip netns is not available here: %v: %s", err, strings.TrimSpace(string(out)))
	}
	_ = exec.Command("ip", "netns", "del", probe).Run() //nolint:noctx // best effort: removed again by the next run's sweep
	return ""
}

// run runs a command (ip, tc) and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ipIn runs ip in host h's namespace.
func ipIn(ctx context.Context, h host, args ...string) error {
	return run(ctx, "ip", append([]string{"-n", h.ns()}, args...)...)
}

func setupLab(ctx context.Context) (_ *lab, err error) {
	l := &lab{env: map[string]map[string]string{}}
	if l.lock, err = lockRun(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			l.teardown()
		}
	}()
	// A crashed run's directory (logs, ClickHouse and broker data):
	// removed under the lock, before this run makes its own.
	if old, _ := filepath.Glob(filepath.Join(os.TempDir(), "trawl-multihost-*")); os.Getenv("TRAWL_MULTIHOST_KEEP") == "" {
		for _, d := range old {
			_ = os.RemoveAll(d) // best effort: a leftover
		}
	}
	if l.dir, err = os.MkdirTemp("", "trawl-multihost-"); err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if l.repo, err = supervise.FindRepoRoot(wd); err != nil {
		return nil, err
	}
	if err := l.readEnvFiles(); err != nil {
		return nil, err
	}
	sweep(ctx)
	if err := buildNetwork(ctx); err != nil {
		return nil, err
	}
	if err := l.build(ctx); err != nil {
		return nil, err
	}
	if err := l.startStore(ctx); err != nil {
		return nil, err
	}
	return l, nil
}

// lockRun takes the lab's lock file, waiting up to a minute for another
// run of these tests (the names and addresses are fixed).
func lockRun(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the lab's lock: %w", err)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s (another run of the multi-host tests?): %w", lockFile, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// sweep removes what a previous run left: processes in the lab's
// namespaces (by pid, as listed by ip netns pids), the namespaces, the
// bridge and the route to the web. Every step is best effort.
func sweep(ctx context.Context) {
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if !strings.HasPrefix(name, namePrefix+"-") {
			continue
		}
		killNamespace(ctx, name)
		_ = run(ctx, "ip", "netns", "del", name)
	}
	_ = run(ctx, "ip", "route", "del", webNet)
	for _, h := range allHosts {
		_ = run(ctx, "ip", "link", "del", h.veth())
	}
	_ = run(ctx, "ip", "link", "del", bridgeName)
}

// killNamespace SIGKILLs the processes of a lab namespace (a crashed
// run's services, broker, ClickHouse, web) and waits a moment for them.
func killNamespace(ctx context.Context, ns string) {
	out, _ := exec.CommandContext(ctx, "ip", "netns", "pids", ns).Output()
	pids := strings.Fields(string(out))
	for _, p := range pids {
		var pid int
		if _, err := fmt.Sscan(p, &pid); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(pids) > 0 {
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// buildNetwork makes the bridge (in the root namespace, with the test's
// address), a namespace per host joined to it by a veth pair, the web's
// range as local addresses of the web host, and a route to that range on
// every other host.
func buildNetwork(ctx context.Context) error {
	steps := [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", rootAddr + "/16", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	}
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return err
		}
	}
	for _, h := range allHosts {
		if err := run(ctx, "ip", "netns", "add", h.ns()); err != nil {
			return err
		}
		if err := run(ctx, "ip", "link", "add", h.veth(), "type", "veth", "peer", "name", "eth0", "netns", h.ns()); err != nil {
			return err
		}
		if err := run(ctx, "ip", "link", "set", h.veth(), "master", bridgeName, "up"); err != nil {
			return err
		}
		for _, s := range [][]string{
			{"addr", "add", h.addr + "/16", "dev", "eth0"},
			{"link", "set", "eth0", "up"},
			{"link", "set", "lo", "up"},
		} {
			if err := ipIn(ctx, h, s...); err != nil {
				return err
			}
		}
		if h == webHost {
			// Every address of the web's range is local here (the
			// hosts of the web answer on them); the others route the
			// range to this host.
			if err := ipIn(ctx, h, "route", "add", "local", webNet, "dev", "lo"); err != nil {
				return err
			}
		} else if err := ipIn(ctx, h, "route", "add", webNet, "via", webHost.addr); err != nil {
			return err
		}
	}
	return run(ctx, "ip", "route", "add", webNet, "via", webHost.addr)
}

// build builds the service binaries, the broker and the web host once.
func (l *lab) build(ctx context.Context) error {
	pkgs := map[string]string{
		"broker": supervise.ToolPrefix + "broker",
		"websim": supervise.ToolPrefix + "websim",
	}
	for _, s := range []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"} {
		pkgs[s] = supervise.ModulePrefix + s + "/cmd/" + s
	}
	bin := filepath.Join(l.dir, "bin")
	l.bins = map[string]string{}
	start := time.Now()
	for name, pkg := range pkgs {
		l.bins[name] = filepath.Join(bin, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", l.bins[name], pkg)
		cmd.Dir = l.repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, out)
		}
	}
	fmt.Fprintf(os.Stderr, "multihost: built %d binaries in %s\n", len(pkgs), time.Since(start).Round(time.Millisecond))
	return nil
}

// readEnvFiles reads the bare-host guide's environment files.
func (l *lab) readEnvFiles() error {
	dir := filepath.Join(l.repo, "deployments", "bare", "env")
	files, err := filepath.Glob(filepath.Join(dir, "*.env"))
	if err != nil {
		return fmt.Errorf("read environment files: %w", err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no environment files in %s", dir)
	}
	for _, f := range files {
		vars, err := readEnvFile(f)
		if err != nil {
			return err
		}
		l.env[strings.TrimSuffix(filepath.Base(f), ".env")] = vars
	}
	return nil
}

// readEnvFile reads a file in systemd's EnvironmentFile syntax as the
// guide writes them: KEY=value lines, comments on lines of their own.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%s:%d: want KEY=value, got %q", path, n, line)
		}
		out[k] = strings.Trim(v, `"`)
	}
	return out, sc.Err()
}

// startStore starts the broker and ClickHouse in the store namespace and
// waits until both answer from the root namespace, over the bridge.
func (l *lab) startStore(ctx context.Context) error {
	store := l.env["store"]
	if store["TRAWL_BROKER_ADDR"] != brokerAddr {
		return fmt.Errorf("deployments/bare/env/store.env: TRAWL_BROKER_ADDR=%q, the lab's store is %s", store["TRAWL_BROKER_ADDR"], brokerAddr)
	}
	var err error
	l.broker, err = startIn(storeHost, "broker", filepath.Join(l.dir, "logs", "broker.log"), nil,
		l.bins["broker"], "--addr", store["TRAWL_BROKER_ADDR"], "--dir", filepath.Join(l.dir, "kafka"))
	if err != nil {
		return err
	}
	conf, err := l.clickhouseConfig()
	if err != nil {
		return err
	}
	l.ch, err = startIn(storeHost, "clickhouse", filepath.Join(l.dir, "logs", "clickhouse.log"), nil,
		"clickhouse-server", "--config-file="+conf)
	if err != nil {
		return err
	}
	for _, a := range []struct {
		what, addr string
		proc       *supervise.Process
	}{{"broker", brokerAddr, l.broker}, {"clickhouse", chAddr, l.ch}} {
		if err := waitDial(ctx, a.addr, a.proc); err != nil {
			return fmt.Errorf("%s on the store host: %w", a.what, err)
		}
	}
	return nil
}

// clickhouseConfig writes the store's server configuration: Debian's
// config.xml and users.xml, the guide's config.d/trawl.xml, and the lab's
// own paths (a temporary directory instead of /var/lib/clickhouse).
func (l *lab) clickhouseConfig() (string, error) {
	dir := filepath.Join(l.dir, "clickhouse")
	if err := os.MkdirAll(filepath.Join(dir, "config.d"), 0o755); err != nil {
		return "", err
	}
	copies := map[string]string{
		"/etc/clickhouse-server/config.xml":                                     filepath.Join(dir, "config.xml"),
		"/etc/clickhouse-server/users.xml":                                      filepath.Join(dir, "users.xml"),
		filepath.Join(l.repo, "deployments", "bare", "clickhouse", "trawl.xml"): filepath.Join(dir, "config.d", "trawl.xml"),
	}
	for from, to := range copies {
		if err := copyFile(from, to); err != nil {
			return "", err
		}
	}
	paths := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>%[1]s/log/server.log</log><errorlog>%[1]s/log/server.err.log</errorlog><console>0</console></logger>
  <path>%[1]s/data/</path>
  <tmp_path>%[1]s/tmp/</tmp_path>
  <user_files_path>%[1]s/user_files/</user_files_path>
  <format_schema_path>%[1]s/format_schemas/</format_schema_path>
</yandex>
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "config.d", "lab-paths.xml"), []byte(paths), 0o644); err != nil {
		return "", err
	}
	return filepath.Join(dir, "config.xml"), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startIn starts a process in host h's namespace (nsenter execs the
// binary in place, so the process is the binary and signals reach it).
func startIn(h host, name, logFile string, env []string, bin string, args ...string) (*supervise.Process, error) {
	if env == nil {
		env = baseEnv()
	}
	return supervise.Start(supervise.Spec{
		Name: h.name + "/" + name, Path: "nsenter",
		Args: append([]string{"--net=" + h.nsPath(), "--", bin}, args...),
		Env:  env, LogFile: logFile,
	})
}

// baseEnv is the environment every lab process starts from: none of the
// test's own CRAWLER_* variables (scripts/test.sh exports the address of
// its ClickHouse), only what finds binaries and a home.
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TZ=UTC"}
}

// waitDial waits until addr accepts a TCP connection from the test.
func waitDial(ctx context.Context, addr string, proc *supervise.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("exited (%w); log tail:\n%s", proc.ExitError(), proc.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("no answer on %s: %w; log tail:\n%s", addr, err, proc.LogTail(20))
		case <-tick.C:
		}
	}
}

// teardown stops the store, removes the network and releases the lock.
func (l *lab) teardown() {
	for _, p := range []*supervise.Process{l.broker, l.ch} {
		if p != nil {
			_ = p.Stop(15 * time.Second) // SIGKILL after that; the namespace goes next
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) //nolint:forbidigo // TestMain's teardown: no test context
	defer cancel()
	sweep(ctx)
	if l.dir != "" && os.Getenv("TRAWL_MULTIHOST_KEEP") == "" {
		_ = os.RemoveAll(l.dir) // best effort, in the temporary directory
	}
	if l.lock != nil {
		_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
		l.lock.Close()
	}
}

// setLink sets the bridge side of host h's veth up or down: down cuts the
// host off from every other host (and the test) at once, as a pulled
// cable does.
func setLink(ctx context.Context, h host, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return run(ctx, "ip", "link", "set", h.veth(), state)
}

// readyzIn asks a service's /readyz from inside host h's namespace: the
// only way to reach a host whose link is down. The asking goroutine's
// thread joins the namespace, and goes back to its own before it is
// unlocked. It must not end with the goroutine: the services are started
// with Pdeathsig (supervise), which fires when the thread that forked them
// ends, and Go's threads are shared: a thread ended here had forked other
// hosts' services earlier, and they were stopped (SIGTERM, exit 0) in the
// middle of the crawl.
func readyzIn(ctx context.Context, h host, s *svc) (int, string) {
	type answer struct {
		code int
		body string
	}
	ch := make(chan answer, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- answer{0, err.Error()}
			return
		}
		defer own.Close()
		f, err := os.Open(h.nsPath())
		if err != nil {
			runtime.UnlockOSThread()
			ch <- answer{0, err.Error()}
			return
		}
		defer f.Close()
		if _, _, errno := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0); errno != 0 {
			runtime.UnlockOSThread()
			ch <- answer{0, "setns: " + errno.Error()}
			return
		}
		defer func() {
			// Back home, the thread can serve other goroutines again; if
			// it cannot go back, it stays locked and ends with this one.
			if _, _, errno := syscall.RawSyscall(sysSetns, own.Fd(), syscall.CLONE_NEWNET, 0); errno == 0 {
				runtime.UnlockOSThread()
			}
		}()
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		c, err := new(net.Dialer).DialContext(ctx, "tcp", s.admin)
		if err != nil {
			ch <- answer{0, err.Error()}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(3 * time.Second)) // a local connection: the deadline only bounds a hung service
		if _, err := fmt.Fprintf(c, "GET /readyz HTTP/1.0\r\nHost: %s\r\n\r\n", s.admin); err != nil {
			ch <- answer{0, err.Error()}
			return
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil) // a constant request: no error
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			ch <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096)) // a short body; a cut one is still an answer
		ch <- answer{resp.StatusCode, strings.TrimSpace(string(body))}
	}()
	a := <-ch
	return a.code, a.body
}

// shapeLink puts a tc qdisc (spec: "tbf rate 8mbit burst 32kb latency
// 100ms", "netem delay 50ms loss 2%") on both ends of host h's link: the
// bridge side of its veth (what h receives) and eth0 inside (what it
// sends). An empty spec removes both.
func shapeLink(ctx context.Context, h host, spec string) error {
	if spec == "" {
		err1 := run(ctx, "tc", "qdisc", "del", "dev", h.veth(), "root")
		err2 := run(ctx, "ip", "netns", "exec", h.ns(), "tc", "qdisc", "del", "dev", "eth0", "root")
		return errors.Join(err1, err2)
	}
	q := strings.Fields(spec)
	if err := run(ctx, "tc", append([]string{"qdisc", "replace", "dev", h.veth(), "root"}, q...)...); err != nil {
		return err
	}
	return run(ctx, "ip", append([]string{"netns", "exec", h.ns(), "tc", "qdisc", "replace", "dev", "eth0", "root"}, q...)...)
}

// haveNetem reports whether the kernel has tc's netem qdisc (this
// development VM's does not: CONFIG_NET_SCH_NETEM is off).
func haveNetem(ctx context.Context) bool {
	err := run(ctx, "tc", "qdisc", "replace", "dev", bridgeName, "root", "netem", "delay", "1ms")
	if err != nil {
		return false
	}
	_ = run(ctx, "tc", "qdisc", "del", "dev", bridgeName, "root") // the probe's qdisc; the bridge goes at teardown
	return true
}
