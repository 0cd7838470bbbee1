package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// TestMain checks that no test leaves a goroutine behind (goleak retries
// for a while, which covers goroutines that are exiting).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T, ip string) string {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func noEnv(string) (string, bool) { return "", false }

// start runs the service with args until the test ends.
func start(t *testing.T, kcfg kafkaio.Config, args ...string) (admin, apiAddr string) {
	t.Helper()
	admin, apiAddr = freeAddr(t, "127.0.0.50"), freeAddr(t, "127.0.0.51")
	args = append([]string{
		"--kafka-brokers", strings.Join(kcfg.Brokers, ","),
		"--kafka-topic-prefix", kcfg.TopicPrefix,
		"--kafka-partitions", fmt.Sprint(kcfg.Partitions),
		"--admin-addr", admin, "--api-addr", apiAddr, "--log-level", "warn",
	}, args...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("run did not stop within 15s")
		}
	})
	return admin, apiAddr
}

func httpGet(t *testing.T, addr, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// eventually polls cond for up to 15s. The conditions are over the state
// a running service shows through its HTTP API and topics, which send no
// signal when it changes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

func proxies(t *testing.T, apiAddr string) []api.Proxy {
	t.Helper()
	status, body, err := httpGet(t, apiAddr, "/proxies")
	if err != nil || status != 200 {
		return nil
	}
	var out []api.Proxy
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("decode /proxies %q: %v", body, err)
	}
	return out
}

func TestRunIdle(t *testing.T) {
	kcfg := kafkatest.Config(t, 4)
	admin, apiAddr := start(t, kcfg)
	eventually(t, "ready", func() bool {
		status, _, _ := httpGet(t, admin, "/readyz")
		return status == 200
	})
	if status, _, _ := httpGet(t, admin, "/healthz"); status != 200 {
		t.Errorf("/healthz = %d", status)
	}
	if status, body, err := httpGet(t, apiAddr, "/proxies"); err != nil || status != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("/proxies = %d %q %v, want 200 []", status, body, err)
	}
}

func TestRunChecksAndPublishes(t *testing.T) {
	kcfg := kafkatest.Config(t, 4)
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "known page")
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.52:0")
	if err != nil {
		t.Fatal(err)
	}
	page.Listener.Close()
	page.Listener = ln
	page.Start()
	defer page.Close()

	const password = "pa55-Word-xyz"
	healthy := proxytest.Start(t, "127.0.0.53", proxytest.Options{Username: "u", Password: password})
	wrong := proxytest.Start(t, "127.0.0.54", proxytest.Options{Mode: proxytest.WrongContent})
	file := filepath.Join(t.TempDir(), "proxies.txt")
	list := fmt.Sprintf("# test list\n%s\n\n%s # wrong\n", healthy.URL(), wrong.Addr())
	if err := os.WriteFile(file, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	latest := map[string]kafka.Message{}
	fctx, fcancel := context.WithCancel(t.Context())
	fdone := make(chan error, 1)
	go func() {
		fdone <- kafkaio.Follow(fctx, kcfg, kcfg.Topics().Proxies, func(m kafka.Message) {
			mu.Lock()
			latest[string(m.Key)] = m
			mu.Unlock()
		})
	}()
	defer func() {
		fcancel()
		if err := <-fdone; err != nil {
			t.Errorf("follow: %v", err)
		}
	}()

	admin, apiAddr := start(t, kcfg,
		"--proxies-file", file, "--check-url", page.URL, "--check-expect", "known page",
		"--check-timeout", "2s", "--check-interval", "200ms")

	var list2 []api.Proxy
	eventually(t, "both proxies checked", func() bool {
		list2 = proxies(t, apiAddr)
		return len(list2) == 2 && list2[0].Checked && list2[1].Checked
	})
	alive := map[string]bool{}
	for _, p := range list2 {
		alive[p.Addr] = p.Alive
		if p.Alive && p.CheckedAt == nil {
			t.Errorf("%s: no checked_at", p.Addr)
		}
	}
	if !alive[healthy.Addr()] || alive[wrong.Addr()] {
		t.Errorf("alive = %v, want only %s", alive, healthy.Addr())
	}
	eventually(t, "topic state", func() bool {
		mu.Lock()
		defer mu.Unlock()
		live, tomb := 0, 0
		for _, m := range latest {
			if m.Value == nil {
				tomb++
			} else {
				live++
			}
		}
		return live == 1 && tomb == 1
	})
	_, body, _ := httpGet(t, apiAddr, "/proxies")
	_, metrics, _ := httpGet(t, admin, "/metrics")
	for name, text := range map[string]string{"api": body, "metrics": metrics} {
		if strings.Contains(text, password) {
			t.Errorf("%s leaks the password", name)
		}
	}
	// The gauge is set after the round's records are published.
	eventually(t, "the live gauge", func() bool {
		_, metrics, _ := httpGet(t, admin, "/metrics")
		return strings.Contains(metrics, `crawler_proxypool_proxies{state="live"} 1`)
	})
}

func TestRunRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("127.0.0.1:8080\nhttp://u:topsecret@127.0.0.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "proxies without check url", args: []string{"--proxies-file", bad}, want: "check url"},
		{name: "invalid line", args: []string{"--proxies-file", bad, "--check-url", "http://127.0.0.1/"}, want: "line 2"},
		{name: "concurrency from env", env: map[string]string{"CRAWLER_CHECK_CONCURRENCY": "0"}, want: "concurrency"},
		{name: "missing file", args: []string{"--proxies-file", filepath.Join(dir, "nope"), "--check-url", "http://127.0.0.1/"}, want: "open proxies file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--admin-addr", "127.0.0.1:0", "--log-level", "error"}, tt.args...)
			err := run(t.Context(), args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run() = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Errorf("error leaks the password: %v", err)
			}
		})
	}
}

// TestRunHarvestsSources runs the service on a harvested source only (a
// JSON list with a credentialed proxy and a dead one) and checks the API,
// the metrics and the topic, none of which may show the password.
func TestRunHarvestsSources(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "known page")
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.55:0")
	if err != nil {
		t.Fatal(err)
	}
	page.Listener.Close()
	page.Listener = ln
	page.Start()
	defer page.Close()

	const password = "harvest-Pa55-zz"
	healthy := proxytest.Start(t, "127.0.0.56", proxytest.Options{Username: "u", Password: password})
	dead := proxytest.Start(t, "127.0.0.57", proxytest.Options{})
	dead.Close()
	src := filepath.Join(t.TempDir(), "list.json")
	list := fmt.Sprintf(`{"proxies": [%q, %q, "junk"]}`, healthy.URL(), dead.Addr())
	if err := os.WriteFile(src, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, apiAddr := start(t, kcfg,
		"--source", src, "--check-url", page.URL, "--check-expect", "known page",
		"--check-timeout", "2s", "--check-interval", "200ms", "--target-size", "1", "--evict-after", "1")

	eventually(t, "healthy live, dead evicted", func() bool {
		ps := proxies(t, apiAddr)
		return len(ps) == 1 && ps[0].Alive && ps[0].Addr == healthy.Addr() && ps[0].Success > 0
	})
	_, body, _ := httpGet(t, apiAddr, "/proxies")
	_, metrics, _ := httpGet(t, admin, "/metrics")
	for name, text := range map[string]string{"api": body, "metrics": metrics} {
		if strings.Contains(text, password) {
			t.Errorf("%s leaks the password", name)
		}
	}
	for _, want := range []string{"crawler_proxypool_harvested_proxies_total 2", `crawler_proxypool_harvests_total{result="ok"}`, "crawler_proxypool_evicted_proxies_total 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
