package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

func noEnv(string) (string, bool) { return "", false }

// TestRun wires the whole service against a real broker and ClickHouse:
// a published page becomes a document, and cancelling the context stops
// the service cleanly.
func TestRun(t *testing.T) {
	const partitions = 2
	kc := kafkatest.Config(t, partitions)
	cc := chtest.Config(t)
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--kafka-topic-prefix", kc.TopicPrefix,
		"--kafka-session-timeout", kc.SessionTimeout.String(),
		"--kafka-rebalance-timeout", kc.RebalanceTimeout.String(),
		"--clickhouse-addr", strings.Join(cc.Addr, ","),
		"--clickhouse-database", cc.Database,
		"--log-level", "warn",
		"--max-outlinks", "1",
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv) }()

	w := kafkaio.NewWriter(kc, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	page := &crawlv1.FetchedPage{
		CrawlId: "run", Url: "http://127.0.0.2/", StatusCode: 200, ContentType: "text/html",
		FetchedAt: timestamppb.Now(),
		Body:      []byte(`<title>Run</title><a href="/one">1</a><a href="/two">2</a>`),
	}
	key, _ := kafkaio.Key(page.Url)
	msg, err := kafkaio.NewMessage(kc.Topics().Fetched, key, page)
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := w.Write(wctx, msg); err != nil {
		t.Fatal(err)
	}

	// The service migrated its own database; poll it for the document.
	store, err := chstore.Open(wctx, cc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var outlinks uint32
	for outlinks == 0 {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-wctx.Done():
			t.Fatal("timed out waiting for the document")
		case <-time.After(100 * time.Millisecond):
		}
		row := store.Conn().QueryRow(wctx, "SELECT outlinks FROM documents WHERE url = ?", page.Url)
		if err := row.Scan(&outlinks); err != nil && !strings.Contains(err.Error(), "no rows") &&
			!strings.Contains(err.Error(), "doesn't exist") {
			t.Logf("query documents: %v", err)
		}
	}
	if outlinks != 1 {
		t.Errorf("outlinks = %d, want 1 (--max-outlinks)", outlinks)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop after cancel")
	}
}

func TestRunRejectsConfig(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantMsg string
	}{
		{name: "max outlinks", args: []string{"--max-outlinks", "0"}, wantMsg: "max-outlinks"},
		{name: "max text bytes", args: []string{"--max-text-bytes", "-1"}, wantMsg: "max-text-bytes"},
		{name: "batch size from env", env: map[string]string{"CRAWLER_BATCH_SIZE": "0"}, wantMsg: "batch-size"},
		{name: "bad env value", env: map[string]string{"CRAWLER_MAX_OUTLINKS": "many"}, wantMsg: "CRAWLER_MAX_OUTLINKS"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantMsg: "no-such-flag"},
		{name: "max url length", args: []string{"--max-url-length", "8"}, wantMsg: "max-url-length"},
		{name: "repeated segments", args: []string{"--max-repeated-segments", "-1"}, wantMsg: "max-repeated-segments"},
		{name: "serp config missing", args: []string{"--serp-config", "/nonexistent/serp.json"}, wantMsg: "serp config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			err := run(t.Context(), tt.args, lookup)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("err = %v, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}
