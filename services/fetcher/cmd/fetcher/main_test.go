package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestRunStartsAndStops wires the whole service against a real broker and
// ClickHouse, lets it join the group, then stops it like SIGTERM would and
// expects a clean exit.
func TestRunStartsAndStops(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	// The schema first: this test is about starting and stopping, and
	// migrating a database from nothing outlasted its 2 s on a loaded
	// machine (the stop then came during the migration). The
	// migrations have tests of their own.
	chtest.OpenMigrated(t, ch)
	args := append(storeArgs(kcfg, ch),
		"-log-level", "warn",
		"-workers", "4",
		"-use-proxies",
		"-warc-dir", t.TempDir(), // the archive wired too: opened, closed at the stop
	)
	env := func(string) (string, bool) { return "", false }
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, env) }()
	select {
	case err := <-done:
		t.Fatalf("run returned early: %v", err)
	case <-time.After(2 * time.Second):
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop within 30s of cancellation")
	}
}

// storeArgs are the flags of a fetcher on the test's broker and
// ClickHouse database, with its admin server on a free port.
func storeArgs(kcfg kafkaio.Config, ch chstore.Config) []string {
	return []string{
		"-kafka-brokers", strings.Join(kcfg.Brokers, ","),
		"-kafka-partitions", strconv.Itoa(kcfg.Partitions),
		"-kafka-topic-prefix", kcfg.TopicPrefix,
		"-kafka-session-timeout", kcfg.SessionTimeout.String(),
		"-kafka-rebalance-timeout", kcfg.RebalanceTimeout.String(),
		"-clickhouse-addr", strings.Join(ch.Addr, ","),
		"-clickhouse-database", ch.Database,
		"-admin-addr", "127.0.0.1:0",
	}
}

// fetchRequests are the fetch-topic records of crawl's requests of urls,
// fingerprinted 1, 2, … in order.
func fetchRequests(t *testing.T, kcfg kafkaio.Config, crawl string, urls []string) []kafka.Message {
	t.Helper()
	msgs := make([]kafka.Message, 0, len(urls))
	for i, u := range urls {
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: crawl, Url: u, UrlFp: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

func TestRunRejectsBadConfig(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "CRAWLER_WORKERS" {
			return "0", true
		}
		return "", false
	}
	err := run(t.Context(), nil, env)
	if err == nil || !strings.Contains(err.Error(), "workers") {
		t.Fatalf("run = %v, want a workers validation error", err)
	}
}
