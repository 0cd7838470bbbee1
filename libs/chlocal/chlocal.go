// Package chlocal runs a private ClickHouse server for local crawls and
// tests: its own config, data directory and loopback ports, started from
// the clickhouse binary on the PATH; and, for the cluster tests, a local
// cluster of such servers with a ZooKeeper (StartCluster, cluster.go).
package chlocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ErrNotInstalled means no ClickHouse server binary was found; the error
// text says what to install.
var ErrNotInstalled = errors.New("clickhouse server not installed (apt-get install clickhouse-server)")

const (
	startTimeout       = 30 * time.Second
	defaultStopTimeout = 10 * time.Second
)

// FindBinary returns the command that starts a server: clickhouse-server,
// or "clickhouse server" for the single-binary distribution.
func FindBinary() ([]string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return []string{p}, nil
	}
	if p, err := exec.LookPath("clickhouse"); err == nil {
		return []string{p, "server"}, nil
	}
	return nil, ErrNotInstalled
}

// Install installs clickhouse-server with the OS package manager when
// running as root on a system with apt-get; otherwise it returns
// ErrNotInstalled.
func Install(ctx context.Context) error {
	if _, err := FindBinary(); err == nil {
		return nil
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil || os.Geteuid() != 0 {
		return ErrNotInstalled
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", "clickhouse-server"}} {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", args[0], err, tail(out, 2048))
		}
	}
	if _, err := FindBinary(); err != nil {
		return fmt.Errorf("install clickhouse-server: %w", err)
	}
	return nil
}

// Server is a running private ClickHouse server. Its methods are safe for
// concurrent use.
type Server struct {
	dir      string
	bin      []string
	tcpPort  int
	httpPort int
	tlsPort  int  // 0: no TLS port
	tls      *TLS // the TLS port's certificate
	// userPasswords are Options.Users.
	userPasswords map[string]string
	stopTimeout   time.Duration
	tmpl          *template.Template
	legacy        bool // an 18.x server: see configTmpl
	cluster       *nodeConfig
	partLog       bool // Options.PartLog

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd exited
}

// Start starts a server with its data under dir, listening on free loopback
// ports, and waits until it answers queries. A dir used before keeps its
// data (the config is rewritten with the new ports).
func Start(ctx context.Context, dir string) (*Server, error) {
	return StartWith(ctx, dir, Options{})
}

// Options tunes a server; zero fields take defaults.
type Options struct {
	TCPPort     int           // native protocol port (default: a free port)
	HTTPPort    int           // HTTP port (default: a free port)
	StopTimeout time.Duration // Stop sends SIGKILL after this long (default 10s)
	// TLS, when not nil, opens the native protocol's TLS port too
	// (TLSAddr) with its certificate; TLSPort fixes the port (default: a
	// free port).
	TLS     *TLS
	TLSPort int
	// Users are users to create besides "default" (which has no
	// password), by name, with their passwords (stored hashed in the
	// config). Names must be identifiers ([A-Za-z_][A-Za-z0-9_]*).
	Users map[string]string
	// PartLog records every part the server inserts, merges and removes
	// in system.part_log (flushed every 7.5 s, or by SYSTEM FLUSH LOGS):
	// the rows and bytes each table's merges read, for a benchmark. Off
	// by default: the log is one more table written all the time.
	PartLog bool

	// cluster makes the server a node of a cluster (StartCluster).
	cluster *nodeConfig

	// configTemplate replaces configTmpl (same fields); set by this
	// package's load benchmark to measure candidate settings.
	configTemplate *template.Template
}

// TLS is the server certificate of the TLS port: PEM files, read by the
// server (absolute paths, readable by the user the server runs as).
type TLS struct {
	CertFile string // server certificate (its chain)
	KeyFile  string // its private key
	// ClientCAFile, when set, makes the server require a client
	// certificate signed by one of its CAs (mutual TLS).
	ClientCAFile string
}

var userNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// StartWith is Start with options (e.g. fixed ports).
func StartWith(ctx context.Context, dir string, o Options) (*Server, error) {
	bin, err := FindBinary()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolve data dir: %w", err)
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = defaultStopTimeout
	}
	s := &Server{dir: dir, bin: bin, tcpPort: o.TCPPort, httpPort: o.HTTPPort, stopTimeout: o.StopTimeout,
		tmpl: configTmpl, legacy: isLegacy(ctx, bin)}
	if o.configTemplate != nil {
		s.tmpl = o.configTemplate
	}
	for name := range o.Users {
		if !userNameRE.MatchString(name) || name == "default" {
			return nil, fmt.Errorf("start clickhouse: user name %q is not an identifier other than default", name)
		}
	}
	s.userPasswords = o.Users
	s.cluster = o.cluster
	s.partLog = o.PartLog
	if o.TLS != nil {
		if o.TLS.CertFile == "" || o.TLS.KeyFile == "" {
			return nil, errors.New("start clickhouse: TLS needs a certificate and a key file")
		}
		s.tls, s.tlsPort = o.TLS, o.TLSPort
	}
	if s.tcpPort == 0 || s.httpPort == 0 || (s.tls != nil && s.tlsPort == 0) {
		ports, err := freePorts(ctx, 3)
		if err != nil {
			return nil, err
		}
		if s.tcpPort == 0 {
			s.tcpPort = ports[0]
		}
		if s.httpPort == 0 {
			s.httpPort = ports[1]
		}
		if s.tls != nil && s.tlsPort == 0 {
			s.tlsPort = ports[2]
		}
	}
	if err := s.writeConfig(); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts a stopped server again on the same data directory and
