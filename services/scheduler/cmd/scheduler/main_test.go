package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestRunSchedulesAndStops runs the whole service against a real broker and
// ClickHouse: a discovered URL becomes a fetch request, and cancelling the
// context stops run cleanly.
func TestRunSchedulesAndStops(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	args := []string{
		"--kafka-brokers=" + strings.Join(kcfg.Brokers, ","),
		"--kafka-partitions=2",
		"--kafka-topic-prefix=" + kcfg.TopicPrefix,
		"--kafka-session-timeout=" + kcfg.SessionTimeout.String(),
		"--kafka-rebalance-timeout=" + kcfg.RebalanceTimeout.String(),
		"--admin-addr=127.0.0.1:0",
		"--log-level=warn",
	}
	env := map[string]string{
		"CRAWLER_CLICKHOUSE_ADDR":     strings.Join(ch.Addr, ","),
		"CRAWLER_CLICKHOUSE_DATABASE": ch.Database,
		"CRAWLER_MAX_DEPTH":           "1",
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }) }()

	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for _, u := range []*crawlv1.DiscoveredURL{
		{CrawlId: "c", Url: "http://run.example/too-deep", Depth: 2},
		{CrawlId: "c", Url: "http://run.example/ok", Depth: 1},
	} {
		key, err := kafkaio.Key(u.Url)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Discovered, key, u)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("publish: %v", err)
	}

	var got []string
	fctx, fcancel := context.WithTimeout(ctx, 30*time.Second)
	defer fcancel()
	err := kafkaio.Follow(fctx, kcfg, kcfg.Topics().Fetch, func(m kafka.Message) {
		var req crawlv1.FetchRequest
		if err := kafkaio.Decode(m, &req); err != nil {
			t.Errorf("decode: %v", err)
		}
		got = append(got, req.Url)
		fcancel()
	})
	if err != nil {
		t.Fatalf("follow fetch topic: %v", err)
	}
	if len(got) != 1 || got[0] != "http://run.example/ok" {
		t.Fatalf("fetch requests = %v, want [http://run.example/ok]", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after cancel")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	err := run(t.Context(), []string{"--max-pages=-5"}, func(string) (string, bool) { return "", false })
	if err == nil || !strings.Contains(err.Error(), "max-pages") {
		t.Fatalf("run = %v, want a max-pages config error", err)
	}
}
