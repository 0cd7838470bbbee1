package keywords_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind (goleak retries
// for a while, which covers goroutines that are exiting).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
