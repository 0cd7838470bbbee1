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
// after the request was written, when net/http would have sent it again
// on another connection: the site may have received it, so the fetcher's
// own retry (the host's delay, back-off and turn) decides when to ask
// again.
var ErrReplayRefused = errors.New("the connection closed after the request was sent; not sent again on another connection")

// replayGuard refuses net/http's own replay of a request. The HTTP/1
// transport sends a GET again, on another connection and at once, when a
// reused connection closes before the first byte of the answer
// (persistConn.shouldRetryRequest): a request the site may have received
// reaches it a second time within a millisecond, and the politeness engine
// never saw it. The guard watches the request's connections: a second one
// after the request was written is a replay, and is closed before anything
// is written on it, and the request's context is cancelled so that the
// transport dials no other. A second connection before the request was
// written (the transport's retry of a request it could not write at all)
// is let through: nothing of the first attempt can have reached the site.
// HTTP/2 retries only requests the server said it did not process (GOAWAY
// past the stream, REFUSED_STREAM), so its connections are not closed.
type replayGuard struct {
	cancel  context.CancelCauseFunc
	conns   int
	written atomic.Bool // headers or the request were written on a connection
	refused atomic.Bool
}

// guardReplay returns req with the guard's hooks in its trace. cancel
// cancels req's context.
func guardReplay(req *http.Request, cancel context.CancelCauseFunc) (*http.Request, *replayGuard) {
	g := &replayGuard{cancel: cancel}
	trace := &httptrace.ClientTrace{
		GotConn:      g.gotConn,
		WroteHeaders: func() { g.written.Store(true) },
		WroteRequest: func(httptrace.WroteRequestInfo) { g.written.Store(true) },
	}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace)), g
}

// gotConn runs in the transport before the request is written on the
// connection. The transport calls the hooks of one request one at a time.
func (g *replayGuard) gotConn(info httptrace.GotConnInfo) {
	g.conns++
	if g.conns == 1 || !g.written.Load() || info.Conn == nil {
		return
	}
	if tc, ok := info.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
		return
	}
	g.refused.Store(true)
	g.cancel(ErrReplayRefused)
	_ = info.Conn.Close() // nothing is written on it: the write fails at once
}

// Refused reports whether the guard refused a replay.
func (g *replayGuard) Refused() bool { return g.refused.Load() }
