// Package kafkatest starts a real Kafka-protocol broker for tests: an
// in-process kfake cluster listening on a loopback TCP port, one per test.
package kafkatest

import (
	"testing"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Config starts a broker for the test (closed at cleanup) and returns a
// kafkaio.Config pointing at it, with partitions partitions, short session
// timeouts, and the topics already created.
func Config(t testing.TB, partitions int) kafkaio.Config { panic("unimplemented") }
