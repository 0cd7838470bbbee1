package app

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/config"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/proxies"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/svctest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

func noEnv(string) (string, bool) { return "", false }

// load returns the configuration args give, on top of a real broker and a
// fresh ClickHouse database; broken replaces the broker or ClickHouse
// address by one nothing listens on.
func load(t *testing.T, broken string, args ...string) config.Config {
	t.Helper()
	cfg, err := config.Load(append(svctest.Args(t, broken), args...), noEnv, "test-1")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNew builds the fetcher against a real broker and ClickHouse: the
// readiness check answers, the proxy pool and its proxies_known gauge exist
// with --use-proxies only, the writers are the fetch log's and robots.txt's,
// and Close releases the clients (TestMain finds no goroutine left).
func TestNew(t *testing.T) {
	for _, useProxies := range []bool{false, true} {
		t.Run("use-proxies="+strconv.FormatBool(useProxies), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			f, err := New(t.Context(), load(t, "", "-use-proxies="+strconv.FormatBool(useProxies)), zaptest.NewLogger(t), reg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			defer f.Close()
			if err := f.Ping(t.Context()); err != nil {
				t.Errorf("Ping: %v", err)
			}
			if f.UsesProxies() != useProxies {
				t.Errorf("UsesProxies = %v", f.UsesProxies())
			}
			n, err := testutil.GatherAndCount(reg, "proxies_known")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{false: 0, true: 1}[useProxies]; n != want {
				t.Errorf("proxies_known series = %d, want %d", n, want)
			}
			var names []string
			for _, w := range f.Writers() {
				names = append(names, w.Name)
			}
			if got := strings.Join(names, ", "); got != "fetch log writer, robots.txt writer" {
				t.Errorf("writers = %s", got)
			}
		})
	}
}

// TestNewFails: a part that cannot be built fails New with the step named,
// and what was opened before it is closed (no goroutine left).
func TestNewFails(t *testing.T) {
	tests := []struct {
		name, broken string
		args         []string
		wantErr      string
	}{
		{name: "clickhouse", broken: "clickhouse", wantErr: "open clickhouse"},
		{name: "kafka", broken: "kafka", wantErr: "ensure topics"},
		{name: "credentials", args: []string{"-credentials-file", filepath.Join(t.TempDir(), "missing.json")}, wantErr: "open credentials file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			f, err := New(ctx, load(t, tt.broken, tt.args...), zaptest.NewLogger(t), prometheus.NewRegistry())
			if err == nil {
				f.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestWaitSpecs: fetching starts once the control topic is read, or after
// the bounded wait with a warning; a stop during the wait starts nothing.
func TestWaitSpecs(t *testing.T) {
	tests := []struct {
		name     string
		caughtUp bool
		stopped  bool
		want     bool
		wantWarn bool
	}{
		{name: "caught up", caughtUp: true, want: true},
		{name: "control topic silent", want: true, wantWarn: true},
		{name: "stopped", stopped: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			f := &Fetcher{log: zap.New(core), specs: crawlcontrol.NewSpecs(), caughtUp: make(chan struct{}), controlWait: 50 * time.Millisecond}
			if tt.caughtUp {
				f.controlWait = time.Hour
				close(f.caughtUp)
			}
			ctx := t.Context()
			if tt.stopped {
				f.controlWait = time.Hour
				c, cancel := context.WithCancel(ctx)
				cancel()
				ctx = c
			}
			if got := f.WaitSpecs(ctx); got != tt.want {
				t.Errorf("WaitSpecs = %v, want %v", got, tt.want)
			}
			if warned := logs.FilterMessage("started before the crawl states were read").Len() == 1; warned != tt.wantWarn {
				t.Errorf("warned = %v, want %v", warned, tt.wantWarn)
			}
		})
	}
}

// TestFetchOptions: the configuration becomes the HTTP fetcher's options:
// a zero --min-transfer-rate disables the check, the pool is used when
// given, the credentials file is read.
func TestFetchOptions(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(creds, []byte(`{"site.example": {"username": "u", "password": "p"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"site.example": {"user": "u"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{"-min-transfer-rate", "0", "-credentials-file", creds}, noEnv, "test-1")
	if err != nil {
		t.Fatal(err)
	}
	pool := proxies.NewPool()
	fo, err := fetchOptions(cfg, pool)
	if err != nil {
		t.Fatalf("fetchOptions: %v", err)
	}
	if fo.MinTransferRate != -1 || fo.Proxies == nil || fo.Credentials["site.example"].Username != "u" || fo.UserAgent != cfg.UserAgent {
		t.Errorf("options = %+v", fo)
	}
	cfg.CredentialsFile = bad
	if _, err := fetchOptions(cfg, nil); err == nil || !strings.Contains(err.Error(), "read credentials file") {
		t.Errorf("fetchOptions with a bad credentials file = %v", err)
	}
}

// TestConsumeOptions: switches that are off leave their part out, and a
// zero --max-redirects follows no redirect target.
func TestConsumeOptions(t *testing.T) {
	off, err := config.Load([]string{"-max-redirects", "0", "-persist-host-state=false", "-persist-robots=false",
		"-readback-window", "0s"}, noEnv, "test-1")
	if err != nil {
		t.Fatal(err)
	}
	o := consumeOptions(off, crawlcontrol.NewSpecs(), nil, nil)
	if o.Outcome.MaxRedirects != -1 || o.HostStates != nil || o.RobotsTxt != nil || o.Published != nil || o.Servers != nil {
		t.Errorf("options with everything off = %+v", o)
	}
	on, err := config.Load([]string{"-server-delay", "1s"}, noEnv, "test-1")
	if err != nil {
		t.Fatal(err)
	}
	o = consumeOptions(on, crawlcontrol.NewSpecs(), nil, nil)
	if o.Outcome.MaxRedirects != on.MaxRedirects || o.HostStates == nil || o.Published == nil || o.Servers == nil || o.Outcome.InstanceID != "test-1" {
		t.Errorf("options with the defaults and a server delay = %+v", o)
	}
}
