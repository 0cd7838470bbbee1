// Package telemetry builds the observability every service shares: a zap
// logger with the field constructors all services use, a per-process
// Prometheus registry, and the admin HTTP server (/metrics, /healthz,
// /readyz).
package telemetry

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/trawl-crawler/trawl/libs/httpserve"
)

// Defaults of Config, also the flag defaults.
const (
	DefaultLogLevel  = "info"
	DefaultLogFormat = "json"
	DefaultAdminAddr = "127.0.0.1:0"
)

// Config is the observability configuration of a service.
type Config struct {
	LogLevel  string // flag log-level: debug, info, warn, error (default info)
	LogFormat string // flag log-format: json or console (default json)
	AdminAddr string // flag admin-addr: listen address of the admin server (default 127.0.0.1:0)
	// AdminAddrFile, when set (flag admin-addr-file), receives the admin
	// server's pid and bound address once it listens (WriteAddrFile): a
	// launcher gives port 0 and reads the port the kernel chose.
	AdminAddrFile string
	// ProfileDir, when set (flag profile-dir), receives a CPU profile of
	// the whole run and an allocation profile at its end (StartProfiles).
	ProfileDir string
	// MemoryLimit (flag memory-limit, bytes; 0: none) is the Go runtime's
	// soft memory limit (as GOMEMLIMIT): the collector runs more often as
	// the process nears it (ApplyMemoryLimit).
	MemoryLimit int64
	// GCPercent (flag gc-percent; 0: as GOGC says, 100 unless set) is the
	// Go collector's target: a new cycle starts when the heap has grown
	// by this percentage of what the last one left live. Lower trades CPU
	// for peak memory (ApplyMemoryLimit).
	GCPercent int
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.LogLevel, "log-level", DefaultLogLevel, "log level: debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", DefaultLogFormat, "log format: json or console")
	fs.StringVar(&c.AdminAddr, "admin-addr", DefaultAdminAddr, "listen address of the admin server (/metrics, /healthz, /readyz)")
	fs.StringVar(&c.AdminAddrFile, "admin-addr-file", "", "once the admin server listens, write \"<pid> <host:port>\" here (for a launcher that gives admin-addr port 0)")
	fs.StringVar(&c.ProfileDir, "profile-dir", "", "write cpu.pprof (the whole run) and allocs.pprof (at exit) here")
	fs.Int64Var(&c.MemoryLimit, "memory-limit", 0, "soft memory limit of the Go runtime in bytes, as GOMEMLIMIT (0: none, or GOMEMLIMIT's)")
	fs.IntVar(&c.GCPercent, "gc-percent", 0, "Go collector target percentage, as GOGC (0: GOGC's, 100 unless set)")
}

// Validate reports a configuration error. Empty fields mean their defaults.
func (c Config) Validate() error {
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	switch c.LogFormat {
	case "", "json", "console":
	default:
		return fmt.Errorf("validate log-format %q: want json or console", c.LogFormat)
	}
	if c.MemoryLimit < 0 {
		return fmt.Errorf("validate memory-limit %d: must not be negative", c.MemoryLimit)
	}
	if c.GCPercent < 0 {
		return fmt.Errorf("validate gc-percent %d: must not be negative", c.GCPercent)
	}
	if c.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			return fmt.Errorf("validate admin-addr %q: %w", c.AdminAddr, err)
		}
	}
	return nil
}

func parseLevel(s string) (zapcore.Level, error) {
	switch s {
	case "":
		return zapcore.InfoLevel, nil
	case "debug", "info", "warn", "error":
		var l zapcore.Level
		if err := l.UnmarshalText([]byte(s)); err != nil {
			return 0, fmt.Errorf("validate log-level %q: %w", s, err)
		}
		return l, nil
	}
	return 0, fmt.Errorf("validate log-level %q: want debug, info, warn or error", s)
}

// NewLogger returns a logger for service with the configured level and format.
// It writes to standard error, carries the field service=<service>, samples
// like zap's production logger and adds stack traces to error logs.
func NewLogger(c Config, service string) (*zap.Logger, error) {
	return newLogger(c, service, zapcore.Lock(os.Stderr))
}

