// Package supervise builds the service binaries and runs each service as a
// separate OS process: logs to a file, graceful stop (SIGTERM, then SIGKILL
// after a deadline), kill, restart, the CPU time and peak memory every
// process used across its restarts, and a Supervisor that restarts a
// process that exits on its own, with back-off, until it crash-loops.
package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ModulePrefix is the import path prefix of the service modules.
const ModulePrefix = "github.com/trawl-crawler/trawl/services/"

// ToolPrefix is the import path prefix of the local deployment's own
// commands (websim, broker, …).
const ToolPrefix = "github.com/trawl-crawler/trawl/deployments/local/cmd/"

// Build builds the named services (seeder, scheduler, …) into binDir with
// one go build in the workspace at repoRoot and returns each binary's path.
// go build leaves an up-to-date binary alone, so repeated builds are cheap.
// The binaries are static (cgo off).
func Build(ctx context.Context, repoRoot, binDir string, services []string) (map[string]string, error) {
	pkgs := make(map[string]string, len(services))
	for _, s := range services {
		pkgs[s] = ModulePrefix + s + "/cmd/" + s
	}
	return buildPackages(ctx, repoRoot, binDir, pkgs)
}

// BuildTools builds the named commands of deployments/local/cmd into binDir
// like Build.
func BuildTools(ctx context.Context, repoRoot, binDir string, tools []string) (map[string]string, error) {
	pkgs := make(map[string]string, len(tools))
	for _, t := range tools {
		pkgs[t] = ToolPrefix + t
	}
	return buildPackages(ctx, repoRoot, binDir, pkgs)
}

// buildPackages builds main packages (binary name -> import path).
func buildPackages(ctx context.Context, repoRoot, binDir string, pkgs map[string]string) (map[string]string, error) {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return nil, fmt.Errorf("create bin dir: %w", err)
	}
	absBin, err := filepath.Abs(binDir)
	if err != nil {
		return nil, fmt.Errorf("resolve bin dir: %w", err)
	}
	args := []string{"build", "-o", absBin + string(filepath.Separator)}
	out := make(map[string]string, len(pkgs))
	for name, pkg := range pkgs {
		args = append(args, pkg)
		out[name] = filepath.Join(absBin, name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	// Static binaries, as the images build them: without cgo a process
	// maps no libc and no dynamic loader, 1.5 MiB less resident memory
	// per process on the bench web, and DNS goes through Go's resolver.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("build %d programs: %w\n%s", len(pkgs), err, stderr.String())
	}
	return out, nil
}

// FindRepoRoot walks up from dir to the directory holding go.work.
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("find go.work above %s: not found", dir)
		}
		d = parent
	}
}

// Spec describes one process.
type Spec struct {
	Name    string    // for messages, e.g. "fetcher-1"
	Path    string    // binary
	Args    []string  // arguments
	Env     []string  // complete environment
	LogFile string    // stdout and stderr are appended here
	Echo    io.Writer // optional: output is copied here too
}

// Usage is what a process consumed over all its runs.
type Usage struct {
	CPU    time.Duration // user + system time of exited runs
	MaxRSS int64         // peak resident set size in bytes over exited runs (see PeakRSS)
	Faults int64         // page faults (minor and major) of exited runs
	Starts int           // how many times it was started
}

// Process is a supervised process. Its methods are safe for concurrent use.
type Process struct {
	spec Spec

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{} // closed when the current run has exited
	waitErr error         // exit status of the last run
	started time.Time     // when the current run started
	usage   Usage
	runPeak int64 // the current run's VmHWM as last sampled (see PeakRSS)
	logf    *os.File
}

// The peak RSS of a running process is read first after
// peakSampleFirstInterval, then at intervals that double up to
// peakSampleInterval (a one-shot command lives less than a second; a
// service's peak needs no tighter reading). The high-water mark only
// rises, so a sample misses at most what the last interval before an
// exit added, and a stop samples before it signals. Reading
// /proc/<pid>/status costs the kernel tens of microseconds: every 10 ms
// for each of seven processes was a third of the launcher's CPU in the
// bench crawl.
const (
	peakSampleInterval      = time.Second
	peakSampleFirstInterval = 10 * time.Millisecond
)

// ErrRunning is returned (wrapped) by Restart when the process runs.
var ErrRunning = errors.New("already running")

