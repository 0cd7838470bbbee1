// Package chlocal runs a private ClickHouse server for local crawls and
// tests: its own config, data directory and loopback ports, started from
// the clickhouse binary on the PATH.
package chlocal

import (
	"context"
	"errors"
)

// ErrNotInstalled means no ClickHouse server binary was found; the error
// text says what to install.
var ErrNotInstalled = errors.New("clickhouse server not installed (apt-get install clickhouse-server)")

// FindBinary returns the command that starts a server: clickhouse-server,
// or "clickhouse server" for the single-binary distribution.
func FindBinary() ([]string, error) { panic("unimplemented") }

// Install installs clickhouse-server with the OS package manager when
// running as root on a system with apt-get; otherwise it returns
// ErrNotInstalled.
func Install(ctx context.Context) error { panic("unimplemented") }

// Server is a running private ClickHouse server.
type Server struct{}

// Start starts a server with its data under dir, listening on free loopback
// ports, and waits until it answers queries.
func Start(ctx context.Context, dir string) (*Server, error) { panic("unimplemented") }

// Addr returns the native-protocol address (host:port).
func (s *Server) Addr() string { panic("unimplemented") }

// HTTPAddr returns the HTTP interface address (host:port).
func (s *Server) HTTPAddr() string { panic("unimplemented") }

// Stop stops the server and waits for it to exit.
func (s *Server) Stop() error { panic("unimplemented") }

// Ping reports whether a ClickHouse server answers on the native address.
func Ping(ctx context.Context, addr string) error { panic("unimplemented") }
