package chstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
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
		// clickhouse-go's handshake formats its cause with %s.
		{"reset in the handshake", fmt.Errorf("query content_seen: %w", errors.New("handshake: failed to read packet from 127.0.0.1:41567 (conn_id=255, auth_db=e2e): read: read tcp 127.0.0.1:47518->127.0.0.1:41567: read: connection reset by peer")), true},
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

// TestReadWaits: a read that fails because the server cannot be reached
// is tried again, with back-off, for as long as it takes; the outage is
// logged once when it starts and once when it ends, and Unavailable says
// so meanwhile. Any other error is returned at once. On synctest's clock:
// the back-off is real time otherwise.
func TestReadWaits(t *testing.T) {
	gone := &clickhouse.Exception{Code: 32, Message: "Attempt to read after eof"}
	tests := []struct {
		name      string
		fails     int   // attempts that fail before one succeeds
		err       error // what they fail with
		wantCalls int
		wantErr   bool
		wantLogs  []string
	}{
		{name: "first attempt", fails: 0, err: gone, wantCalls: 1},
		{name: "replica gone twice", fails: 2, err: gone, wantCalls: 3,
			wantLogs: []string{"clickhouse unavailable, waiting for it; nothing is acknowledged meanwhile", "clickhouse available again"}},
		{name: "down for a minute", fails: 20, err: gone, wantCalls: 21,
			wantLogs: []string{"clickhouse unavailable, waiting for it; nothing is acknowledged meanwhile", "clickhouse available again"}},
		{name: "not retryable", fails: 1, err: &clickhouse.Exception{Code: 60}, wantCalls: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core, logs := observer.New(zap.DebugLevel)
				log := zap.New(core)
				s := &Store{log: log, avail: &availability{log: log, addr: []string{"ch-1:9000", "ch-2:9000"}}}
				calls := 0
				err := s.Read(t.Context(), "test", func() error {
					calls++
					if calls <= tt.fails {
						if waiting, _, _ := s.Unavailable(); calls > 1 && !waiting {
							t.Errorf("attempt %d: Unavailable says the store is not waiting", calls)
						}
						return tt.err
					}
					return nil
				})
				if (err != nil) != tt.wantErr || calls != tt.wantCalls {
					t.Errorf("read: err %v after %d calls, want error %v after %d", err, calls, tt.wantErr, tt.wantCalls)
				}
				var got []string
				for _, e := range logs.All() {
					if e.Level >= zap.InfoLevel {
						got = append(got, e.Message)
					}
				}
				if !slices.Equal(got, tt.wantLogs) {
					t.Errorf("logged %q, want %q", got, tt.wantLogs)
				}
				for _, e := range logs.FilterLevelExact(zap.WarnLevel).All() {
					// the line names the servers it waits for
					if addr := fmt.Sprint(e.ContextMap()["clickhouse_addr"]); addr != "[ch-1:9000 ch-2:9000]" {
						t.Errorf("%q names clickhouse_addr %s, want both servers", e.Message, addr)
					}
				}
				if waiting, _, _ := s.Unavailable(); waiting {
					t.Error("still waiting after the read returned")
				}
			})
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		s := &Store{log: zap.NewNop(), avail: &availability{log: zap.NewNop()}}
		calls := 0
		err := s.Read(ctx, "test", func() error {
			calls++
			cancel()
			return gone
		})
		if err == nil || calls != 1 {
			t.Errorf("read with a cancelled context: err %v after %d calls, want the error after 1", err, calls)
		}
	})
}

func TestIsAuthError(t *testing.T) {
	for code, want := range map[int32]bool{516: true, 192: true, 193: true, 194: true, 210: false, 60: false} {
		if got := isAuthError(fmt.Errorf("insert: %w", &clickhouse.Exception{Code: code})); got != want {
			t.Errorf("isAuthError(code %d) = %v, want %v", code, got, want)
		}
	}
}
