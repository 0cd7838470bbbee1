package telemetry

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"
)

// TestStartProfiles writes a CPU profile of the work between start and stop
// and an allocation profile that sees the allocations made.
func TestStartProfiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fetcher-0")
	stop, err := StartProfiles(Config{ProfileDir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var sink [][]byte
	for i := range 2000 {
		sink = append(sink, make([]byte, 4096+i))
	}
	stop()
	if len(sink) != 2000 {
		t.Fatal("allocations optimized away")
	}
	// pprof writes gzip-compressed protocol buffers; the allocation
	// profile holds the 2000 allocations' stack.
	for _, tt := range []struct {
		name string
		min  int
	}{{CPUProfileFile, 20}, {AllocsProfileFile, 200}} {
		b, err := os.ReadFile(filepath.Join(dir, tt.name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < tt.min || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes starting %x, want a gzip-compressed profile of at least %d bytes", tt.name, len(b), b[:min(len(b), 2)], tt.min)
		}
	}
}

func TestStartProfilesOff(t *testing.T) {
	dir := t.TempDir()
	stop, err := StartProfiles(Config{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("wrote %d files without a profile dir", len(entries))
	}
}

func TestApplyMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	ApplyMemoryLimit(Config{})
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("limit %d after an unset --memory-limit, want it left at %d", got, before)
	}
	ApplyMemoryLimit(Config{MemoryLimit: 96 << 20})
	if got := debug.SetMemoryLimit(-1); got != 96<<20 {
		t.Errorf("limit %d, want %d", got, 96<<20)
	}
	beforeGC := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(beforeGC) })
	ApplyMemoryLimit(Config{GCPercent: 40})
	if got := debug.SetGCPercent(100); got != 40 {
		t.Errorf("gc percent %d after ApplyMemoryLimit with 40", got)
	}
	ApplyMemoryLimit(Config{})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("gc percent %d after ApplyMemoryLimit without one, want GOGC's 100 kept", got)
	}
	if err := (Config{GCPercent: -1}).Validate(); err == nil {
		t.Error("negative gc percent validates")
	}
	if err := (Config{MemoryLimit: -1}).Validate(); err == nil {
		t.Error("a negative memory limit validated")
	}
}
