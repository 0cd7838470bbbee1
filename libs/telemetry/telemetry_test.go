package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func TestRegisterFlags(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c.RegisterFlags(fs)
	if c != (Config{LogLevel: "info", LogFormat: "json", AdminAddr: "127.0.0.1:0"}) {
		t.Fatalf("defaults = %+v", c)
	}
	if err := fs.Parse([]string{"-log-level=debug", "-log-format", "console", "-admin-addr=:9090"}); err != nil {
		t.Fatal(err)
	}
	if c != (Config{LogLevel: "debug", LogFormat: "console", AdminAddr: ":9090"}) {
		t.Fatalf("parsed = %+v", c)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		c       Config
		wantErr string
	}{
		{"defaults", Config{LogLevel: "info", LogFormat: "json", AdminAddr: "127.0.0.1:0"}, ""},
		{"zero value means defaults", Config{}, ""},
		{"debug console", Config{LogLevel: "debug", LogFormat: "console", AdminAddr: ":8080"}, ""},
		{"warn", Config{LogLevel: "warn"}, ""},
		{"error", Config{LogLevel: "error"}, ""},
		{"bad level", Config{LogLevel: "verbose"}, "log-level"},
		{"fatal not allowed", Config{LogLevel: "fatal"}, "log-level"},
		{"bad format", Config{LogFormat: "xml"}, "log-format"},
		{"bad addr", Config{AdminAddr: "localhost"}, "admin-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error about %s", err, tt.wantErr)
			}
		})
	}
}

type buffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func (b *buffer) Sync() error { return nil }

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.String()
}

func TestLoggerJSON(t *testing.T) {
	var buf buffer
	log, err := newLogger(Config{LogLevel: "info", LogFormat: "json"}, "fetcher", &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("page fetched", URL("http://a/"), Host("a"), Status(200), Partition(3), Offset(42))
	_ = log.Sync()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1 (debug filtered): %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	want := map[string]any{
		"level": "info", "msg": "page fetched", "service": "fetcher",
		"url": "http://a/", "host": "a", "status": 200.0, "partition": 3.0, "offset": 42.0,
	}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("field %s = %v, want %v", k, rec[k], v)
		}
	}
	for _, k := range []string{"ts", "caller"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
}

func TestLoggerConsoleAndLevels(t *testing.T) {
	tests := []struct {
		level     string
		debug     bool
		info      bool
		warn      bool
		errorSeen bool
	}{
		{"debug", true, true, true, true},
		{"info", false, true, true, true},
		{"warn", false, false, true, true},
		{"error", false, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf buffer
			log, err := newLogger(Config{LogLevel: tt.level, LogFormat: "console"}, "parser", &buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Debug("d-msg")
			log.Info("i-msg")
			log.Warn("w-msg")
			log.Error("e-msg")
			out := buf.String()
			for msg, want := range map[string]bool{"d-msg": tt.debug, "i-msg": tt.info, "w-msg": tt.warn, "e-msg": tt.errorSeen} {
				if strings.Contains(out, msg) != want {
					t.Errorf("%s logged = %v, want %v:\n%s", msg, !want, want, out)
				}
			}
			if !strings.Contains(out, `"service": "parser"`) || strings.HasPrefix(strings.TrimSpace(out), "{") {
				t.Errorf("not console format with service field:\n%s", out)
			}
		})
	}
}

func TestNewLoggerRejectsBadConfig(t *testing.T) {
	if _, err := NewLogger(Config{LogLevel: "loud"}, "x"); err == nil {
		t.Fatal("NewLogger accepted level loud")
	}
}

func TestRegistry(t *testing.T) {
	reg := NewRegistry()
	if reg == prometheus.DefaultRegisterer {
		t.Fatal("NewRegistry returned the default registry")
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "pages_fetched_total", Help: "pages"})
	if err := Registerer(reg, "fetcher").Register(c); err != nil {
		t.Fatal(err)
	}
	c.Add(3)
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "urls_total", Help: "urls"})
	if err := Registerer(reg, "proxy-pool").Register(other); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]float64)
	for _, mf := range mfs {
		v := 0.0
		if m := mf.GetMetric(); len(m) > 0 && m[0].GetCounter() != nil {
			v = m[0].GetCounter().GetValue()
		}
		names[mf.GetName()] = v
	}
	for _, n := range []string{"go_goroutines", "process_cpu_seconds_total", "crawler_fetcher_pages_fetched_total", "crawler_proxy_pool_urls_total"} {
		if _, ok := names[n]; !ok {
			t.Errorf("metric %s not gathered", n)
		}
	}
	if v := names["crawler_fetcher_pages_fetched_total"]; v != 3 {
		t.Errorf("crawler_fetcher_pages_fetched_total = %v, want 3", v)
	}
}

// TestRegistryGCShare: the runtime's CPU classes are exported, so a
// scrape tells the share of a process's CPU its collector takes (the
// runtime updates them at every collection).
func TestRegistryGCShare(t *testing.T) {
	reg := NewRegistry()
	runtime.GC()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := make(map[string]float64)
	for _, mf := range mfs {
		if m := mf.GetMetric(); len(m) > 0 && m[0].GetCounter() != nil {
			got[mf.GetName()] = m[0].GetCounter().GetValue()
		}
	}
	gc, okGC := got["go_cpu_classes_gc_total_cpu_seconds_total"]
	idle, okIdle := got["go_cpu_classes_idle_cpu_seconds_total"]
	total, okTotal := got["go_cpu_classes_total_cpu_seconds_total"]
	if !okGC || !okIdle || !okTotal {
		t.Fatalf("gc, idle and total cpu classes not all gathered (%v, %v, %v)", okGC, okIdle, okTotal)
	}
	if total <= 0 || gc <= 0 || gc+idle > total {
		t.Errorf("gc %v s and idle %v s of %v s: want 0 < gc, gc + idle <= total after a collection", gc, idle, total)
	}
}

