package supervise

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func shSpec(t *testing.T, name, script string) Spec {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	return Spec{Name: name, Path: sh, Args: []string{"-c", script}, LogFile: filepath.Join(t.TempDir(), name+".log")}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name    string
		script  string
		wantErr string
	}{
		{"clean exit on term", `trap 'echo bye; exit 0' TERM; echo trapped; while :; do sleep 0.05; done`, ""},
		{"exit code on term", `trap 'exit 3' TERM; echo trapped; while :; do sleep 0.05; done`, "exit status 3"},
		{"ignores term", `trap '' TERM; echo trapped; while :; do sleep 0.05; done`, "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Start(shSpec(t, "svc", tt.script))
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			waitLog(t, p, "trapped", 1) // the shell has installed its trap
			err = p.Stop(500 * time.Millisecond)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("stop: %v, want error containing %q", err, tt.wantErr)
			}
			if p.Running() {
				t.Fatal("still running after Stop")
			}
		})
	}
}

func TestKillRestartUsage(t *testing.T) {
	// Burns some CPU, then waits.
	p, err := Start(shSpec(t, "busy", `i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo started; while :; do sleep 0.05; done`))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	waitLog(t, p, "started", 1) // the CPU is burnt
	if err := p.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if p.Err() == nil {
		t.Fatal("killed process reports a clean exit")
	}
	u1 := p.Usage()
	if u1.Starts != 1 || u1.MaxRSS <= 0 || u1.Faults <= 0 {
		t.Fatalf("usage after one run: %+v", u1)
	}
	if err := p.Restart(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := p.Restart(); err == nil {
		t.Fatal("restart of a running process succeeded")
	}
	waitLog(t, p, "started", 2)
	if err := p.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	u2 := p.Usage()
	if u2.Starts != 2 || u2.CPU < u1.CPU || u2.MaxRSS < u1.MaxRSS || u2.Faults <= u1.Faults {
		t.Fatalf("usage did not accumulate: %+v then %+v", u1, u2)
	}
	if got := p.LogTail(10); strings.Count(got, "started") != 2 {
		t.Fatalf("log tail %q, want two runs", got)
	}
}

// waitLog waits until the process's log holds n lines with what: the
// line the script writes once it is where the test wants it.
func waitLog(t *testing.T, p *Process, what string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d× %q in the log", n, what), func() bool {
		return strings.Count(p.LogTail(20), what) >= n
	})
}

// TestProcUsage reads this test process's own CPU time and peak memory,
// after burning some of each.
func TestProcUsage(t *testing.T) {
	buf := make([]byte, 32<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	deadline := time.Now().Add(150 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		buf[x%len(buf)]++
	}
	u, err := ProcUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// touching 32 MiB of new memory faults in at least 32 MiB of pages
	if u.CPU < 100*time.Millisecond || u.MaxRSS < 32<<20 || u.Faults < 32<<20/int64(os.Getpagesize()) {
		t.Errorf("usage %+v: want at least 100ms of CPU, 32 MiB peak and a fault per page of 32 MiB", u)
	}
	if _, err := ProcUsage(1 << 30); err == nil {
		t.Error("usage of a process that does not exist: no error")
	}
}

// TestUsagePeakIsTheChilds shows that a child's peak RSS is its own: a
// small shell started while this process holds 128 MiB reports far less,
// where its rusage maxrss would report at least the 128 MiB (see PeakRSS).
func TestUsagePeakIsTheChilds(t *testing.T) {
	ballast := make([]byte, 128<<20)
	for i := 0; i < len(ballast); i += os.Getpagesize() {
		ballast[i] = 1
	}
	parent, err := PeakRSS(os.Getpid())
	if err != nil {
		t.Skipf("no VmHWM here: %v", err)
	}
	p, err := Start(shSpec(t, "small", `echo started; while :; do sleep 0.05; done`))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	waitLog(t, p, "started", 1)
	if err := p.Stop(time.Second); err == nil {
		t.Fatal("stop: the shell exited cleanly on SIGTERM, want killed by it")
	}
	u := p.Usage()
	if u.MaxRSS <= 0 || u.MaxRSS >= 64<<20 || parent < 128<<20 {
		t.Fatalf("child's peak RSS %d B with this process at %d B: want the child's own, above 0 and far below 128 MiB", u.MaxRSS, parent)
	}
	ballast[0]++ // the ballast stays live until the child has run
}

// TestBuildStatic builds a command as the launcher does and checks that
// the binary is static: no program interpreter (the dynamic loader) to
// map libc into every process of a crawl.
func TestBuildStatic(t *testing.T) {
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := BuildTools(t.Context(), root, t.TempDir(), []string{"websim"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bins["websim"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("%s is dynamically linked: it has a program interpreter", bins["websim"])
		}
	}
}
