package kafkaembed_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
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

// TestRefusesNonKafkaClient sends an HTTP request to the broker's port:
// kfake would read "GET " as a 1.2 GB request and wait for it; the
// broker closes the connection at once and goes on serving Kafka clients.
func TestRefusesNonKafkaClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := kafkaembed.Start(ctx, t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	conn, err := new(net.Dialer).DialContext(ctx, "tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: broker\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after an HTTP request = %d, %v; want the connection closed", n, err)
	}
	if got := b.Refused(); got != 1 {
		t.Errorf("Refused() = %d, want 1", got)
	}

	c := kafkaio.DefaultConfig()
	c.Brokers = []string{b.Addr()}
	c.Partitions = 1
	c.TopicPrefix = "guard."
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		t.Fatalf("a Kafka client after the refusal: %v", err)
	}
}
