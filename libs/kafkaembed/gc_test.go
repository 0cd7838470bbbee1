package kafkaembed

import (
	"runtime/debug"
	"testing"
)

// TestApplyGCPercent: the broker's target replaces Go's default, and a
// GOGC in the environment keeps its own.
func TestApplyGCPercent(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)

	t.Setenv("GOGC", "")
	ApplyGCPercent()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("without GOGC: collector target %d, want %d", got, GCPercent)
	}
	t.Setenv("GOGC", "80")
	ApplyGCPercent()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: collector target %d, want it left at 100", got)
	}
}