// startAdmin runs an admin server on a loopback port and returns its base
// URL and a stop function that cancels it and returns Run's error.
func startAdmin(t *testing.T, a *Admin) (string, func() error) {
	t.Helper()
	addr, err := a.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("Run did not return after cancel")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return "http://" + addr.String(), stop
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

func TestAdmin(t *testing.T) {
	defer goleak.VerifyNone(t)
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "pages_fetched_total", Help: "pages"})
	Registerer(reg, "fetcher").MustRegister(c)
	c.Inc()

	a := NewAdmin("127.0.0.1:0", reg, zap.NewNop())
	base, stop := startAdmin(t, a)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()

	if code, body := get(t, client, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, _ := get(t, client, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before SetReady = %d, want 503", code)
	}
	a.SetReady(true)
	if code, body := get(t, client, base+"/readyz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/readyz ready without checks = %d %q", code, body)
	}

	var kafkaErr error
	var mu sync.Mutex
	a.AddCheck("kafka", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return kafkaErr
	})
	a.AddCheck("clickhouse", func(ctx context.Context) error { return ctx.Err() })
	if code, body := get(t, client, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz with passing checks = %d %q", code, body)
	}
	mu.Lock()
	kafkaErr = errors.New("no brokers")
	mu.Unlock()
	code, body := get(t, client, base+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "kafka") || !strings.Contains(body, "no brokers") || strings.Contains(body, "clickhouse") {
		t.Fatalf("/readyz with failing kafka check = %d %q", code, body)
	}
	mu.Lock()
	kafkaErr = nil
	mu.Unlock()

	if code, body := get(t, client, base+"/metrics"); code != 200 ||
		!strings.Contains(body, "crawler_fetcher_pages_fetched_total 1") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics = %d, body lacks the registered metrics:\n%s", code, body)
	}

	// Profiles: the heap profile in the text format, a one-second CPU
	// profile in the binary one (gzip).
	if code, body := get(t, client, base+"/debug/pprof/heap?debug=1"); code != 200 || !strings.Contains(body, "heap profile") {
		t.Fatalf("/debug/pprof/heap = %d %.200q", code, body)
	}
	if code, body := get(t, client, base+"/debug/pprof/profile?seconds=1"); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("/debug/pprof/profile = %d, %d bytes, not a gzipped profile", code, len(body))
	}
	if code, body := get(t, client, base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ = %d", code)
	}

	a.SetReady(false)
	if code, _ := get(t, client, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz after SetReady(false) = %d, want 503", code)
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Fatalf("Run = %v, want nil after cancel", err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Fatal("server still answers after shutdown")
	}
}

func TestAdminCheckTimeoutAndPanic(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for CheckTimeout")
	}
	defer goleak.VerifyNone(t)
	a := NewAdmin("127.0.0.1:0", NewRegistry(), zap.NewNop())
	base, stop := startAdmin(t, a)
	client := &http.Client{Timeout: 10 * time.Second}
	a.SetReady(true)
	a.AddCheck("fast", func(context.Context) error { return nil })
	a.AddCheck("slow", func(ctx context.Context) error {
		<-ctx.Done() // honours ctx, as a Check must
		return ctx.Err()
	})
	a.AddCheck("broken", func(context.Context) error { panic("boom") })

	start := time.Now()
	code, body := get(t, client, base+"/readyz")
	elapsed := time.Since(start)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", code)
	}
	for _, want := range []string{"check slow", "check broken", "boom"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "fast") {
		t.Errorf("/readyz body names the passing check:\n%s", body)
	}
	if elapsed < CheckTimeout || elapsed > CheckTimeout+3*time.Second {
		t.Errorf("/readyz took %v, want about %v", elapsed, CheckTimeout)
	}
	client.CloseIdleConnections()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestAdminListenErrors(t *testing.T) {
	a := NewAdmin("127.0.0.1:0", NewRegistry(), zap.NewNop())
	addr, err := a.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.Listen(t.Context())
	if err != nil || again.String() != addr.String() {
		t.Fatalf("second Listen = %v, %v; want %v", again, err, addr)
	}
	b := NewAdmin(addr.String(), NewRegistry(), zap.NewNop())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := b.Run(ctx); err == nil {
		t.Fatal("Run on a taken address succeeded")
	}
	// Shut a down without ever serving: Run returns once ctx is done.
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatalf("Run with cancelled ctx = %v", err)
	}
}

// Compile-time check that the test buffer satisfies zapcore.WriteSyncer.
var _ zapcore.WriteSyncer = (*buffer)(nil)

// TestRegister: the first registration is kept, a second identical one
// returns the first collector, a nil registry leaves it unexported and a
// conflicting shape gets its own unregistered collector.
func TestRegister(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	opts := prometheus.CounterOpts{Name: "things_total", Help: "Things."}
	first := Register(reg, prometheus.NewCounter(opts))
	first.Inc()
	second := Register(reg, prometheus.NewCounter(opts))
	if second != first {
		t.Error("a second identical registration did not return the first collector")
	}
	if own := Register(nil, prometheus.NewCounter(opts)); own == first {
		t.Error("a nil registry returned a registered collector")
	}
	vec := Register(reg, prometheus.NewCounterVec(opts, []string{"kind"}))
	vec.WithLabelValues("a").Inc()
	if n, err := testutil.GatherAndCount(reg, "things_total"); err != nil || n != 1 {
		t.Errorf("things_total series = %d (%v), want the first counter's only", n, err)
	}
}
