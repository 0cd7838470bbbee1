package checks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the workspace root, two levels above this module.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		t.Fatalf("workspace root %s has no go.work: %v", root, err)
	}
	return root
}

// localBinaries are the local harness's broker, ClickHouse starter and
// generated web, built with the images' binaries (see images).
var localBinaries = map[string]string{
	"broker":   "./deployments/local/cmd/broker",
	"chserver": "./deployments/local/cmd/chserver",
	"websim":   "./deployments/local/cmd/websim",
}

// buildStack builds every binary of images and localBinaries into dir with one go
// build, with the Dockerfiles' settings (static, -trimpath): the stack runs
// what the images hold, and the build cache the Dockerfile test filled
// serves it.
func buildStack(t testing.TB, dir string) map[string]string {
	t.Helper()
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", dir + string(os.PathSeparator)}
	bins := map[string]string{}
	for _, m := range []map[string]string{images, localBinaries} {
		for name, pkg := range m {
			args = append(args, pkg)
			bins[name] = filepath.Join(dir, name)
		}
	}
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bins
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a child process of the stack, stopped with SIGTERM at cleanup.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProc starts bin with args and env (added to this process's
// environment without its CRAWLER_* variables), output into logDir.
// stdout, when non-nil, receives the process's standard output instead.
func startProc(t testing.TB, logDir, name, bin string, args, env []string, stdout io.Writer) *proc {
	t.Helper()
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...) //nolint:noctx // stopped with SIGTERM at cleanup, after the test's context is cancelled
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRAWLER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = f
	cmd.Stdout = f
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

// stop sends SIGTERM and waits up to 30 s, then kills.
func (p *proc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Logf("%s did not stop within 30s after SIGTERM: killed", p.name)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has exited, with its error.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// tail returns the last n lines of the process's log.
func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitAddrFile waits until p has written its admin address file ("<pid>
// <host:port>", the services' --admin-addr-file) and returns the address.
func waitAddrFile(t testing.TB, p *proc, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil {
			if f := strings.Fields(string(b)); len(f) == 2 && f[0] == strconv.Itoa(p.cmd.Process.Pid) {
				return f[1]
			}
		}
		if done, perr := p.exited(); done {
			t.Fatalf("%s exited (%v) before it wrote %s:\n%s", p.name, perr, path, p.tail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote no admin address to %s within %v:\n%s", p.name, path, timeout, p.tail(40))
		}
		<-poll.C
	}
}

// waitHTTP polls url until it answers 200, the process exits or the
// timeout passes.
func waitHTTP(t testing.TB, p *proc, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if done, perr := p.exited(); done {
			t.Fatalf("%s exited (%v) before %s answered:\n%s", p.name, perr, url, p.tail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not answer 200 within %v:\n%s", p.name, url, timeout, p.tail(40))
		}
		<-poll.C
	}
}

// waitTCP waits until addr accepts connections.
func waitTCP(t testing.TB, p *proc, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(200 * time.Millisecond)
	defer poll.Stop()
	dialer := net.Dialer{Timeout: time.Second}
	for {
		c, err := dialer.DialContext(t.Context(), "tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if done, perr := p.exited(); done {
			t.Fatalf("%s exited (%v) before %s accepted connections:\n%s", p.name, perr, addr, p.tail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s refused connections for %v:\n%s", p.name, addr, timeout, p.tail(40))
		}
		<-poll.C
	}
}

// webReady is the first line cmd/websim prints.
type webReady struct {
	Seeds []string `json:"seeds"`
	Hosts []string `json:"hosts"`
}

// lineWriter hands the first line written to it to a channel.
type lineWriter struct {
	once sync.Once
	buf  strings.Builder
	ch   chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	if s := w.buf.String(); strings.Contains(s, "\n") {
		w.once.Do(func() { w.ch <- strings.SplitN(s, "\n", 2)[0] })
	}
	return len(p), nil
}

// startForwardProxy starts a minimal HTTP forward proxy (absolute-form GET
// requests only: the crawl's pages are plain http) on 127.0.0.1, closed
// at cleanup; it returns its address.
func startForwardProxy(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{Proxy: nil, DisableCompression: true}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || !r.URL.IsAbs() {
			http.Error(w, "only absolute-form http requests", http.StatusMethodNotAllowed)
			return
		}
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.Header.Del("Proxy-Connection")
		out.Header.Del("Proxy-Authorization")
		resp, err := tr.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		tr.CloseIdleConnections()
	})
	return ln.Addr().String()
}

// stack is a running deployment of the five services, configured the way
// the compose file and the Kubernetes ConfigMap configure them: through
// CRAWLER_* variables only.
type stack struct {
	bins    map[string]string
	admin   map[string]string // service -> admin host:port
	procs   map[string]*proc
	apiURL  string
	token   string
	seeds   []string
	hosts   []string
	logDir  string
	crawlID string
}

// startStack starts a broker, ClickHouse (CRAWLER_CLICKHOUSE_ADDR when set,
// else a private server), a generated web (a quarter of its sites built by
// scripts) and a forward proxy, then the five services in the compose
// file's start order, each waited for on its /readyz, the fetcher
// rendering with Chromium (--render auto), and `seeder serve`.
func startStack(t testing.TB) *stack {
	t.Helper()
	chromium := needChromium(t)
	work := t.TempDir()
	s := &stack{
		bins:   buildStack(t, filepath.Join(work, "bin")),
		admin:  map[string]string{},
		procs:  map[string]*proc{},
		token:  "ops-check-token-0123456789abcdef",
		logDir: filepath.Join(work, "logs"),
	}
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		t.Fatal(err)
	}

	brokerAddr := freeAddr(t)
	broker := startProc(t, s.logDir, "broker", s.bins["broker"], []string{"--addr", brokerAddr, "--dir", filepath.Join(work, "kafka")}, nil, nil)
	waitTCP(t, broker, brokerAddr, 30*time.Second)

	chAddr := os.Getenv("CRAWLER_CLICKHOUSE_ADDR")
	if chAddr == "" {
		addrFile := filepath.Join(work, "ch.addr")
		ch := startProc(t, s.logDir, "chserver", s.bins["chserver"], []string{"-dir", filepath.Join(work, "ch"), "-addr-file", addrFile}, nil, nil)
		deadline := time.Now().Add(60 * time.Second)
		poll := time.NewTicker(300 * time.Millisecond)
		defer poll.Stop()
		for {
			if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
				chAddr = strings.TrimSpace(string(b))
				break
			}
			if done, err := ch.exited(); done || time.Now().After(deadline) {
				t.Fatalf("private ClickHouse did not start (%v):\n%s", err, ch.tail(40))
			}
			<-poll.C
		}
	}

	lw := &lineWriter{ch: make(chan string, 1)}
	// A quarter of the sites build their pages with a script, which the
	// fetcher renders in Chromium (the dashboard's Rendering row).
	web := startProc(t, s.logDir, "websim", s.bins["websim"], []string{
		"--hosts", "12", "--articles", "12", "--first-addr", "127.77.0.1",
		"--slow-delay", "2s", "--stats-addr", "127.0.0.1:0", "--script-share", "0.25"}, nil, lw)
	select {
	case line := <-lw.ch:
		var r webReady
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("websim ready line %q: %v", line, err)
		}
		s.seeds, s.hosts = r.Seeds, r.Hosts
	case <-time.After(30 * time.Second):
		t.Fatalf("websim printed no ready line:\n%s", web.tail(20))
	}

	proxyAddr := startForwardProxy(t)
	proxiesFile := filepath.Join(work, "proxies.txt")
	if err := os.WriteFile(proxiesFile, []byte(proxyAddr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	id := fmt.Sprintf("opscheck%d", os.Getpid())
	common := []string{
		"CRAWLER_KAFKA_BROKERS=" + brokerAddr,
		"CRAWLER_KAFKA_PARTITIONS=4",
		"CRAWLER_KAFKA_TOPIC_PREFIX=" + id + ".",
		"CRAWLER_KAFKA_SESSION_TIMEOUT=6s",
		"CRAWLER_CLICKHOUSE_ADDR=" + chAddr,
		"CRAWLER_CLICKHOUSE_DATABASE=" + id,
		"CRAWLER_LOG_FORMAT=json",
		"CRAWLER_LOG_LEVEL=info",
	}
	apiAddr := freeAddr(t)
	s.apiURL = "http://" + apiAddr
	services := []struct {
		name string
		args []string
		env  []string
	}{
		{"scheduler", nil, nil},
		{"fetcher", nil, []string{"CRAWLER_ALLOW_PRIVATE=true", "CRAWLER_DELAY=200ms", "CRAWLER_USE_PROXIES=true",
			"CRAWLER_RETRY_BACKOFF=1s", "CRAWLER_INSTANCE_ID=fetcher-0", "CRAWLER_MEMORY_LIMIT=75497472",
			"CRAWLER_RENDER=auto", "CRAWLER_CHROMIUM=" + chromium}},
		{"parser", nil, nil},
		{"proxypool", nil, []string{"CRAWLER_PROXIES_FILE=" + proxiesFile, "CRAWLER_CHECK_URL=" + s.seeds[0],
			"CRAWLER_CHECK_INTERVAL=5s", "CRAWLER_API_ADDR=127.0.0.1:0"}},
		{"seeder", []string{"serve"}, []string{"CRAWLER_API_ADDR=" + apiAddr, "CRAWLER_API_TOKEN=" + s.token,
			"CRAWLER_ALLOW_PRIVATE=true"}},
	}
	for _, svc := range services {
		// Port 0, and the service says which port it got: a port picked
		// free here could be taken before the service binds it.
		addrFile := filepath.Join(work, svc.name+".admin")
		env := append(append([]string{"CRAWLER_ADMIN_ADDR=127.0.0.1:0", "CRAWLER_ADMIN_ADDR_FILE=" + addrFile}, common...), svc.env...)
		p := startProc(t, s.logDir, svc.name, s.bins[svc.name], svc.args, env, nil)
		admin := waitAddrFile(t, p, addrFile, 90*time.Second)
		waitHTTP(t, p, "http://"+admin+"/readyz", 90*time.Second)
		s.admin[svc.name] = admin
		s.procs[svc.name] = p
	}
	return s
}

// submit submits a crawl of the generated web with trawlctl, as the
// compose quick start does.
func (s *stack) submit(t testing.TB, crawlID string) {
	t.Helper()
	req := map[string]any{
		"crawl_id": crawlID,
		"seeds":    s.seeds,
		"scope":    map[string]any{"allow_hosts": s.hosts},
		"limits":   map[string]any{"max_depth": 6},
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), s.bins["trawlctl"], "submit", "--file", "-")
	cmd.Env = append(os.Environ(), "CRAWLER_API_URL="+s.apiURL, "CRAWLER_API_TOKEN="+s.token)
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("trawlctl submit: %v\n%s", err, out)
	}
	s.crawlID = crawlID
}

// checkAlive fails the test with the log of any service that exited.
func (s *stack) checkAlive(t testing.TB) {
	t.Helper()
	for name, p := range s.procs {
		if done, err := p.exited(); done {
			t.Fatalf("%s exited during the crawl (%v):\n%s", name, err, p.tail(40))
		}
	}
}

// scrape returns the metric family names an admin server exports.
func scrape(t testing.TB, addr string) map[string]bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", addr, err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# TYPE ") {
			f := strings.Fields(line)
			names[f[2]] = true
		}
	}
	return names
}
