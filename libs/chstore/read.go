package chstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

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
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne) {
		return true
	}
	// clickhouse-go formats some connection errors without wrapping them
	// ("handshake: failed to read packet from …: read: connection reset by
	// peer" from a server going down mid-handshake): their text is all
	// there is.
	msg := err.Error()
	for _, s := range lostConnection {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// lostConnection are the texts of errors of a connection that failed or
// was lost, as the operating system and clickhouse-go word them.
var lostConnection = []string{
	"connection reset by peer", "connection refused", "broken pipe", "i/o timeout",
	"failed to read packet", "use of closed network connection", "unexpected EOF",
}

// Read runs fn, a read query (the store's own or a service's over
// s.Conn(), what naming it in the one log line of an outage), again when it failed in a way
// isRetryableRead names — the server, or the replica a Distributed query
// read from, went away or cannot be reached — waiting with jittered
// back-off (up to 5 s) for as long as it takes, until ctx is done: a
// service whose ClickHouse is down pauses rather than exits. fn must be
// safe to run again: it starts its result afresh, or its callers tolerate
// rows delivered twice. Any other error (a bad query, a missing table) is
// returned at once.
func (s *Store) Read(ctx context.Context, what string, fn func() error) error {
	b := newWaitBackoff()
	recreated := false
	for {
		err := fn()
		if err == nil {
			s.avail.up()
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		if !isRetryableRead(err) {
			// Once only: a table still missing after the migrations is
			// a bug of the query, not a lost volume.
			if recreated || !s.recreate(ctx, what, err) {
				return err
			}
			recreated = true
			continue
		}
		s.avail.down(what, err)
		s.log.Debug("retrying clickhouse read", zap.String("query", what), zap.Error(err))
		if werr := b.Wait(ctx); werr != nil {
			return err
		}
	}
}

// WithSettings returns ctx carrying ClickHouse settings for the queries
// run with it, for packages that do not import the driver (numbers only:
// an 18.16 server takes no string setting over the native protocol).
func WithSettings(ctx context.Context, settings map[string]int) context.Context {
	s := make(clickhouse.Settings, len(settings))
	for k, v := range settings {
		s[k] = v
	}
	return clickhouse.Context(ctx, clickhouse.WithSettings(s))
}
