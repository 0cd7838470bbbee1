package kafkaio_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// TestFollowSurvivesBrokerRestart: a follower of a state topic (the crawl
// specifications, the proxies) rides out a broker restart: it neither
// returns nor misses a record, and reads on once the broker is back. The
// services run it in their run groups, where an error ends the process.
func TestFollowSurvivesBrokerRestart(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	b, err := kafkaembed.Start(ctx, dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { b.Close() }()
	c := kafkaio.DefaultConfig()
	c.Brokers = []string{addr}
	c.Partitions = 2
	c.TopicPrefix = "follow-restart."
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		t.Fatal(err)
	}
	topic := c.Topics().Control
	write := func(keys ...string) {
		t.Helper()
		w := kafkaio.NewWriter(c, nopLogger(t), nil)
		defer w.Close()
		var msgs []kafka.Message
		for _, k := range keys {
			msgs = append(msgs, kafka.Message{Topic: topic, Key: []byte(k), Value: []byte(k)})
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	has := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n
	}
	waitSeen := func(n int) {
		t.Helper()
		for !has(n) {
			select {
			case <-ctx.Done():
				t.Fatalf("follower saw %d records, want %d", len(seen), n)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	write("a", "b", "c")
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- kafkaio.Follow(fctx, c, topic, func(m kafka.Message) {
			mu.Lock()
			seen[string(m.Key)] = true
			mu.Unlock()
		})
	}()
	waitSeen(3)

	b.Close()
	select { // down long enough for the readers to report errors
	case err := <-done:
		t.Fatalf("follow ended while the broker was down: %v", err)
	case <-time.After(3 * time.Second):
	}
	if b, err = kafkaembed.Start(ctx, dir, addr); err != nil {
		t.Fatal(err)
	}
	write("d", "e")
	waitSeen(5)
	stop()
	if err := <-done; err != nil {
		t.Errorf("follow: %v, want nil at cancel", err)
	}
}
