// Package chboot finds or starts the ClickHouse server of a local crawl:
// the server at a given address when it answers, otherwise a private server
// (chlocal) with its data under the crawl's data directory, installing
// clickhouse-server through the OS package manager when it is missing and
// that is possible.
package chboot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Server is the ClickHouse server a crawl uses.
type Server struct {
	Addr    string // native-protocol host:port
	Private bool   // started by Ensure (stopped by Stop)
	srv     *chlocal.Server

	// Watch's record of the private server's outages, for Weather.
	mu       sync.Mutex
	downAt   time.Time // when it died (zero: it runs)
	backAt   time.Time // when it last came back
	downWhy  string
	restarts int
}

// WeatherGrace is how long after a private server came back a service's
// exit is still blamed on its outage (Weather): services notice a
// returning server within their back-off, at most a few seconds.
const WeatherGrace = 30 * time.Second

// Watch restarts the private server whenever it dies on its own (not
// stopped by Stop), on the same ports and data directory, with back-off
// (1 s doubling to 10 s) until it answers again, printing each death and
// return to out, until ctx is done. It does nothing for an external
// server. Run it in its own goroutine.
func (s *Server) Watch(ctx context.Context, out io.Writer) {
	if s.srv == nil {
		return
	}
	for {
		exited := s.srv.Exited()
		if exited == nil {
			return // stopped on purpose
		}
		select {
		case <-ctx.Done():
			return
		case <-exited:
		}
		if ctx.Err() != nil || s.srv.Exited() == nil {
			return // stopped on purpose meanwhile
		}
		died := time.Now()
		s.mu.Lock()
		s.downAt, s.downWhy = died, "clickhouse exited"
		s.mu.Unlock()
		fmt.Fprintf(out, "clickhouse exited on its own (data in %s); the services wait for it; restarting it on %s\n", s.srv.Dir(), s.Addr)
		if !s.restart(ctx, out) {
			return
		}
		now := time.Now()
		s.mu.Lock()
		s.downAt, s.backAt, s.downWhy = time.Time{}, now, ""
		s.restarts++
		s.mu.Unlock()
		fmt.Fprintf(out, "clickhouse is back on %s after %s down; the services resume by themselves\n", s.Addr, now.Sub(died).Round(time.Millisecond))
	}
}

// restart starts the dead server again until it answers, or ctx is done
// (false).
func (s *Server) restart(ctx context.Context, out io.Writer) bool {
	retry := backoff.New(time.Second, 10*time.Second)
	for {
		err := s.srv.Restart(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		fmt.Fprintf(out, "clickhouse restart failed (%v); trying again in %s\n", err, retry.Next())
		if retry.Wait(ctx) != nil {
			return false
		}
	}
}

// Weather says why a service's exit now is the private server's outage,
// not the service's fault ("" when it is not): the server is down, or came
// back within WeatherGrace. The launcher's supervisors do not count such
// an exit toward a crash loop.
func (s *Server) Weather() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.downAt.IsZero():
		return fmt.Sprintf("%s %s ago, being restarted", s.downWhy, time.Since(s.downAt).Round(time.Second))
	case !s.backAt.IsZero() && time.Since(s.backAt) < WeatherGrace:
		return fmt.Sprintf("clickhouse came back %s ago", time.Since(s.backAt).Round(time.Second))
	}
	return ""
}

// Restarts returns how many times Watch restarted the private server.
func (s *Server) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Stop stops a private server; it does nothing for an external one.
func (s *Server) Stop() error {
	if s.srv == nil {
		return nil
	}
	if err := s.srv.Stop(); err != nil {
		return fmt.Errorf("stop clickhouse: %w", err)
	}
	return nil
}

// Pid returns the process id of a private server, 0 for an external one.
func (s *Server) Pid() int {
	if s.srv == nil {
		return 0
	}
	return s.srv.Pid()
}

// Ensure returns a ClickHouse server: the one of external (its addresses,
// credentials and TLS) when it has an address and answers, otherwise a
// private server started with its data in dataDir/clickhouse. An external
// server reached with a password or TLS that does not answer is an error,
// not a reason to crawl into a private server instead: a refused
// credential or certificate must be seen. Progress notes go to out.
func Ensure(ctx context.Context, external chstore.Config, dataDir string, out io.Writer) (*Server, error) {
	return EnsureWith(ctx, external, dataDir, chlocal.Options{}, out)
}

// EnsureWith is Ensure with the options a private server starts with (an
// external server is used as it is).
func EnsureWith(ctx context.Context, external chstore.Config, dataDir string, private chlocal.Options, out io.Writer) (*Server, error) {
	if addr := strings.Join(external.Addr, ","); addr != "" {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := chstore.Ping(pctx, external)
		cancel()
		if err == nil {
			return &Server{Addr: addr}, nil
		}
		if external.PasswordFile != "" || external.Password != "" || external.TLS.On() || external.Username != chstore.DefaultUsername {
			return nil, fmt.Errorf("clickhouse at %s: %w", addr, err)
		}
		fmt.Fprintf(out, "clickhouse at %s does not answer (%v); starting a private server\n", addr, err)
	}
	if _, err := chlocal.FindBinary(); err != nil {
		if !errors.Is(err, chlocal.ErrNotInstalled) {
			return nil, fmt.Errorf("find clickhouse: %w", err)
		}
		fmt.Fprintln(out, "clickhouse-server not found; installing it with the OS package manager")
		if err := chlocal.Install(ctx); err != nil {
			return nil, fmt.Errorf("install clickhouse (install the clickhouse-server package, e.g. apt-get install clickhouse-server): %w", err)
		}
		if _, err := chlocal.FindBinary(); err != nil {
			return nil, fmt.Errorf("find clickhouse after install: %w", err)
		}
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "clickhouse"))
	if err != nil {
		return nil, fmt.Errorf("resolve clickhouse data dir: %w", err)
	}
	srv, err := chlocal.StartWith(ctx, dir, private)
	if err != nil {
		return nil, fmt.Errorf("start private clickhouse: %w", err)
	}
	return &Server{Addr: srv.Addr(), Private: true, srv: srv}, nil
}
