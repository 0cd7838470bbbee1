// Package service is the harness every trawl service's main runs in, so
// that all of them start and stop the same way:
//
//	flags and CRAWLER_* environment (ParseFlags) → validated config →
//	New: zap logger, memory limit, profiles, Prometheus registry, admin
//	server (/healthz, /readyz, /metrics, /debug/pprof/; loopback by default)
//	→ components added with Go → Run.
//
// Shutdown has one order for every service. It begins when Run's context is
// done (SIGINT or SIGTERM through Main) or when any component returns,
// with or without an error, and then:
//
//  1. readiness goes false: /readyz answers 503 while the service drains,
//     and SetReady no longer turns it back on;
//  2. the Consume components are stopped (their context is cancelled) and
//     awaited: consumer groups stop reading and finish or hand back their
//     in-flight work;
//  3. then the Drain components (work the consumers handed on);
//  4. then the Flush components: writers flush what they buffered;
//  5. then the admin server stops.
//
// Run returns the first error a component returned, wrapped with its name.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Main runs run under a context that SIGINT or SIGTERM cancels and exits:
// with status 0 when run returns nil or flag.ErrHelp (-h printed the
// usage), else with status 1 after printing "<name>: <error>" to standard
// error. It is the only place a service exits.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if code := exitCode(name, err, os.Stderr); code != 0 {
		os.Exit(code)
	}
}

// exitCode reports err on w and returns the process's exit status.
func exitCode(name string, err error, w io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
	return 1
}

// ParseFlags fills fs from args and the environment (envflag.Parse: a flag
// on the command line wins over its CRAWLER_* variable) and then runs
// validate. A parse error is returned as envflag returns it
// (errors.Is(err, flag.ErrHelp) after -h); a validation error as
// "validate config: …".
func ParseFlags(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool), validate func() error) error {
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}
	return nil
}

// Config is a service's configuration: it binds its fields to flags with
// their defaults and reports its errors.
type Config interface {
	RegisterFlags(fs *flag.FlagSet)
	Validate() error
}

// Load returns the configuration T of service name parsed from args and
// the environment and validated (ParseFlags).
func Load[T any, P interface {
	*T
	Config
}](name string, args []string, lookupEnv func(string) (string, bool)) (T, error) {
	var c T
	p := P(&c)
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	p.RegisterFlags(fs)
	if err := ParseFlags(fs, args, lookupEnv, func() error { return p.Validate() }); err != nil {
		var zero T
		return zero, err
	}
	return c, nil
}

// Stage says when a component is stopped during shutdown; stages stop in
// the order of their values, each once every component of the stages
// before it has returned.
type Stage int

const (
	// Consume components bring work in: consumer groups, topic followers,
	// loops, API servers. They are stopped first, once readiness is false.
	Consume Stage = iota
	// Drain components finish work the consumers handed them (the
	// fetcher's recorder): stopped once every Consume component returned.
	Drain
	// Flush components are writers: stopped once every Drain component
	// returned, they flush what they buffered and return.
	Flush

	numStages = int(Flush) + 1
)

// Service is one service process's harness: its logger, its registry, its
// admin server and its run group. Create with New, add components with Go,
// then call Run once and Close at exit.
type Service struct {
	name         string
	log          *zap.Logger
	reg          *prometheus.Registry
	metrics      prometheus.Registerer
	admin        *telemetry.Admin
	stopProfiles func()

	mu         sync.Mutex
	draining   bool
	running    bool
	components [numStages][]component
	// adminDone, once the admin server serves (ServeAdmin or Run), gets
	// its result; stopAdmin stops it.
	adminDone chan error
	stopAdmin context.CancelFunc
}

type component struct {
	name string
	run  func(ctx context.Context) error
}

// New builds the logger (service=<name>), applies the memory limit, starts
// the profiles of c.ProfileDir, and creates the registry and the admin
// server (not listening yet: Run binds it). c must be valid
// (telemetry.Config.Validate).
func New(name string, c telemetry.Config) (*Service, error) {
	log, err := telemetry.NewLogger(c, name)
	if err != nil {
		return nil, fmt.Errorf("create logger: %w", err)
	}
	return newService(name, c, log)
}

func newService(name string, c telemetry.Config, log *zap.Logger) (*Service, error) {
	telemetry.ApplyMemoryLimit(c)
	stopProfiles, err := telemetry.StartProfiles(c, log)
	if err != nil {
		_ = log.Sync()
		return nil, err
	}
	reg := telemetry.NewRegistry()
	admin := telemetry.NewAdmin(c.AdminAddr, reg, log)
	admin.SetAddrFile(c.AdminAddrFile)
	return &Service{
		name:         name,
		log:          log,
		reg:          reg,
		metrics:      telemetry.Registerer(reg, name),
		admin:        admin,
		stopProfiles: stopProfiles,
	}, nil
}

// Log returns the service's logger.
func (s *Service) Log() *zap.Logger { return s.log }