// Start starts the process.
func Start(spec Spec) (*Process, error) {
	p := &Process{spec: spec}
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Name returns the spec's name.
func (p *Process) Name() string { return p.spec.Name }

// Spec returns the spec the process runs.
func (p *Process) Spec() Spec { return p.spec }

func (p *Process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && !isClosed(p.done) {
		return fmt.Errorf("start %s: %w", p.spec.Name, ErrRunning)
	}
	if err := os.MkdirAll(filepath.Dir(p.spec.LogFile), 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(p.spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.spec.Name, err)
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...) //nolint:noctx // a service outlives any context here: Stop and Kill end it
	cmd.Env = p.spec.Env
	var w io.Writer = f
	if p.spec.Echo != nil {
		w = io.MultiWriter(f, p.spec.Echo)
	}
	cmd.Stdout = w
	cmd.Stderr = w
	// Own process group: a Ctrl-C on the terminal reaches only the
	// launcher, which stops the services in order. Pdeathsig stops a
	// service whose launcher died without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // nothing was written; the start error is the one to report
		return fmt.Errorf("start %s: %w", p.spec.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.logf, p.waitErr, p.started, p.runPeak = cmd, done, f, nil, time.Now(), 0
	p.usage.Starts++
	go p.wait(cmd, f, done)
	go p.samplePeaks(cmd.Process.Pid, done)
	return nil
}

// samplePeaks samples the peak RSS of the run pid until done; it is owned
// by the run and ends with it.
func (p *Process) samplePeaks(pid int, done <-chan struct{}) {
	interval := peakSampleFirstInterval
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		p.samplePeak(pid)
		interval = min(2*interval, peakSampleInterval)
		t.Reset(interval)
	}
}

// samplePeak records the peak RSS of the run pid if it is still running;
// a run that has exited (or is exiting) keeps its last sample.
func (p *Process) samplePeak(pid int) {
	hwm, err := PeakRSS(pid)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cmd != nil && p.cmd.Process.Pid == pid && hwm > p.runPeak {
		p.runPeak = hwm
	}
	p.mu.Unlock()
}

// wait reaps one run; it is owned by the run it reaps and ends with it.
func (p *Process) wait(cmd *exec.Cmd, f *os.File, done chan struct{}) {
	err := cmd.Wait()
	p.mu.Lock()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru != nil {
		p.usage.CPU += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		p.usage.Faults += ru.Minflt + ru.Majflt
		// maxrss counts the launcher's memory too (see PeakRSS): only
		// where VmHWM could not be read.
		rss := p.runPeak
		if rss == 0 {
			rss = ru.Maxrss * 1024 // Linux reports KiB
		}
		p.usage.MaxRSS = max(p.usage.MaxRSS, rss)
	}
	p.waitErr = err
	p.mu.Unlock()
	_ = f.Close() // the process is gone; a lost line of its log changes nothing
	close(done)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Done returns a channel closed when the current run exits.
func (p *Process) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Pid returns the process id of the current (or last) run.
func (p *Process) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// StartedAt returns when the current (or last) run started.
func (p *Process) StartedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Running reports whether the current run has not exited.
func (p *Process) Running() bool { return !isClosed(p.Done()) }

// Err returns the exit status of the last run after it exited: nil for
// exit code 0, an *exec.ExitError otherwise.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// ErrExitedCleanly is ExitError's answer for a run that exited with code 0.
var ErrExitedCleanly = errors.New("exit status 0")

// ExitError is Err, or ErrExitedCleanly for a clean exit: the status to
// report, and wrap, when a process should not have exited at all.
func (p *Process) ExitError() error {
	if err := p.Err(); err != nil {
		return err
	}
	return ErrExitedCleanly
}

// Wait waits for the current run to exit and returns its exit status.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.Done():
		return p.Err()
	case <-ctx.Done():
		return fmt.Errorf("wait for %s: %w", p.spec.Name, ctx.Err())
	}
}

func (p *Process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if isClosed(done) {
		return nil
	}
	p.samplePeak(cmd.Process.Pid) // what the run used up to its end
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %s: %w", p.spec.Name, err)
	}
	return nil
}

// Stop sends SIGTERM, waits up to grace for the exit, then sends SIGKILL.
// It returns the exit status: nil only for a clean exit with code 0
// within the grace period.
func (p *Process) Stop(grace time.Duration) error {
	done := p.Done()
	if isClosed(done) {
		return p.Err()
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		if err := p.Err(); err != nil {
			return fmt.Errorf("%s exited after SIGTERM: %w", p.spec.Name, err)
		}
		return nil
	case <-t.C:
	}
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-done
	return fmt.Errorf("%s did not stop within %s of SIGTERM: killed", p.spec.Name, grace)
}

// Kill sends SIGKILL and waits for the exit.
func (p *Process) Kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.Done()
	return nil
}

// Restart starts the process again after it exited; while it runs, it
// fails with ErrRunning.
func (p *Process) Restart() error { return p.start() }

// Usage returns the CPU time and peak memory of the exited runs.
func (p *Process) Usage() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usage
}

// LogTail returns about the last n lines of the log file.
func (p *Process) LogTail(n int) string { return Tail(p.spec.LogFile, n) }

// Tail returns about the last n lines of a file (read from its last 64 KiB).
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer func() { _ = f.Close() }() // read only
	const window = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	off := max(st.Size()-window, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(read log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