// ports (Stop first if it runs).
func (s *Server) Restart(ctx context.Context) error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.start(ctx)
}

// Dir returns the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Pid returns the server's process id, 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Exited returns a channel closed when the server's current process
// exits, nil when none runs (never started, or stopped by Stop). A
// server that died on its own keeps its closed channel until Restart.
func (s *Server) Exited() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	return s.done
}

// tcpPortRE finds the native port in a server's config.xml.
var tcpPortRE = regexp.MustCompile(`<tcp_port>(\d+)</tcp_port>`)

// ConfiguredAddr returns the native-protocol address that the server of
// dir (a directory Start was given) was last started with, read from its
// config.xml: a server started on dir that still runs, in this process or
// another, answers there. It does not check that one does.
func ConfiguredAddr(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.xml"))
	if err != nil {
		return "", fmt.Errorf("read clickhouse config: %w", err)
	}
	m := tcpPortRE.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("read clickhouse config: no tcp_port in %s", filepath.Join(dir, "config.xml"))
	}
	return net.JoinHostPort("127.0.0.1", string(m[1])), nil
}

// Addr returns the native-protocol address (host:port).
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tcpPort)) }

// TLSAddr returns the native protocol's TLS address (host:port), "" when
// the server has no TLS port (Options.TLS).
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// HTTPAddr returns the HTTP interface address (host:port).
func (s *Server) HTTPAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.httpPort)) }

func (s *Server) configPath() string { return filepath.Join(s.dir, "config.xml") }

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return errors.New("start clickhouse: already running")
	}
	// A server already answering on our port would pass the readiness
	// check below while ours fails to bind.
	for _, p := range []int{s.tcpPort, s.httpPort, s.tlsPort} {
		if p == 0 {
			continue
		}
		if err := portFree(ctx, p); err != nil {
			return fmt.Errorf("start clickhouse: %w", err)
		}
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "log", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open server output log: %w", err)
	}
	args := append(append([]string{}, s.bin[1:]...), "--config-file="+s.configPath())
	cmd := exec.Command(s.bin[0], args...) //nolint:noctx // not CommandContext: ctx bounds the start-up wait, not the server's life
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close() // the start error is the one to report
		return fmt.Errorf("start %s: %w", s.bin[0], err)
	}
	done := make(chan struct{})
	var werr error // written before done is closed
	go func() {
		werr = cmd.Wait()
		_ = out.Close() // the server is gone; a lost line of its output changes nothing
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	wctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, pcancel := context.WithTimeout(wctx, time.Second)
		perr := Ping(pctx, s.Addr())
		pcancel()
		if perr == nil {
			return nil // the port was free before, so the answer is ours
		}
		select {
		case <-done:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			return fmt.Errorf("start clickhouse: server exited (%w): %s", werr, s.logTail())
		case <-wctx.Done():
			_ = s.Stop()
			return fmt.Errorf("start clickhouse: not answering on %s: %w (last ping: %w): %s", s.Addr(), wctx.Err(), perr, s.logTail())
		case <-tick.C:
		}
	}
}

// logTail returns the end of the server's error log and output, for start
// failures.
func (s *Server) logTail() string {
	var parts []string
	for _, f := range []string{"server.err.log", "stdout.log"} {
		b, err := os.ReadFile(filepath.Join(s.dir, "log", f))
		if err == nil && len(bytes.TrimSpace(b)) > 0 {
			// The last exception first: a stack trace after it would
			// push it out of the tail.
			if i := bytes.LastIndex(b, []byte("DB::Exception: ")); i >= 0 {
				line := b[i:]
				if j := bytes.IndexByte(line, '\n'); j >= 0 {
					line = line[:j]
				}
				parts = append(parts, f+" (last exception): "+tail(line, 1024))
			}
			parts = append(parts, f+": "+tail(b, 2048))
		}
	}
	if len(parts) == 0 {
		return "no server log output"
	}
	return strings.Join(parts, "\n")
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Stop stops the server and waits for it to exit: SIGTERM to its process
// group, SIGKILL after Options.StopTimeout (10s; a server with open client
// connections may wait that long). Stopping a stopped server is a no-op.
func (s *Server) Stop() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(s.stopTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
	// Children left in the group (none expected) go too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// Ping reports whether a ClickHouse server answers on the native address.
func Ping(ctx context.Context, addr string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: time.Second,
	})
	if err != nil {
		return fmt.Errorf("open clickhouse %s: %w", addr, err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("ping clickhouse %s: %w", addr, err)
	}
	return nil
}

// freePorts returns n distinct free loopback TCP ports (bound and released;
// another process could take one before the server binds it, which makes
// Start fail with the server's error).
func freePorts(ctx context.Context, n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func portFree(ctx context.Context, port int) error {
	l, err := new(net.ListenConfig).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d in use: %w", port, err)
	}
	return l.Close()
}
