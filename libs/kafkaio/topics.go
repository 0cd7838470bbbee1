package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/backoff"
)

// ErrPartitionMismatch reports an existing URL topic whose partition count
// differs from Config.Partitions.
var ErrPartitionMismatch = errors.New("partition count mismatch")

// adminTimeout bounds one admin request (metadata, create topics, offsets).
const adminTimeout = 10 * time.Second

// newClient returns an admin client with its own transport (secured per
// c.TLS and c.SASL), and the security settings for the caller's readers;
// call the returned func to close its connections (the default transport
// would keep connections and metadata goroutines alive for the process
// lifetime). It fails when a TLS or SASL file cannot be read.
func newClient(c Config) (*kafka.Client, func(), security, error) {
	sec, err := c.loadSecurity()
	if err != nil {
		return nil, nil, security{}, err
	}
	tr := sec.transport()
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: adminTimeout, Transport: tr}, tr.CloseIdleConnections, sec, nil
}

// topicSpec is a topic EnsureTopics wants to exist.
type topicSpec struct {
	name       string
	partitions int
	exact      bool // partition count must match (URL topics)
	configs    []kafka.ConfigEntry
}

func topicSpecs(c Config) []topicSpec {
	t := c.Topics()
	maxBytes := kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(c.MaxMessageBytes)}
	specs := make([]topicSpec, 0, 9)
	compact := kafka.ConfigEntry{ConfigName: "cleanup.policy", ConfigValue: "compact"}
	for _, name := range t.URLTopics() {
		configs := []kafka.ConfigEntry{maxBytes}
		if name == t.HostState {
			configs = append(configs, compact)
		}
		specs = append(specs, topicSpec{name: name, partitions: c.Partitions, exact: true, configs: configs})
	}
	specs = append(specs,
		topicSpec{name: t.Proxies, partitions: ProxiesPartitions, configs: []kafka.ConfigEntry{maxBytes, compact}},
		topicSpec{name: t.ProxyState, partitions: ProxiesPartitions, configs: []kafka.ConfigEntry{maxBytes, compact}},
		topicSpec{name: t.Control, partitions: ControlPartitions, configs: []kafka.ConfigEntry{maxBytes, compact}},
		topicSpec{name: t.ProxyFeedback, partitions: c.Partitions, configs: []kafka.ConfigEntry{maxBytes}},
	)
	return specs
}

// EnsureTopics creates every topic that is missing: the topics keyed by
// politeness key (Discovered, Fetch, Fetched, HostState compacted,
// Documents) with c.Partitions partitions, Proxies, ProxyState and Control
// compacted (ProxiesPartitions, ControlPartitions), ProxyFeedback with c.Partitions
// partitions, all with max.message.bytes = c.MaxMessageBytes and a
// replication factor of min(3, brokers). An existing URL topic with another
// partition count is an error (it would break the one-partition-function
// invariant) wrapping ErrPartitionMismatch.
//
// It is idempotent and safe to run from several processes at once (a topic
// another caller created first is accepted). It retries transient broker
// errors until the topics are visible or ctx is done.
func EnsureTopics(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	client, closeClient, sec, err := newClient(c)
	if err != nil {
		return fmt.Errorf("ensure topics: %w", err)
	}
	defer closeClient()
	specs := topicSpecs(c)
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.name
	}

	retry := backoff.New(50*time.Millisecond, time.Second)
	var lastErr error
	for {
		done, err := ensureOnce(ctx, client, sec, specs, names)
		if done {
			return err
		}
		if err != nil {
			lastErr = err
		}
		if werr := retry.Wait(ctx); werr != nil {
			return fmt.Errorf("ensure topics: %w", errors.Join(werr, lastErr))
		}
	}
}

// ensureOnce makes one attempt. It returns done=false when the caller should
// retry (topics not yet visible, transient errors).
func ensureOnce(ctx context.Context, client *kafka.Client, sec security, specs []topicSpec, names []string) (bool, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: names})
	if err = sec.classify(err); errors.Is(err, ErrAuth) {
		return true, fmt.Errorf("read topic metadata: %w", err)
	}
	if err != nil {
		return ctx.Err() != nil, fmt.Errorf("read topic metadata: %w", err)
	}
	existing := make(map[string]kafka.Topic, len(meta.Topics))
	for _, t := range meta.Topics {
		if t.Error == nil && len(t.Partitions) > 0 {
			existing[t.Name] = t
		}
	}

	var missing []kafka.TopicConfig
	replication := min(3, len(meta.Brokers))
	for _, s := range specs {
		t, ok := existing[s.name]
		if !ok {
			missing = append(missing, kafka.TopicConfig{
				Topic:             s.name,
				NumPartitions:     s.partitions,
				ReplicationFactor: max(replication, 1),
				ConfigEntries:     s.configs,
			})
			continue
		}
		if s.exact && len(t.Partitions) != s.partitions {
			return true, fmt.Errorf("ensure topics: topic %s has %d partitions, want %d: %w",
				s.name, len(t.Partitions), s.partitions, ErrPartitionMismatch)
		}
	}
	if len(missing) == 0 {
		return true, nil
	}

	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: missing})
	if err = sec.classify(err); errors.Is(err, ErrAuth) {
		return true, fmt.Errorf("create topics: %w", err)
	}
	if err != nil {
		return ctx.Err() != nil, fmt.Errorf("create topics: %w", err)
	}
	for name, terr := range resp.Errors {
		switch {
		case terr == nil, errors.Is(terr, kafka.TopicAlreadyExists):
			// Created now or by a concurrent caller: the next metadata
			// round checks its partition count.
		case isRetryable(terr):
		case IsAuthError(terr):
			return true, fmt.Errorf("create topic %s: %w", name, authError(terr))
		default:
			return true, fmt.Errorf("create topic %s: %w", name, terr)
		}
	}
	// Loop once more: verifies the counts and waits until metadata shows the
	// new topics.
	return false, nil
}
