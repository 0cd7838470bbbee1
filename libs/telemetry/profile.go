package telemetry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"

	"go.uber.org/zap"
)

// Profile file names in Config.ProfileDir.
const (
	CPUProfileFile    = "cpu.pprof"
	AllocsProfileFile = "allocs.pprof"
)

// StartProfiles starts a CPU profile of the whole run in c.ProfileDir (a
// benchmark's way to profile every process of a crawl from its first
// request to its last) and returns the function that stops it and writes
// the allocation profile. Without a ProfileDir it does nothing. The stop
// function logs what it could not write; call it once, at exit.
func StartProfiles(c Config, log *zap.Logger) (stop func(), err error) {
	if c.ProfileDir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(c.ProfileDir, 0o755); err != nil {
		return nil, fmt.Errorf("create profile dir: %w", err)
	}
	f, err := os.Create(filepath.Join(c.ProfileDir, CPUProfileFile))
	if err != nil {
		return nil, fmt.Errorf("create cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close() // nothing was written to it
		return nil, fmt.Errorf("start cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := errors.Join(f.Close(), writeAllocs(c.ProfileDir)); err != nil {
			log.Warn("profiles not written", zap.String("dir", c.ProfileDir), zap.Error(err))
		}
	}, nil
}

func writeAllocs(dir string) error {
	a, err := os.Create(filepath.Join(dir, AllocsProfileFile))
	if err != nil {
		return fmt.Errorf("create allocs profile: %w", err)
	}
	return errors.Join(pprof.Lookup("allocs").WriteTo(a, 0), a.Close())
}

// ApplyMemoryLimit sets the Go runtime's soft memory limit to
// c.MemoryLimit when it is set (a container's limit, less headroom for
// what the runtime does not count) and the collector's target to
// c.GCPercent when that is set; otherwise each stays as the GOMEMLIMIT
// and GOGC variables set it.
func ApplyMemoryLimit(c Config) {
	if c.MemoryLimit > 0 {
		debug.SetMemoryLimit(c.MemoryLimit)
	}
	if c.GCPercent > 0 {
		debug.SetGCPercent(c.GCPercent)
	}
}
