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
	"time"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Server is the ClickHouse server a crawl uses.
type Server struct {
	Addr    string // native-protocol host:port
	Private bool   // started by Ensure (stopped by Stop)
	srv     *chlocal.Server
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
	srv, err := chlocal.Start(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("start private clickhouse: %w", err)
	}
	return &Server{Addr: srv.Addr(), Private: true, srv: srv}, nil
}
