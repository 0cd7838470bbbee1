package failure

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		want      Kind
		retryable bool
	}{
		{name: "nil", err: nil, want: None},
		{name: "dns", err: fmt.Errorf("get: %w", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}), want: DNS, retryable: true},
		{name: "dns timeout", err: &net.DNSError{Err: "timeout", IsTimeout: true}, want: Timeout, retryable: true},
		{name: "connect", err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errors.New("connection refused"))}, want: Connect, retryable: true},
		{name: "deadline", err: fmt.Errorf("read body: %w", context.DeadlineExceeded), want: Timeout, retryable: true},
		{name: "refused address", err: &net.OpError{Op: "dial", Err: fmt.Errorf("dial 10.0.0.1: %w", ErrRefusedAddress)}, want: RefusedAddress},
		{name: "typed", err: fmt.Errorf("x: %w", &Error{Kind: RobotsDenied, Err: errors.New("no")}), want: RobotsDenied},
		{name: "status 503", err: &StatusError{Code: 503}, want: None, retryable: true},
		{name: "status 429", err: &StatusError{Code: 429}, want: None, retryable: true},
		{name: "status 501 retryable by class", err: &StatusError{Code: 501}, want: None, retryable: true},
		{name: "body too large", err: fmt.Errorf("read: %w", ErrBodyTooLarge), want: BodyTooLarge},
		{name: "invalid url", err: ErrInvalidURL, want: InvalidURL},
		{name: "too slow", err: fmt.Errorf("read body: %w", ErrTooSlow), want: TooSlow, retryable: true},
		{name: "bomb", err: fmt.Errorf("read body: %w", ErrDecompressionBomb), want: DecompressionBomb},
		{name: "redirect loop", err: &Error{Kind: RedirectLoop, Err: errors.New("loop")}, want: RedirectLoop},
		{name: "unknown", err: errors.New("unexpected EOF"), want: Other, retryable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KindOf(tt.err); got != tt.want {
				t.Fatalf("KindOf = %q, want %q", got, tt.want)
			}
			if got := IsRetryable(tt.err); got != tt.retryable {
				t.Fatalf("IsRetryable = %v, want %v", got, tt.retryable)
			}
		})
	}
}
