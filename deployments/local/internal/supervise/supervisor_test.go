package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv selects what the test binary does when it runs as a child.
const childEnv = "SUPERVISE_TEST_CHILD"

// TestMain runs the test binary as a real child process when childEnv
// says so: "serve" prints a line and runs until SIGTERM (then exit 0),
// "crash" prints a line and exits 3 at once.
func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "serve":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		fmt.Printf("child up, pid %d\n", os.Getpid())
		<-term
		fmt.Println("child stopping")
		os.Exit(0)
	case "crash":
		fmt.Println("child boom: cannot read its config")
		os.Exit(3)
	}
	goleak.VerifyTestMain(m)
}

func childSpec(t *testing.T, name, mode string) Spec {
	t.Helper()
	return Spec{Name: name, Path: os.Args[0], Env: append(os.Environ(), childEnv+"="+mode),
		LogFile: filepath.Join(t.TempDir(), name+".log")}
}

func TestPolicyNext(t *testing.T) {
	p := Policy{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRestarts: 3, Window: time.Minute}
	now := time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)
	ago := func(ds ...time.Duration) []time.Time {
		var out []time.Time
		for _, d := range ds {
			out = append(out, now.Add(-d))
		}
		return out
	}
	tests := []struct {
		name      string
		p         Policy
		restarts  []time.Time
		wantDelay time.Duration
		wantOK    bool
	}{
		{"first exit", p, nil, 100 * time.Millisecond, true},
		{"doubles per restart in the window", p, ago(5*time.Second, time.Second), 400 * time.Millisecond, true},
		{"old restarts are forgotten", p, ago(10*time.Minute, 2*time.Minute, time.Second), 200 * time.Millisecond, true},
		{"crash loop at MaxRestarts in the window", p, ago(30*time.Second, 20*time.Second, time.Second), 0, false},
		{"capped", Policy{Backoff: 300 * time.Millisecond, MaxBackoff: time.Second, MaxRestarts: 10, Window: time.Minute},
			ago(5*time.Second, 4*time.Second, 3*time.Second, 2*time.Second), time.Second, true},
		{"defaults: 0.5s then 8s at the fifth, then give up", Policy{}.WithDefaults(), ago(9*time.Second, 8*time.Second, 7*time.Second, 6*time.Second), 8 * time.Second, true},
		{"defaults give up at the sixth exit", Policy{}.WithDefaults(), ago(9*time.Second, 8*time.Second, 7*time.Second, 6*time.Second, time.Second), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := tt.p.Next(now, tt.restarts)
			if d != tt.wantDelay || ok != tt.wantOK {
				t.Errorf("Next = %s, %v; want %s, %v", d, ok, tt.wantDelay, tt.wantOK)
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       Policy
		wantErr bool
	}{
		{"zero (defaults)", Policy{}, false},
		{"default", DefaultPolicy(), false},
		{"negative window", Policy{Window: -time.Second}, true},
		{"negative restarts", Policy{MaxRestarts: -1}, true},
		{"back-off above its maximum", Policy{Backoff: time.Minute, MaxBackoff: time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.p.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// waitFor polls cond until it holds or 10 s passed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
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

func nextEvent(t *testing.T, events <-chan Event) Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no supervisor event within 10s")
		return Event{}
	}
}

// TestSupervisorRestartsKilledProcess: a real child SIGKILLed twice comes
// back twice, after the back-off, reported each time; once supervision
// stops, a graceful stop is a clean exit that nobody restarts.
func TestSupervisorRestartsKilledProcess(t *testing.T) {
	proc, err := Start(childSpec(t, "svc", "serve"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = proc.Kill() }() // an error here is "already stopped"
	events := make(chan Event, 10)
	sup := NewSupervisor(proc, Policy{Backoff: 50 * time.Millisecond, MaxBackoff: time.Second, MaxRestarts: 3, Window: time.Minute},
		func(ev Event) { events <- ev })
	ctx, cancel := context.WithCancel(t.Context())
	runErr := make(chan error, 1)
	go func() { runErr <- sup.Run(ctx) }()

	for i := 1; i <= 2; i++ {
		waitFor(t, fmt.Sprintf("run %d up", i), func() bool { return strings.Count(proc.LogTail(20), "child up") == i })
		if err := proc.Kill(); err != nil {
			t.Fatalf("kill: %v", err)
		}
		ev := nextEvent(t, events)
		wantDelay := 50 * time.Millisecond << (i - 1)
		if ev.Name != "svc" || ev.Restart != i || ev.Delay != wantDelay || ev.Err == nil || !strings.Contains(ev.Err.Error(), "killed") {
			t.Errorf("event %d: %+v (%s), want restart %d in %s after signal: killed", i, ev, ev, i, wantDelay)
		}
		waitFor(t, fmt.Sprintf("restart %d", i), func() bool { return proc.Usage().Starts == i+1 && proc.Running() })
	}
	waitFor(t, "run 3 up", func() bool { return strings.Count(proc.LogTail(20), "child up") == 3 })

	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if err := proc.Stop(5 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := proc.Usage().Starts; got != 3 || proc.Running() {
		t.Errorf("after stop: %d starts, running %v; want 3, not running", got, proc.Running())
	}
	if !strings.Contains(proc.LogTail(5), "child stopping") {
		t.Errorf("log tail %q, want the child's clean stop", proc.LogTail(5))
	}
}

// TestSupervisorCrashLoop: a child that exits at once is restarted
// MaxRestarts times with a doubling back-off, then Run gives up with the
// child's log tail.
func TestSupervisorCrashLoop(t *testing.T) {
	proc, err := Start(childSpec(t, "crasher", "crash"))
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	sup := NewSupervisor(proc, Policy{Backoff: 10 * time.Millisecond, MaxBackoff: 30 * time.Millisecond, MaxRestarts: 3, Window: time.Minute},
		func(ev Event) { events = append(events, ev) })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = sup.Run(ctx)
	var loop *CrashLoopError
	if !errors.As(err, &loop) {
		t.Fatalf("Run = %v, want a crash loop", err)
	}
	if loop.Name != "crasher" || loop.Restarts != 3 || !strings.Contains(loop.LogTail, "child boom") || !strings.Contains(loop.Error(), "exit status 3") {
		t.Errorf("crash loop error %+v:\n%v", loop, err)
	}
	var exitErr interface{ ExitCode() int }
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
		t.Errorf("crash loop error does not unwrap to the exit status 3: %v", err)
	}
	wantDelays := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond, 0}
	if len(events) != len(wantDelays) {
		t.Fatalf("events %v, want %d", events, len(wantDelays))
	}
	for i, ev := range events {
		wantRestart := i + 1
		if i == len(wantDelays)-1 {
			wantRestart = 0
		}
		if ev.Delay != wantDelays[i] || ev.Restart != wantRestart {
			t.Errorf("event %d: %s, want restart %d after %s", i, ev, wantRestart, wantDelays[i])
		}
	}
	if got := proc.Usage().Starts; got != 4 || proc.Running() {
		t.Errorf("%d starts, running %v; want 4 and exited", got, proc.Running())
	}
}

// TestSupervisorMissingBinary: a restart that cannot start the process
// counts as a crash, so it ends in a crash loop rather than a spin.
func TestSupervisorMissingBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "svc")
	if err := os.Symlink(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	spec := childSpec(t, "svc", "crash")
	spec.Path = bin
	proc, err := Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	sup := NewSupervisor(proc, Policy{Backoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxRestarts: 2, Window: time.Minute}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err = sup.Run(ctx)
	var loop *CrashLoopError
	if !errors.As(err, &loop) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Run = %v, want a crash loop whose cause is the missing binary", err)
	}
	if got := proc.Usage().Starts; got != 1 {
		t.Errorf("%d starts, want the first only", got)
	}
}

// TestSupervisorExcusesWeather: exits while a dependency is down (Excuse)
// are restarted without counting toward the crash loop; once the weather
// clears, the policy counts again and a crash loop still ends it.
func TestSupervisorExcusesWeather(t *testing.T) {
	proc, err := Start(childSpec(t, "crasher", "crash"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		events []Event
		down   = true // the dependency, for the first 6 exits
	)
	sup := NewSupervisor(proc, Policy{Backoff: 10 * time.Millisecond, MaxBackoff: 30 * time.Millisecond, MaxRestarts: 3, Window: time.Minute},
		func(ev Event) {
			events = append(events, ev)
			if len(events) == 6 {
				down = false
			}
		})
	sup.Excuse(func() string {
		if down {
			return "clickhouse is down"
		}
		return ""
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var loop *CrashLoopError
	if err := sup.Run(ctx); !errors.As(err, &loop) {
		t.Fatalf("Run = %v, want a crash loop once the weather cleared", err)
	}
	// 6 excused exits, then 3 counted restarts and the giving up.
	if len(events) != 10 {
		t.Fatalf("%d events, want 10: %v", len(events), events)
	}
	for i, ev := range events {
		excused := i < 6
		if (ev.Weather != "") != excused || (excused && (ev.Restart == 0 || !strings.Contains(ev.String(), "not counted as a crash"))) {
			t.Errorf("event %d: %s (weather %q), want excused %v", i, ev, ev.Weather, excused)
		}
		if ev.Delay > 30*time.Millisecond {
			t.Errorf("event %d: delay %s beyond the policy's maximum", i, ev.Delay)
		}
	}
	if loop.Restarts != 3 {
		t.Errorf("crash loop after %d counted restarts, want 3", loop.Restarts)
	}
}
