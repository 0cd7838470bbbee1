package chstore

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/zap"
)

// ClickHouse error codes of a server, or a replica a Distributed query
// reads, that went away in the middle of a query.
const (
	codeReadAfterEOF       = 32  // ATTEMPT_TO_READ_AFTER_EOF: "while receiving packet from <replica>"
	codeSocketTimeout      = 209 // SOCKET_TIMEOUT
	codeNetworkError       = 210 // NETWORK_ERROR
	codeAllConnectionTries = 279 // ALL_CONNECTION_TRIES_FAILED
)

// readBackoff is the wait before each new attempt of a read.
var readBackoff = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond}

// isRetryableRead reports a read that failed because a server, or the
// connection to it, went away in the middle of the query: in a cluster, a
// replica that died while it answered its share of a Distributed query.
// A new attempt goes to another replica (or another server of
// Config.Addr) and may succeed. Any other error (a bad query, a missing
// table) is not retried.
func isRetryableRead(err error) bool {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeReadAfterEOF, codeSocketTimeout, codeNetworkError, codeAllConnectionTries:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

// read runs fn, a read query, again after a short wait when it failed in a
// way isRetryableRead names, at most len(readBackoff) more times. fn must
// be safe to run again: it starts its result afresh, or its callers
// tolerate rows delivered twice.
func (s *Store) read(ctx context.Context, what string, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || attempt == len(readBackoff) || ctx.Err() != nil || !isRetryableRead(err) {
			return err
		}
		s.log.Warn("retrying clickhouse read", zap.String("query", what), zap.Int("attempt", attempt+1), zap.Error(err))
		t := time.NewTimer(readBackoff[attempt])
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
