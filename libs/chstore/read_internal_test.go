package chstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/zap"
)

func TestIsRetryableRead(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"replica gone mid-query", fmt.Errorf("read content_seen: %w", &clickhouse.Exception{Code: 32, Message: "Attempt to read after eof: while receiving packet from 127.0.0.1:9000"}), true},
		{"network error", &clickhouse.Exception{Code: 210, Message: "Connection refused"}, true},
		{"all connection tries failed", &clickhouse.Exception{Code: 279}, true},
		{"unknown table", &clickhouse.Exception{Code: 60, Message: "Table crawler.x doesn't exist"}, false},
		{"syntax error", &clickhouse.Exception{Code: 62}, false},
		{"connection closed", fmt.Errorf("read: %w", io.EOF), true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"other", errors.New("scan: converting String to *uint64 is unsupported"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isRetryableRead(tt.err); got != tt.want {
				t.Errorf("isRetryableRead(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestReadRetries(t *testing.T) {
	gone := &clickhouse.Exception{Code: 32, Message: "Attempt to read after eof"}
	tests := []struct {
		name      string
		fails     int   // attempts that fail before one succeeds
		err       error // what they fail with
		wantCalls int
		wantErr   bool
	}{
		{name: "first attempt", fails: 0, err: gone, wantCalls: 1},
		{name: "replica gone twice", fails: 2, err: gone, wantCalls: 3},
		{name: "gone for good", fails: 5, err: gone, wantCalls: 3, wantErr: true},
		{name: "not retryable", fails: 1, err: &clickhouse.Exception{Code: 60}, wantCalls: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Store{log: zap.NewNop()}
			calls := 0
			err := s.read(t.Context(), "test", func() error {
				calls++
				if calls <= tt.fails {
					return tt.err
				}
				return nil
			})
			if (err != nil) != tt.wantErr || calls != tt.wantCalls {
				t.Errorf("read: err %v after %d calls, want error %v after %d", err, calls, tt.wantErr, tt.wantCalls)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := &Store{log: zap.NewNop()}
		calls := 0
		err := s.read(ctx, "test", func() error {
			calls++
			cancel()
			return gone
		})
		if err == nil || calls != 1 {
			t.Errorf("read with a cancelled context: err %v after %d calls, want the error after 1", err, calls)
		}
	})
}
