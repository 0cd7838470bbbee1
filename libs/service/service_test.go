package service

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// newTest returns a service on a loopback admin port and the admin's base URL.
func newTest(t *testing.T) (*Service, string) {
	t.Helper()
	s, err := newService("test", telemetry.Config{AdminAddr: "127.0.0.1:0"}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	addr, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s, "http://" + addr.String()
}

// status GETs base+path with a client that keeps no connection open.
func status(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// stillServes reports whether a GET of url gets an answer.
func stillServes(t *testing.T, c *http.Client, url string) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

// events is a concurrency-safe event log.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func (e *events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.log, ", ")
}

// TestShutdownOrder: readiness is false before the consumers stop, the
// consumers stop before the drain stage, that before the writers, and the
// writers flush while the admin server still answers.
func TestShutdownOrder(t *testing.T) {
	s, base := newTest(t)
	var ev events
	ready := make(chan struct{})
	s.Go(Consume, "consumer", func(ctx context.Context) error {
		s.SetReady()
		close(ready)
		<-ctx.Done()
		ev.add("consumer stops, readyz %d", status(t, base+"/readyz"))
		return nil
	})
	s.Go(Drain, "recorder", func(ctx context.Context) error {
		<-ctx.Done()
		ev.add("recorder stops")
		return nil
	})
	s.Go(Flush, "writer", func(ctx context.Context) error {
		<-ctx.Done()
		ev.add("writer flushes, healthz %d", status(t, base+"/healthz"))
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-ready
	if got := status(t, base+"/readyz"); got != http.StatusOK {
		t.Errorf("/readyz while running = %d, want 200", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	want := "consumer stops, readyz 503, recorder stops, writer flushes, healthz 200"
	if got := ev.String(); got != want {
		t.Errorf("shutdown order:\n got %s\nwant %s", got, want)
	}
	// The admin server stopped last: nothing listens any more.
	if stillServes(t, http.DefaultClient, base+"/healthz") {
		t.Error("admin server still answers after Run returned")
	}
}

// TestReadyzWhileDraining: /readyz answers 503 (and /healthz 200) for as
// long as a consumer drains, and SetReady cannot turn readiness back on.
func TestReadyzWhileDraining(t *testing.T) {
	s, base := newTest(t)
	draining := make(chan struct{})
	release := make(chan struct{})
	s.Go(Consume, "consumer", func(ctx context.Context) error {
		s.SetReady()
		<-ctx.Done()
		close(draining)
		<-release
		return nil
	})
	s.Go(Consume, "late starter", func(ctx context.Context) error {
		<-draining
		s.SetReady() // e.g. a component that became ready only now
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	<-draining
	if got := status(t, base+"/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining = %d, want 503", got)
	}
	if got := status(t, base+"/healthz"); got != http.StatusOK {
		t.Errorf("/healthz while draining = %d, want 200", got)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

// TestComponentEndsRun: a component that fails ends the whole group with
// its error (wrapped with its name), whatever its stage; one that returns
// nil (a one-shot task) ends it cleanly. Of several errors, the first is
// Run's.
func TestComponentEndsRun(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name    string
		stage   Stage
		err     error
		wantErr string
	}{
		{name: "consumer fails", stage: Consume, err: errBoom, wantErr: "run failing: boom"},
		{name: "writer fails", stage: Flush, err: errBoom, wantErr: "run failing: boom"},
		{name: "drain fails", stage: Drain, err: errBoom, wantErr: "run failing: boom"},
		{name: "task done", stage: Consume},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTest(t)
			var ev events
			for _, st := range []Stage{Consume, Drain, Flush} {
				s.Go(st, fmt.Sprint("stage ", st), func(ctx context.Context) error {
					<-ctx.Done()
					ev.add("stage %d stopped", st)
					if tt.err != nil {
						return errors.New("later error, not reported") // the first error wins
					}
					return nil
				})
			}
			s.Go(tt.stage, "failing", func(context.Context) error { return tt.err })
			// Not cancelled: the failing component alone ends the run.
			err := s.Run(t.Context())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Run = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.Is(err, errBoom)):
				t.Fatalf("Run = %v, want %q wrapping errBoom", err, tt.wantErr)
			}
			if got, want := ev.String(), "stage 0 stopped, stage 1 stopped, stage 2 stopped"; got != want {
				t.Errorf("stops = %s, want %s", got, want)
			}
		})
	}
}

// TestRunAdminAddrTaken: a taken admin address fails Run before any
// component starts.
func TestRunAdminAddrTaken(t *testing.T) {
	_, base := newTest(t)
	addr := strings.TrimPrefix(base, "http://")
	s, err := newService("test", telemetry.Config{AdminAddr: addr}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Go(Consume, "never", func(context.Context) error {
		t.Error("component started")
		return nil
	})
	if err := s.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "listen admin server") {
		t.Fatalf("Run = %v, want a listen error", err)
	}
}

// TestAdminAddrFile: with port 0 and an address file, ServeAdmin writes
// this process's pid and the address the kernel chose, which answers; an
// address file that cannot be written fails the start.
func TestAdminAddrFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "test.admin")
	s, err := newService("test", telemetry.Config{AdminAddr: "127.0.0.1:0", AdminAddrFile: path}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ServeAdmin(t.Context()); err != nil {
		t.Fatal(err)
	}
	pid, addr, err := telemetry.ReadAddrFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if pid != os.Getpid() {
		t.Errorf("pid = %d, want %d", pid, os.Getpid())
	}
	if strings.HasSuffix(addr, ":0") {
		t.Errorf("addr = %s, want the bound port", addr)
	}
	if got := status(t, "http://"+addr+"/healthz"); got != http.StatusOK {
		t.Errorf("GET /healthz at the file's address = %d, want 200", got)
	}

	bad, err := newService("test", telemetry.Config{AdminAddr: "127.0.0.1:0", AdminAddrFile: filepath.Join(t.TempDir(), "missing", "x.admin")}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if err := bad.ServeAdmin(t.Context()); err == nil || !strings.Contains(err.Error(), "admin address file") {
		t.Errorf("ServeAdmin with an unwritable address file = %v, want its error", err)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		isHelp  bool
		want    int
	}{
		{name: "default", want: 4},
		{name: "from env", env: map[string]string{"CRAWLER_WORKERS": "7"}, want: 7},
		{name: "flag wins", args: []string{"-workers", "9"}, env: map[string]string{"CRAWLER_WORKERS": "7"}, want: 9},
		{name: "bad env value", env: map[string]string{"CRAWLER_WORKERS": "many"}, wantErr: "CRAWLER_WORKERS"},
		{name: "unknown flag", args: []string{"-no-such-flag"}, wantErr: "no-such-flag"},
		{name: "invalid", args: []string{"-workers", "0"}, wantErr: "validate config: workers: 0 must be positive"},
		{name: "help", args: []string{"-h"}, isHelp: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var workers int
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.IntVar(&workers, "workers", 4, "workers")
			validate := func() error {
				if workers < 1 {
					return fmt.Errorf("workers: %d must be positive", workers)
				}
				return nil
			}
			err := ParseFlags(fs, tt.args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }, validate)
			switch {
			case tt.isHelp:
				if !errors.Is(err, flag.ErrHelp) {
					t.Fatalf("err = %v, want flag.ErrHelp", err)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			case workers != tt.want:
				t.Fatalf("workers = %d, want %d", workers, tt.want)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		code    int
		printed string
	}{
		{name: "clean", code: 0},
		{name: "help", err: fmt.Errorf("parse flags: %w", flag.ErrHelp), code: 0},
		{name: "failure", err: errors.New("open clickhouse: refused"), code: 1, printed: "svc: open clickhouse: refused\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if got := exitCode("svc", tt.err, &out); got != tt.code || out.String() != tt.printed {
				t.Errorf("exitCode = %d, printed %q; want %d, %q", got, out.String(), tt.code, tt.printed)
			}
		})
	}
}

func TestNewRejectsInvalidTelemetry(t *testing.T) {
	if _, err := New("test", telemetry.Config{LogLevel: "loud"}); err == nil || !strings.Contains(err.Error(), "log-level") {
		t.Fatalf("New = %v, want a log-level error", err)
	}
}

// testConfig is a Config as a service's internal/config defines one.
type testConfig struct{ Workers int }

func (c *testConfig) RegisterFlags(fs *flag.FlagSet) { fs.IntVar(&c.Workers, "workers", 4, "workers") }

func (c testConfig) Validate() error {
	if c.Workers < 1 {
		return fmt.Errorf("workers: %d must be positive", c.Workers)
	}
	return nil
}

// TestLoad: Load validates what was parsed, not the zero value.
func TestLoad(t *testing.T) {
	env := func(k string) (string, bool) { return "0", k == "CRAWLER_WORKERS" }
	if _, err := Load[testConfig]("test", nil, env); err == nil || !strings.Contains(err.Error(), "validate config: workers: 0") {
		t.Errorf("Load with CRAWLER_WORKERS=0 = %v, want a validation error", err)
	}
	c, err := Load[testConfig]("test", []string{"-workers", "3"}, env)
	if err != nil || c.Workers != 3 {
		t.Errorf("Load = %+v, %v; want 3 workers", c, err)
	}
}

// TestServeAdminBeforeRun: a service that waits for a dependency before
// Run answers /healthz (alive) and /readyz 503 meanwhile; Run keeps the
// same server, and Close stops one that Run never took over.
func TestServeAdminBeforeRun(t *testing.T) {
	s, base := newTest(t)
	if err := s.ServeAdmin(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := status(t, base+"/healthz"); got != http.StatusOK {
		t.Errorf("/healthz while starting = %d, want 200", got)
	}
	if got := status(t, base+"/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz while starting = %d, want 503", got)
	}
	ready := make(chan struct{})
	s.Go(Consume, "consumer", func(ctx context.Context) error {
		s.SetReady()
		close(ready)
		<-ctx.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-ready
	if got := status(t, base+"/readyz"); got != http.StatusOK {
		t.Errorf("/readyz once running = %d, want 200", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if stillServes(t, http.DefaultClient, base+"/healthz") {
		t.Error("admin server still answers after Run returned")
	}

	// Never run (its dependency never came): Close stops the server.
	s2, base2 := newTest(t)
	if err := s2.ServeAdmin(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := status(t, base2+"/healthz"); got != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", got)
	}
	s2.Close()
	if stillServes(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, base2+"/healthz") {
		t.Error("admin server still answers after Close")
	}
}
