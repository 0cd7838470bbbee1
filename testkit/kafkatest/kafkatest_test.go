package kafkatest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfig(t *testing.T) {
	c := kafkatest.Config(t, 3)
	if err := c.Validate(); err != nil {
		t.Fatalf("config invalid: %v", err)
	}
	if c.Partitions != 3 || !strings.HasPrefix(c.Brokers[0], "127.0.0.1:") {
		t.Errorf("config = %+v", c)
	}
	// Topics exist: ensuring them again with the same count succeeds, and
	// the prefix differs from another test's.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		t.Fatal(err)
	}
	lag, err := kafkaio.Lag(ctx, c, "g", c.Topics().Fetch)
	if err != nil || lag != 0 {
		t.Fatalf("lag of new topic = %d, %v", lag, err)
	}
	_, brokers := kafkatest.Cluster(t)
	c2 := kafkatest.ConfigFor(t, brokers, 3)
	if c2.TopicPrefix == c.TopicPrefix {
		t.Errorf("two configs share prefix %q", c.TopicPrefix)
	}
}
