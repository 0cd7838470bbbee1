package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestServe runs `seeder serve` against a real broker and ClickHouse,
// submits a crawl through it and stops it.
func TestServe(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	ch := chtest.Config(t)
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database,
		"--api-addr", "127.0.0.1:0", "--log-level", "warn",
	}
	env := map[string]string{"CRAWLER_KAFKA_TOPIC_PREFIX": kc.TopicPrefix, "CRAWLER_API_TOKEN": "serve-token-0123456789"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	addrs := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, args, lookup, func(a net.Addr) { addrs <- a }) }()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}

	post := func(tok string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/crawls", strings.NewReader(`{"crawl_id":"served","seeds":["http://127.0.0.2/"]}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("without token: %d", code)
	}
	if code := post(env["CRAWLER_API_TOKEN"]); code != http.StatusCreated {
		t.Errorf("with token: %d", code)
	}
	checkRecords(t, readDiscovered(t, kc, 1), "served", []string{"http://127.0.0.2/"}, time.Now().Add(-time.Minute))

	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve after cancel: %v", err)
	}
}

func TestServeRejects(t *testing.T) {
	tests := []struct {
		name, want string
		args       []string
	}{
		{"no token", "api-token", nil},
		{"short token", "api-token: 5 bytes", []string{"--api-token", "short"}},
		{"small body limit", "api-max-body-bytes", []string{"--api-token", "0123456789abcdef", "--api-max-body-bytes", "10"}},
		{"positional", "unexpected", []string{"--api-token", "0123456789abcdef", "extra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t.Context(), append([]string{"serve", "--kafka-brokers", "127.0.0.1:1"}, tt.args...), nil, noEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
