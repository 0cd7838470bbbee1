// Package svctest points a service's configuration at the test broker and
// ClickHouse, or at an address where one of them is missing: what the
// services' internal/app tests share.
package svctest

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// Broken names the dependency Args points at a dead address.
const (
	None       = ""
	Kafka      = "kafka"
	ClickHouse = "clickhouse"
)

// ClosedAddr returns a loopback address nothing listens on any more.
func ClosedAddr(t testing.TB) string {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Args returns the flags that give a service a real broker (kafkatest,
// two partitions) and a fresh ClickHouse database (chtest), with a short
// dial timeout; broken (Kafka or ClickHouse) replaces that address by
// ClosedAddr.
func Args(t testing.TB, broken string) []string {
	t.Helper()
	kcfg := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	brokers, chAddr := strings.Join(kcfg.Brokers, ","), strings.Join(ch.Addr, ",")
	switch broken {
	case Kafka:
		brokers = ClosedAddr(t)
	case ClickHouse:
		chAddr = ClosedAddr(t)
	}
	return []string{
		"-kafka-brokers", brokers,
		"-kafka-partitions", strconv.Itoa(kcfg.Partitions),
		"-kafka-topic-prefix", kcfg.TopicPrefix,
		"-clickhouse-addr", chAddr,
		"-clickhouse-database", ch.Database,
		"-clickhouse-dial-timeout", "2s",
	}
}
