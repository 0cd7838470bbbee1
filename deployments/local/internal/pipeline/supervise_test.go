package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// childArg, as the first argument, makes the test binary a fake service.
const childArg = "pipeline-test-child"

// TestMain runs the test binary as a fake long-running service when its
// first argument is childArg: it serves /readyz on CRAWLER_ADMIN_ADDR and
// writes the address to CRAWLER_ADMIN_ADDR_FILE (as every service does)
// until SIGTERM, then exits 0. With a marker file
// argument it does so only on its first run; later runs print "boom" and
// exit 3 (a service that crashes at start).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childArg {
		os.Exit(child(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

func child(args []string) int {
	if len(args) > 0 {
		marker := args[0]
		if _, err := os.Stat(marker); err == nil {
			fmt.Println("boom: the config went missing")
			return 3
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	})}
	ln, err := net.Listen("tcp", os.Getenv("CRAWLER_ADMIN_ADDR")) //nolint:noctx // a child process: no test context here, and a listen does not block
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := telemetry.WriteAddrFile(os.Getenv("CRAWLER_ADMIN_ADDR_FILE"), os.Getpid(), ln.Addr()); err != nil {
		fmt.Println(err)
		return 1
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		<-term
		_ = srv.Close()
	}()
	fmt.Printf("fake service up on %s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		fmt.Println(err)
		return 1
	}
	return 0
}

// fakePipeline is a pipeline whose only service binary is this test
// binary, started with StartService (no broker, no ClickHouse).
func fakePipeline(t *testing.T, autoRestart bool, onRestart func(supervise.Event)) *Pipeline {
	t.Helper()
	p := newPipeline(Config{
		DataDir: t.TempDir(), Bins: map[string]string{"fake": os.Args[0]}, StopGrace: 5 * time.Second,
		AutoRestart: autoRestart, OnRestart: onRestart,
		Restart: supervise.Policy{Backoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, MaxRestarts: 2, Window: time.Minute},
	})
	t.Cleanup(p.Kill)
	return p
}

// eventually polls cond until it holds, for at most 20 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestAutoRestart: with AutoRestart a SIGKILLed service comes back (and is
// ready again) while Check stays quiet; a service that crash-loops ends
// the run through Check with its log tail; Stop then stops the healthy
// one cleanly and counts the restarts.
func TestAutoRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var (
		mu     sync.Mutex
		events []supervise.Event
	)
	p := fakePipeline(t, true, func(ev supervise.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	healthy, err := p.StartService(ctx, "fake", "healthy", []string{childArg})
	if err != nil {
		t.Fatalf("start healthy: %v", err)
	}
	crashy, err := p.StartService(ctx, "fake", "crashy", []string{childArg, filepath.Join(t.TempDir(), "started-once")})
	if err != nil {
		t.Fatalf("start crashy: %v", err)
	}

	// Killed and back: ready again on its admin address, Check quiet.
	if err := healthy.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "healthy restarted", func() bool { return healthy.Usage().Starts == 2 && healthy.Running() })
	if err := p.WaitReady(ctx, healthy); err != nil {
		t.Fatalf("healthy not ready after its restart: %v", err)
	}
	// Its address is the new run's, as the run wrote it.
	if pid, addr, err := telemetry.ReadAddrFile(p.admin[healthy]); err != nil || pid != healthy.Pid() || p.AdminAddr(healthy) != addr {
		t.Errorf("admin address file: pid %d addr %s (%v); want pid %d and AdminAddr %q", pid, addr, err, healthy.Pid(), p.AdminAddr(healthy))
	}
	if err := p.Check(); err != nil {
		t.Fatalf("Check after a healed kill: %v", err)
	}

	// Killed, and every restart crashes: a crash loop ends the run.
	if err := crashy.Kill(); err != nil {
		t.Fatal(err)
	}
	var checkErr error
	eventually(t, "Check to report the crash loop", func() bool { checkErr = p.Check(); return checkErr != nil })
	var loop *supervise.CrashLoopError
	if !errors.As(checkErr, &loop) || loop.Name != "crashy" || !strings.Contains(checkErr.Error(), "boom: the config went missing") {
		t.Fatalf("Check = %v, want crashy's crash loop with its log tail", checkErr)
	}

	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v (healthy must exit 0; crashy was already down)", err)
	}
	if healthy.Running() || crashy.Running() {
		t.Error("a service runs after Stop")
	}
	if got := p.Restarts(); got["healthy"] != 1 || got["crashy"] != 2 {
		t.Errorf("restarts %v, want healthy 1, crashy 2", got)
	}
	mu.Lock()
	defer mu.Unlock()
	var summary []string
	for _, ev := range events {
		summary = append(summary, fmt.Sprintf("%s:%d", ev.Name, ev.Restart))
	}
	// healthy's restart 1; crashy's kill, its two crashing restarts, then
	// the exit it gives up on (0).
	if got, want := strings.Join(summary, " "), "healthy:1 crashy:1 crashy:2 crashy:0"; got != want {
		t.Errorf("events %s, want %s", got, want)
	}
}

// TestNoAutoRestart: without AutoRestart a killed service stays down and
// Check reports it, and Restart brings it back (what the kill tests use).
func TestNoAutoRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p := fakePipeline(t, false, nil)
	proc, err := p.StartService(ctx, "fake", "svc", []string{childArg})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("Check while running: %v", err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "svc exited unexpectedly") {
		t.Errorf("Check after a kill = %v, want svc exited unexpectedly", err)
	}
	if err := p.Restart(ctx, proc); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := p.Check(); err != nil {
		t.Errorf("Check after Restart: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if got := p.Restarts()["svc"]; got != 1 {
		t.Errorf("restarts %d, want 1", got)
	}
}
