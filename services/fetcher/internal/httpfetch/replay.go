package httpfetch

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
)

// ErrReplayRefused is the failure of a request whose connection closed
// after the request was sent, when net/http would have sent it again on
// another connection: the site may have received it, so the fetcher's own
// retry (the host's delay, back-off and turn) decides when to ask again.
var ErrReplayRefused = errors.New("the connection closed after the request was sent; not sent again on another connection")

// replayGuard refuses net/http's own replay of a request. The HTTP/1
// transport sends a GET again, on another connection and at once, when a
// reused connection closes before the first byte of the answer
// (persistConn.shouldRetryRequest): a request the site may have received
// reaches it a second time within a millisecond, and the politeness engine
// never saw it. The guard watches the request's connections: when the
// transport takes another one after bytes of the request went out on the
// previous one, that is a replay, and the new connection is closed before
// anything is written on it, and the request's context is cancelled so
// that the transport dials no other. A retry after nothing was written
// (the transport found the connection closed under it: the fetcher's own
// Release of a host's idle connection, a server's idle timeout) is let
// through: nothing of the first attempt reached the site. The bytes are
// counted on the connections the fetcher dials (keptConn, countedConn);
// the trace's WroteRequest cannot tell, since it fires before the
// transport flushes its buffer. HTTP/2 retries only requests the server
// said it did not process (GOAWAY past the stream, REFUSED_STREAM), so its
// connections are let through.
type replayGuard struct {
	cancel  context.CancelCauseFunc
	cur     writeCounter // the connection the request was last given
	before  int64        // its bytes written when it was given
	refused atomic.Bool
}

// writeCounter is a connection that counts the bytes written to it.
type writeCounter interface {
	bytesWritten() int64
}

// guardReplay returns req with the guard's hook in its trace. cancel
// cancels req's context.
func guardReplay(req *http.Request, cancel context.CancelCauseFunc) (*http.Request, *replayGuard) {
	g := &replayGuard{cancel: cancel}
	trace := &httptrace.ClientTrace{GotConn: g.gotConn}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), g
}

// gotConn runs in the transport before the request is written on the
// connection. The transport calls the hooks of one request one at a time.
func (g *replayGuard) gotConn(info httptrace.GotConnInfo) {
	if info.Conn == nil {
		return
	}
	conn := info.Conn
	if tc, ok := conn.(*tls.Conn); ok {
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			return
		}
		conn = tc.NetConn()
	}
	next, _ := conn.(writeCounter)
	prev, before := g.cur, g.before
	g.cur = next
	if next != nil {
		g.before = next.bytesWritten()
	}
	if prev == nil || prev.bytesWritten() == before {
		return // the first connection, or nothing went out on the previous
	}
	g.refused.Store(true)
	g.cancel(ErrReplayRefused)
	_ = info.Conn.Close() // nothing is written on it: the write fails at once
}

// Refused reports whether the guard refused a replay.
func (g *replayGuard) Refused() bool { return g.refused.Load() }
