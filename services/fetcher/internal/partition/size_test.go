package partition

import (
	"testing"
	"unsafe"
)

// TestTaskIsCompact: a queued request costs its record's value and this
// struct (see Task); a field added here is paid for every request a
// fetcher holds, thousands of them.
func TestTaskIsCompact(t *testing.T) {
	if n := unsafe.Sizeof(Task{}); n > 240 {
		t.Errorf("a task is %d bytes, want at most 240: keep turn-only state out of queued requests", n)
	}
}