func newLogger(c Config, service string, w zapcore.WriteSyncer) (*zap.Logger, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("new logger: %w", err)
	}
	level, _ := parseLevel(c.LogLevel) // checked by Validate
	encCfg := zap.NewProductionEncoderConfig()
	encCfg.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.LogFormat == "console" {
		encCfg.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(encCfg)
	} else {
		enc = zapcore.NewJSONEncoder(encCfg)
	}
	core := zapcore.NewCore(enc, w, zap.NewAtomicLevelAt(level))
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core,
		zap.AddCaller(),
		zap.AddStacktrace(zapcore.ErrorLevel),
		zap.ErrorOutput(w),
	).With(zap.String("service", service)), nil
}

// gcCPUMetrics selects the runtime/metrics CPU classes NewRegistry exports.
var gcCPUMetrics = regexp.MustCompile(`^/cpu/classes/(gc/total|idle|total):cpu-seconds$`)

// NewRegistry returns a fresh registry with the Go and process collectors
// registered. Never the default registry. Besides the Go collector's
// defaults it exports the runtime's CPU accounting of the collector, of
// idle time and of GOMAXPROCS over the process's life
// (go_cpu_classes_{gc_total,idle,total}_cpu_seconds_total): gc / (total -
// idle) is the share of a service's CPU that goes to garbage collection,
// which a live heap pressed against its memory limit drives up.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: gcCPUMetrics})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Registerer returns reg wrapped so every metric name gets the prefix
// "crawler_<service>_"; components register metrics like
// "pages_fetched_total" on it. A '-' in service becomes '_' so that the
// names stay valid.
func Registerer(reg prometheus.Registerer, service string) prometheus.Registerer {
	return prometheus.WrapRegistererWithPrefix("crawler_"+strings.ReplaceAll(service, "-", "_")+"_", reg)
}

// Field constructors: the same key for the same thing in every service.

// URL is the "url" field.
func URL(u string) zap.Field { return zap.String("url", u) }

// Host is the "host" field: a politeness key.
func Host(h string) zap.Field { return zap.String("host", h) }

// Crawl is the "crawl" field: a crawl id.
func Crawl(id string) zap.Field { return zap.String("crawl", id) }

// Topic is the "topic" field.
func Topic(t string) zap.Field { return zap.String("topic", t) }

// Partition is the "partition" field.
func Partition(p int) zap.Field { return zap.Int("partition", p) }

// Offset is the "offset" field.
func Offset(o int64) zap.Field { return zap.Int64("offset", o) }

// ErrorKind is the "error_kind" field: a bounded class, as in metrics.
func ErrorKind(kind string) zap.Field { return zap.String("error_kind", kind) }

// Status is the "status" field: an HTTP status code.
func Status(code int) zap.Field { return zap.Int("status", code) }

// Check is a readiness check; a non-nil error makes /readyz answer 503.
// It must return promptly once ctx is done: /readyz gives all checks
// together CheckTimeout and waits for every one of them.
type Check func(ctx context.Context) error

// CheckTimeout bounds one /readyz evaluation; a check still running then
// counts as failed.
const CheckTimeout = 2 * time.Second

// maxProfile is the longest CPU profile or trace the admin server streams.
const maxProfile = 10 * time.Minute

// shutdownTimeout bounds the graceful shutdown of the admin server.
const shutdownTimeout = 5 * time.Second

type namedCheck struct {
	name  string
	check Check
}

// Admin is the admin HTTP server of a service. Create with NewAdmin, add
// checks before Run. Safe for concurrent use.
//
// Routes: /metrics (the registry, OpenMetrics when asked), /healthz (200
// "ok" while the server runs), /readyz (200 "ok" when the ready flag is set
// and every check passes within CheckTimeout, else 503 naming the failing
// checks), and net/http/pprof under /debug/pprof/ (CPU profiles and traces
// of up to 10 minutes, heap, allocs, goroutines, mutex, block).
type Admin struct {
	log   *zap.Logger
	srv   *httpserve.Server
	ready atomic.Bool

	addrFile string    // SetAddrFile
	fileOnce sync.Once // Listen writes addrFile once
	fileErr  error

	mu     sync.Mutex
	checks []namedCheck
}

