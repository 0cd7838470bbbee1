package chboot

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// lockedBuffer is a bytes.Buffer safe for Watch's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWatchRestartsDeadServer: a private server killed (SIGKILL) is
// restarted by Watch on the same address with its data, the outage is
// printed and reported as weather; a server stopped on purpose is not
// restarted, and Watch returns.
func TestWatchRestartsDeadServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var out lockedBuffer
	s, err := Ensure(ctx, chstore.Config{}, t.TempDir(), &out)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	if !s.Private {
		t.Fatal("Ensure without an address started no private server")
	}
	if w := s.Weather(); w != "" {
		t.Errorf("weather %q before any outage", w)
	}
	done := make(chan struct{})
	go func() { s.Watch(ctx, &out); close(done) }()

	pid := s.Pid()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sawDown := false
	for s.Restarts() == 0 {
		sawDown = sawDown || strings.Contains(s.Weather(), "being restarted")
		select {
		case <-ctx.Done():
			t.Fatalf("server not restarted: %v\n%s", ctx.Err(), out.String())
		case <-tick.C:
		}
	}
	if !sawDown {
		t.Error("the outage was never reported as weather while the server was down")
	}
	if w := s.Weather(); !strings.Contains(w, "came back") {
		t.Errorf("weather right after the return = %q, want it to say the server came back", w)
	}
	if s.Pid() == pid || s.Pid() == 0 {
		t.Errorf("pid %d after the restart, was %d", s.Pid(), pid)
	}
	if err := chlocal.Ping(ctx, s.Addr); err != nil {
		t.Errorf("restarted server does not answer on %s: %v", s.Addr, err)
	}
	printed := out.String()
	for _, want := range []string{"clickhouse exited on its own", "clickhouse is back on " + s.Addr} {
		if !strings.Contains(printed, want) {
			t.Errorf("output lacks %q:\n%s", want, printed)
		}
	}

	// Stopped on purpose: not restarted.
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Watch did not return after Stop")
	}
	if n := s.Restarts(); n != 1 {
		t.Errorf("%d restarts, want 1 (a stop on purpose is not restarted)", n)
	}
}
