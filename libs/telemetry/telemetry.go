// Package telemetry builds the observability every service shares: a zap
// logger with the field constructors all services use, a per-process
// Prometheus registry, and the admin HTTP server (/metrics, /healthz,
// /readyz).
package telemetry

import (
	"context"
	"flag"
	"net"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config is the observability configuration of a service.
type Config struct {
	LogLevel  string // flag log-level: debug, info, warn, error (default info)
	LogFormat string // flag log-format: json or console (default json)
	AdminAddr string // flag admin-addr: listen address of the admin server (default 127.0.0.1:0)
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) { panic("unimplemented") }

// Validate reports a configuration error.
func (c Config) Validate() error { panic("unimplemented") }

// NewLogger returns a logger for service with the configured level and format.
func NewLogger(c Config, service string) (*zap.Logger, error) { panic("unimplemented") }

// NewRegistry returns a fresh registry with the Go and process collectors
// registered. Never the default registry.
func NewRegistry() *prometheus.Registry { panic("unimplemented") }

// Registerer returns reg wrapped so every metric name gets the prefix
// "crawler_<service>_"; components register metrics like
// "pages_fetched_total" on it.
func Registerer(reg prometheus.Registerer, service string) prometheus.Registerer {
	panic("unimplemented")
}

// Field constructors: the same key for the same thing in every service.
func URL(u string) zap.Field          { return zap.String("url", u) }
func Host(h string) zap.Field         { return zap.String("host", h) }
func Crawl(id string) zap.Field       { return zap.String("crawl", id) }
func Topic(t string) zap.Field        { return zap.String("topic", t) }
func Partition(p int) zap.Field       { return zap.Int("partition", p) }
func Offset(o int64) zap.Field        { return zap.Int64("offset", o) }
func ErrorKind(kind string) zap.Field { return zap.String("error_kind", kind) }
func Status(code int) zap.Field       { return zap.Int("status", code) }

// Check is a readiness check; a non-nil error makes /readyz answer 503.
type Check func(ctx context.Context) error

// Admin is the admin HTTP server of a service. Create with NewAdmin, add
// checks before Run. Safe for concurrent use.
type Admin struct{}

// NewAdmin returns an admin server that will listen on addr and serve reg.
func NewAdmin(addr string, reg *prometheus.Registry, log *zap.Logger) *Admin {
	panic("unimplemented")
}

// AddCheck adds a named readiness check.
func (a *Admin) AddCheck(name string, c Check) { panic("unimplemented") }

// SetReady sets the readiness flag; /readyz is 503 until SetReady(true) and
// again after SetReady(false) (shutdown begins).
func (a *Admin) SetReady(ready bool) { panic("unimplemented") }

// Listen binds the listener; Addr is valid afterwards.
func (a *Admin) Listen() (net.Addr, error) { panic("unimplemented") }

// Run serves until ctx is done, then shuts down gracefully. Calls Listen
// if it was not called.
func (a *Admin) Run(ctx context.Context) error { panic("unimplemented") }
