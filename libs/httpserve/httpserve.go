// Package httpserve runs an http.Server for the life of a context, the one
// listen → serve → graceful shutdown lifecycle of every HTTP server a
// service runs (the admin server, the proxypool's API, the seeder's
// crawl-jobs API).
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// DefaultShutdownTimeout bounds a graceful shutdown when Server.ShutdownTimeout is zero.
const DefaultShutdownTimeout = 5 * time.Second

// Server serves one http.Server on one address. Create with New; safe for
// concurrent use; Run at most once.
type Server struct {
	name    string
	addr    string
	srv     *http.Server
	log     *zap.Logger
	timeout time.Duration

	mu sync.Mutex
	ln net.Listener
}

// New returns a server for srv (its Handler and timeouts; Addr is ignored)
// that will listen on addr. name ("admin server", "api") names it in errors
// ("serve api: …") and in the log line "<name> listening". shutdownTimeout
// bounds the graceful shutdown (0: DefaultShutdownTimeout); connections
// still open then are closed.
func New(name, addr string, srv *http.Server, shutdownTimeout time.Duration, log *zap.Logger) *Server {
	if shutdownTimeout <= 0 {
		shutdownTimeout = DefaultShutdownTimeout
	}
	return &Server{name: name, addr: addr, srv: srv, log: log, timeout: shutdownTimeout}
}

// Listen binds the listener, so that a start fails early on a taken port
// and the address is known before Run. Calling it again returns the address
// already bound.
func (s *Server) Listen(ctx context.Context) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr(), nil
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s %s: %w", s.name, s.addr, err)
	}
	s.ln = ln
	return ln.Addr(), nil
}

// Run listens (unless Listen was called) and serves until ctx is done, then
// shuts down gracefully within the shutdown timeout and closes what is
// left. It returns nil after a shutdown caused by ctx, and an error when
// serving fails or the graceful shutdown ran out of time.
func (s *Server) Run(ctx context.Context) error {
	addr, err := s.Listen(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	s.log.Info(s.name+" listening", zap.String("addr", addr.String()))

	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", s.name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	shutErr := s.srv.Shutdown(sctx)
	if shutErr != nil {
		_ = s.srv.Close() // deadline passed: drop the remaining connections
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", s.name, err)
	}
	if shutErr != nil {
		return fmt.Errorf("shut down %s: %w", s.name, shutErr)
	}
	return nil
}