// NewAdmin returns an admin server that will listen on addr and serve reg.
func NewAdmin(addr string, reg *prometheus.Registry, log *zap.Logger) *Admin {
	a := &Admin{log: log}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:          zap.NewStdLog(log),
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          reg,
		EnableOpenMetrics: true,
	}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", a.serveReady)
	// Profiles for anyone who can reach the admin address (loopback by
	// default): go tool pprof http://ADMIN/debug/pprof/profile?seconds=30
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	a.srv = httpserve.New("admin server", addr, &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		// A CPU profile or trace streams for as long as it was asked
		// (pprof refuses a duration above WriteTimeout).
		WriteTimeout: maxProfile + 30*time.Second,
		IdleTimeout:  60 * time.Second,
		ErrorLog:     zap.NewStdLog(log),
	}, shutdownTimeout, log)
	return a
}

// AddCheck adds a named readiness check.
func (a *Admin) AddCheck(name string, c Check) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.checks = append(a.checks, namedCheck{name: name, check: c})
}

// SetReady sets the readiness flag; /readyz is 503 until SetReady(true) and
// again after SetReady(false) (shutdown begins).
func (a *Admin) SetReady(ready bool) { a.ready.Store(ready) }

// SetAddrFile makes Listen write the process's pid and the bound address
// to path (WriteAddrFile); call it before Listen.
func (a *Admin) SetAddrFile(path string) { a.addrFile = path }

// Listen binds the listener, so that a taken port fails the start early,
// and writes the address file (SetAddrFile); calling it again returns the
// address already bound.
func (a *Admin) Listen(ctx context.Context) (net.Addr, error) {
	addr, err := a.srv.Listen(ctx)
	if err != nil || a.addrFile == "" {
		return addr, err
	}
	a.fileOnce.Do(func() { a.fileErr = WriteAddrFile(a.addrFile, os.Getpid(), addr) })
	return addr, a.fileErr
}

// Run serves until ctx is done, then shuts down gracefully (readiness false
// first). Calls Listen if it was not called. It returns nil after a
// shutdown caused by ctx, and the server's error if serving fails. Run must
// be called at most once.
func (a *Admin) Run(ctx context.Context) error {
	defer a.ready.Store(false)
	stop := context.AfterFunc(ctx, func() { a.ready.Store(false) })
	defer stop()
	if _, err := a.Listen(ctx); err != nil {
		return err
	}
	return a.srv.Run(ctx)
}

func (a *Admin) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !a.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready\n"))
		return
	}
	failed := a.runChecks(r.Context())
	if len(failed) == 0 {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	for _, f := range failed {
		_, _ = fmt.Fprintf(w, "check %s: %s\n", f.name, f.err)
	}
	a.log.Debug("readiness check failed", zap.String("check", failed[0].name), zap.Error(failed[0].err))
}

type failedCheck struct {
	name string
	err  error
}

// runChecks runs every check concurrently under CheckTimeout and returns the
// failures sorted by name.
func (a *Admin) runChecks(ctx context.Context) []failedCheck {
	a.mu.Lock()
	checks := append([]namedCheck(nil), a.checks...)
	a.mu.Unlock()
	if len(checks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Go(func() {
			err := runCheck(ctx, c.check)
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("exceeded %s: %w", CheckTimeout, ctx.Err())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var failed []failedCheck
	for i, err := range errs {
		if err != nil {
			failed = append(failed, failedCheck{name: checks[i].name, err: err})
		}
	}
	sort.Slice(failed, func(i, j int) bool { return failed[i].name < failed[j].name })
	return failed
}

// runCheck runs c, turning a panic into an error so that one broken check
// cannot take the admin server down.
func runCheck(ctx context.Context, c Check) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("check panicked: %v", p)
		}
	}()
	return c(ctx)
}

// DependencyGauge returns the gauge dependency_waiting{dependency=...}:
// 1 while waiting reports that the service waits for the dependency (its
// work pauses, nothing is acknowledged), 0 otherwise. Every dependency of
// a service registers one under the same name (the help is shared, as the
// registry wants).
func DependencyGauge(dependency string, waiting func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "dependency_waiting",
		Help:        "1 while the service waits for a dependency that is unavailable (its work pauses, nothing is acknowledged), by dependency.",
		ConstLabels: prometheus.Labels{"dependency": dependency},
	}, func() float64 {
		if waiting() {
			return 1
		}
		return 0
	})
}
