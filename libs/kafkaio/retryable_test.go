package kafkaio_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// TestRetryableDialTimeout: a broker that does not answer (a host cut off
// from the network) fails a dial with a timeout, which Go's net errors
// report as context.DeadlineExceeded too; that is weather and retried,
// where the caller's own cancelled or expired context is not. The dial
// here has a deadline already past, so it fails at once without a packet.
func TestRetryableDialTimeout(t *testing.T) {
	_, dialErr := (&net.Dialer{Deadline: time.Now().Add(-time.Second)}).DialContext(t.Context(), "tcp", "127.0.0.1:9")
	if dialErr == nil {
		t.Fatal("a dial past its deadline succeeded")
	}
	if !errors.Is(dialErr, context.DeadlineExceeded) {
		t.Fatalf("dial error %v is not DeadlineExceeded: the case this test is about does not arise", dialErr)
	}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"dial timeout", dialErr, true},
		{"dial timeout wrapped as kafka-go does", fmt.Errorf("failed to dial: failed to open connection to 127.0.0.1:9: %w", dialErr), true},
		{"the caller's deadline", fmt.Errorf("write: %w", context.DeadlineExceeded), false},
		{"the caller cancelled", fmt.Errorf("write: %w", context.Canceled), false},
	} {
		if got := kafkaio.IsRetryable(c.err); got != c.want {
			t.Errorf("%s: IsRetryable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