// Registry returns the service's registry, served on /metrics.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

// Metrics returns the registry with the prefix crawler_<name>_, where the
// components register their metrics.
func (s *Service) Metrics() prometheus.Registerer { return s.metrics }

// AddCheck adds a readiness check (a ClickHouse ping): /readyz answers 503
// while it fails.
func (s *Service) AddCheck(name string, c telemetry.Check) { s.admin.AddCheck(name, c) }

// Listen binds the admin server early (Run does otherwise) and returns its
// address, for a start log line or a test.
func (s *Service) Listen(ctx context.Context) (net.Addr, error) { return s.admin.Listen(ctx) }

// ServeAdmin binds the admin server and serves it from now on, before Run
// (which otherwise does): a service that waits at its start for a
// dependency (ClickHouse, the broker) answers /healthz meanwhile, alive,
// and /readyz with 503, so that an orchestrator waits rather than kills
// it. The server stops at the end of Run, or at Close without Run.
func (s *Service) ServeAdmin(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.serveAdminLocked(ctx)
}

func (s *Service) serveAdminLocked(ctx context.Context) error {
	if s.adminDone != nil {
		return nil
	}
	if _, err := s.admin.Listen(ctx); err != nil {
		return err
	}
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- s.admin.Run(actx) }()
	s.adminDone, s.stopAdmin = done, stop
	return nil
}

// SetReady turns readiness on (once the service has what it needs to work);
// /readyz answers 503 before. It does nothing once shutdown has begun.
// Safe for concurrent use.
func (s *Service) SetReady() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.draining {
		s.admin.SetReady(true)
	}
}

// unready turns readiness off for good: shutdown has begun.
func (s *Service) unready() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	s.admin.SetReady(false)
}

// Go adds a component that runs until its context is cancelled in stage's
// turn of the shutdown, or until it fails. A component that returns (nil
// or an error) begins the shutdown of the whole service: a one-shot task
// ending is the service's end. Call Go before Run.
func (s *Service) Go(stage Stage, name string, run func(ctx context.Context) error) {
	if stage < 0 || int(stage) >= numStages {
		panic(fmt.Sprintf("service: unknown stage %d for %s", stage, name)) // a wiring bug, caught by any test of the main
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		panic("service: Go after Run: " + name)
	}
	s.components[stage] = append(s.components[stage], component{name: name, run: run})
}

// Run binds the admin server, runs every component and the admin server
// until the shutdown (see the package comment) is over, and returns the
// first error a component returned ("run <component>: …"), or the admin
// server's. It logs "<name> stopped" at its end.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("service: Run called twice")
	}
	s.running = true
	stages := s.components
	err := s.serveAdminLocked(ctx)
	adminDone, stopAdmin := s.adminDone, s.stopAdmin
	s.mu.Unlock()
	if err != nil {
		return err
	}

	var (
		errOnce  sync.Once
		firstErr error
		begin    sync.Once
		shutdown = make(chan struct{})
	)
	beginShutdown := func(cause string, err error) {
		if err != nil {
			errOnce.Do(func() { firstErr = err })
		}
		begin.Do(func() {
			s.log.Info("shutting down", zap.String("cause", cause))
			s.unready()
			close(shutdown)
		})
	}
	stopOnCtx := context.AfterFunc(ctx, func() { beginShutdown("signal", nil) })
	defer stopOnCtx()

	// Each stage's context is cancelled in its turn, never by ctx:
	// writers must outlive the consumers that feed them.
	base := context.WithoutCancel(ctx)
	var (
		cancels [numStages]context.CancelFunc
		groups  [numStages]sync.WaitGroup
	)
	for i, comps := range stages {
		sctx, cancel := context.WithCancel(base)
		cancels[i] = cancel
		for _, c := range comps {
			groups[i].Go(func() {
				err := c.run(sctx)
				if err != nil {
					err = fmt.Errorf("run %s: %w", c.name, err)
				}
				beginShutdown(c.name, err)
			})
		}
	}
	var admin sync.WaitGroup
	admin.Go(func() {
		if err := <-adminDone; err != nil {
			beginShutdown("admin server", err)
		}
	})

	<-shutdown
	for i := range stages {
		cancels[i]()
		groups[i].Wait()
	}
	stopAdmin()
	admin.Wait()
	s.log.Info(s.name+" stopped", zap.Error(firstErr))
	return firstErr
}

// Close stops the profiles (writing the allocation profile) and flushes the
// logger; call it once, at exit, after Run.
func (s *Service) Close() {
	s.mu.Lock()
	if !s.running && s.stopAdmin != nil { // served by ServeAdmin, never run
		s.stopAdmin()
		if err := <-s.adminDone; err != nil {
			s.log.Warn("admin server", zap.Error(err))
		}
		s.stopAdmin = nil // a second Close has nothing to stop
	}
	s.mu.Unlock()
	s.stopProfiles()
	_ = s.log.Sync()
}
