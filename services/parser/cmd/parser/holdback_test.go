package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestHeldBackByScheduler: with --max-scheduler-lag 1s, a scheduler group
// that decides none of the links a page published holds the parser back:
// a second page waits unparsed (no document) while the links wait, and is
// parsed once the scheduler's group has committed them.
func TestHeldBackByScheduler(t *testing.T) {
	kc := kafkatest.Config(t, 1)
	cc := chtest.Config(t)
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", "1",
		"--kafka-topic-prefix", kc.TopicPrefix,
		"--kafka-session-timeout", kc.SessionTimeout.String(),
		"--kafka-rebalance-timeout", kc.RebalanceTimeout.String(),
		"--clickhouse-addr", strings.Join(cc.Addr, ","),
		"--clickhouse-database", cc.Database,
		"--clickhouse-flush-interval", "100ms",
		"--log-level", "warn",
		"--max-scheduler-lag", "1s",
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv) }()

	tctx, tcancel := context.WithTimeout(ctx, 60*time.Second)
	defer tcancel()
	// The scheduler's group has committed (a group that never did is no
	// scheduler and holds nothing back) and decided nothing since.
	topics := kc.Topics()
	commit := func(offset int64) {
		t.Helper()
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		client := &kafka.Client{Addr: kafka.TCP(kc.Brokers...), Transport: tr}
		resp, err := client.OffsetCommit(tctx, &kafka.OffsetCommitRequest{
			GroupID: kc.GroupFor("scheduler"), GenerationID: -1,
			Topics: map[string][]kafka.OffsetCommit{topics.Discovered: {{Partition: 0, Offset: offset}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range resp.Topics[topics.Discovered] {
			if p.Error != nil {
				t.Fatalf("commit: %v", p.Error)
			}
		}
	}
	w := kafkaio.NewWriter(kc, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	publish := func(path string) {
		t.Helper()
		var links strings.Builder
		for i := range 20 {
			links.WriteString(`<a href="` + path + `/` + strconv.Itoa(i) + `">x</a>`)
		}
		page := &crawlv1.FetchedPage{CrawlId: "held", Url: "http://127.0.0.2" + path, StatusCode: 200, ContentType: "text/html",
			FetchedAt: timestamppb.Now(), Body: []byte("<title>t</title>" + links.String())}
		key, _ := kafkaio.Key(page.Url)
		msg, err := kafkaio.NewMessage(topics.Fetched, key, page)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(tctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	store, err := chstore.Open(tctx, cc, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stored := func(path string) bool {
		var n uint64
		row := store.Conn().QueryRow(tctx, "SELECT count() FROM documents WHERE url = ?", "http://127.0.0.2"+path)
		return row.Scan(&n) == nil && n > 0
	}
	wait := func(d time.Duration) {
		select {
		case err := <-done:
			t.Fatalf("run returned early: %v", err)
		case <-tctx.Done():
			t.Fatal("timed out")
		case <-time.After(d):
		}
	}
	commit(0)
	publish("/first")
	for !stored("/first") {
		wait(100 * time.Millisecond)
	}
	// Its 20 links wait for the scheduler: past 1 s the parse pauses.
	wait(3 * time.Second)
	publish("/second")
	wait(3 * time.Second)
	if stored("/second") {
		t.Fatal("a page was parsed while the scheduler had not decided the links published 6 s before (--max-scheduler-lag 1s)")
	}
	// The scheduler decides them: the parse resumes.
	parts, err := kafkaio.GroupOffsets(tctx, kc, kc.GroupFor("scheduler"), topics.Discovered)
	if err != nil {
		t.Fatal(err)
	}
	commit(parts[0].End)
	for !stored("/second") {
		wait(100 * time.Millisecond)
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
