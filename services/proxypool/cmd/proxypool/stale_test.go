package main

import (
	"context"
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

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// topicState follows the proxies topic and returns a function giving the
// latest record per id (true: live) and how many records were read.
func topicState(t *testing.T, kcfg kafkaio.Config) func() (map[string]bool, int) {
	t.Helper()
	var (
		mu     sync.Mutex
		latest = map[string]bool{}
		n      int
	)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- kafkaio.Follow(ctx, kcfg, kcfg.Topics().Proxies, func(m kafka.Message) {
			mu.Lock()
			latest[string(m.Key)] = m.Value != nil
			n++
			mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("follow: %v", err)
		}
	})
	return func() (map[string]bool, int) {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]bool, len(latest))
		for k, v := range latest {
			out[k] = v
		}
		return out, n
	}
}

// prepublish writes live records for ids, as a previous run would have.
func prepublish(t *testing.T, kcfg kafkaio.Config, ids ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kcfg, nil, nil)
	defer w.Close()
	for _, id := range ids {
		if err := w.Write(ctx, kafka.Message{Topic: kcfg.Topics().Proxies, Key: []byte(id), Value: []byte("old")}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunTombstonesStaleProxies: proxies a previous run left live on the
// topic that are no longer in the file are tombstoned after the first
// round; the file's healthy proxy, live before, is republished live.
func TestRunTombstonesStaleProxies(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "known page")
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.58:0")
	if err != nil {
		t.Fatal(err)
	}
	page.Listener.Close()
	page.Listener = ln
	page.Start()
	defer page.Close()
	healthy := proxytest.Start(t, "127.0.0.59", proxytest.Options{})
	entries, err := proxylist.Parse(strings.NewReader(healthy.Addr() + "\n"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("parse: %v", err)
	}
	healthyID := entries[0].ID()
	prepublish(t, kcfg, "00000000000000aa", healthyID, "00000000000000bb")
	state := topicState(t, kcfg)

	file := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(file, []byte(healthy.Addr()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	admin, _ := start(t, kcfg, "--proxies-file", file, "--check-url", page.URL, "--check-expect", "known page",
		"--check-timeout", "2s", "--check-interval", "200ms", "--feedback=false")
	eventually(t, "stale ids tombstoned, healthy republished", func() bool {
		s, n := state()
		return n >= 6 && !s["00000000000000aa"] && !s["00000000000000bb"] && s[healthyID]
	})
	s, _ := state()
	if len(s) != 3 {
		t.Errorf("topic ids %v, want 3", s)
	}
	eventually(t, "metric", func() bool {
		_, metrics, _ := httpGet(t, admin, "/metrics")
		return strings.Contains(metrics, "crawler_proxypool_stale_proxies_tombstoned_total 2")
	})
}

// TestRunIdleTombstonesStaleProxies: with no proxies configured, every
// proxy left live is stale.
func TestRunIdleTombstonesStaleProxies(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	ids := []string{"00000000000000c1", "00000000000000c2", "00000000000000c3"}
	prepublish(t, kcfg, ids...)
	state := topicState(t, kcfg)
	start(t, kcfg, "--feedback=false")
	eventually(t, "every stale id tombstoned", func() bool {
		s, n := state()
		if n < 2*len(ids) {
			return false
		}
		for _, id := range ids {
			if s[id] {
				return false
			}
		}
		return true
	})
	if _, n := state(); n != 2*len(ids) {
		t.Errorf("%d records, want %d", n, 2*len(ids))
	}
}
