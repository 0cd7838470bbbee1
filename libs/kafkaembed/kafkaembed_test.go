package kafkaembed_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRestartKeepsData writes records, restarts the broker on the same data
// directory, and reads them back.
func TestRestartKeepsData(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	b, err := kafkaembed.Start(ctx, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := kafkaio.DefaultConfig()
	c.Brokers = []string{b.Addr()}
	c.Partitions = 2
	c.TopicPrefix = "embed."
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		b.Close()
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(c, zaptest.NewLogger(t), nil)
	const n = 20
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Topic: c.Topics().Fetch, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
	}
	err = w.Write(ctx, msgs...)
	w.Close()
	b.Close()
	if err != nil {
		t.Fatal(err)
	}

	b2, err := kafkaembed.Start(ctx, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	c.Brokers = []string{b2.Addr()}
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		t.Fatalf("ensure topics after restart: %v", err)
	}
	lag, err := kafkaio.Lag(ctx, c, c.GroupFor("none"), c.Topics().Fetch)
	if err != nil {
		t.Fatal(err)
	}
	if lag != n {
		t.Fatalf("records after restart = %d, want %d", lag, n)
	}
}

func TestStartAddress(t *testing.T) {
	// A fixed free port is honoured.
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := kafkaembed.Start(t.Context(), t.TempDir(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Addr() != addr {
		t.Errorf("Addr() = %s, want %s", b.Addr(), addr)
	}
	if _, err := kafkaembed.Start(t.Context(), t.TempDir(), "nonsense"); err == nil {
		t.Error("Start with a bad address succeeded")
	}
}
