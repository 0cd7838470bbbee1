package frontier

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a pump running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
