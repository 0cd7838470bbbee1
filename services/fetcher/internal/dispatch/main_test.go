package dispatch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a dispatcher or a turn
// running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
