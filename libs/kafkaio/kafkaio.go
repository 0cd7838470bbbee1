// Package kafkaio is the Kafka adapter every service uses (segmentio/kafka-go):
// topic names and creation, the one partitioner, a writer that only returns
// once all in-sync replicas acknowledged, and a consumer-group runner that
// hands each assigned partition to a handler and commits the lowest
// unfinished offset.
//
// It is the only package that imports kafka-go.
package kafkaio

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// DefaultPartitions is the partition count of every URL topic.
const DefaultPartitions = 32

// Config is the broker configuration shared by every service.
type Config struct {
	Brokers          []string      // flag kafka-brokers, comma separated (default 127.0.0.1:9092)
	Partitions       int           // flag kafka-partitions (default 32): every URL topic has exactly this many
	TopicPrefix      string        // flag kafka-topic-prefix (default "crawler.")
	SessionTimeout   time.Duration // flag kafka-session-timeout (default 10s)
	RebalanceTimeout time.Duration // flag kafka-rebalance-timeout (default 10s)
	MaxMessageBytes  int           // flag kafka-max-message-bytes (default 16 MiB): topic max.message.bytes and writer batch bytes
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) { panic("unimplemented") }

// Validate reports a configuration error.
func (c Config) Validate() error { panic("unimplemented") }

// Topics names every topic of the pipeline; the only place topic names live.
type Topics struct {
	Discovered    string // DiscoveredURL, keyed by politeness key
	Fetch         string // FetchRequest, keyed by politeness key
	Fetched       string // FetchedPage, keyed by politeness key
	Proxies       string // Proxy, compacted, keyed by proxy id
	ProxyFeedback string // ProxyFeedback, keyed by proxy id
}

// Topics returns the topic names under c.TopicPrefix:
// <prefix>urls.discovered, <prefix>urls.fetch, <prefix>pages.fetched,
// <prefix>proxies, <prefix>proxies.feedback.
func (c Config) Topics() Topics { panic("unimplemented") }

// GroupFor returns the consumer group id of a service ("<prefix>scheduler",
// "<prefix>fetcher", "<prefix>parser"), so the launcher can measure lag.
func (c Config) GroupFor(service string) string { return c.TopicPrefix + service }

// EnsureTopics creates every topic that is missing: the URL topics
// (Discovered, Fetch, Fetched) with c.Partitions partitions, Proxies
// compacted, ProxyFeedback. An existing URL topic with another partition
// count is an error (it would break the one-partition-function invariant).
func EnsureTopics(ctx context.Context, c Config) error { panic("unimplemented") }

// Key returns the record key of a URL: its politeness key (urlcanon).
func Key(rawURL string) ([]byte, error) { panic("unimplemented") }

// PartitionFor returns the partition a key lands on among n partitions:
// Kafka's default murmur2 partitioner (kafka-go's Murmur2Balancer), the same
// that the Java client and librdkafka's murmur2 use.
func PartitionFor(key []byte, n int) int { panic("unimplemented") }

// NewMessage encodes m into a record for topic with the given key and the
// crawlmsg schema header.
func NewMessage(topic string, key []byte, m proto.Message) (kafka.Message, error) {
	panic("unimplemented")
}

// Decode decodes the record value into m, checking the schema header.
func Decode(msg kafka.Message, m proto.Message) error { panic("unimplemented") }

// Writer produces records to any topic (the record's Topic field). Records
// are batched across concurrent callers, compressed, partitioned with
// murmur2 on their key, and acknowledged by all in-sync replicas
// (RequireAll). Safe for concurrent use.
type Writer struct{}

// NewWriter returns a writer. reg receives the writer's metrics
// (kafka_produced_total{topic}, kafka_produce_errors_total{topic}).
func NewWriter(c Config, log *zap.Logger, reg prometheus.Registerer) *Writer { panic("unimplemented") }

// Write blocks until every record is acknowledged, or returns an error.
// Transient broker errors are retried until ctx is done.
func (w *Writer) Write(ctx context.Context, msgs ...kafka.Message) error { panic("unimplemented") }

// Close flushes and closes the writer.
func (w *Writer) Close() error { panic("unimplemented") }

// Handler processes the records of one assigned partition. One Handler is
// created per assignment and is called from one goroutine at a time.
type Handler interface {
	// Handle receives a batch of consecutive records of the partition. It
	// may return before the work is done, but must eventually call ack
	// exactly once per record, when everything the record caused is durable
	// (produced with acks=all, inserted into ClickHouse). ack is safe for
	// concurrent use. A returned error stops the partition without
	// committing past the record; the group run then fails.
	Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error
	// Close is called once when the partition is revoked or the group
	// stops. It must finish or abandon in-flight work before returning;
	// records never acked are redelivered to the next owner.
	Close(ctx context.Context) error
}

// AssignFunc creates the handler of a newly assigned partition (for
// example after loading the partition's state). An error fails the run.
type AssignFunc func(ctx context.Context, topic string, partition int) (Handler, error)

// GroupConfig configures one consumer group runner.
type GroupConfig struct {
	GroupID        string
	Topic          string
	MaxBatch       int           // records per Handle call (default 100)
	BatchWait      time.Duration // how long to wait to fill a batch (default 20ms)
	MaxInFlight    int           // unacked records per partition before reading pauses (default 1000)
	CommitInterval time.Duration // how often acked offsets are committed (default 500ms)
}

// ErrClosed is returned by a Group after Run has returned.
var ErrClosed = errors.New("group closed")

// Group consumes one topic in a consumer group: for every assigned partition
// it reads records from the committed offset, hands them to that partition's
// Handler and commits the lowest unacked offset as acks arrive. Reading a
// partition pauses while MaxInFlight records are unacked (bounded memory).
type Group struct{}

// NewGroup returns a runner; reg receives the group's metrics
// (kafka_consumed_total, kafka_commits_total, kafka_inflight,
// kafka_assigned_partitions, kafka_rebalances_total).
func NewGroup(c Config, gc GroupConfig, assign AssignFunc, log *zap.Logger, reg prometheus.Registerer) (*Group, error) {
	panic("unimplemented")
}

// Run consumes until ctx is done, then closes every handler, commits what
// was acked and leaves the group. It returns nil after a clean stop.
func (g *Group) Run(ctx context.Context) error { panic("unimplemented") }

// Assigned reports the partitions currently assigned (for readiness and
// tests).
func (g *Group) Assigned() []int { panic("unimplemented") }

// Lag returns, for group groupID, the sum over the topic's partitions of
// (high watermark - committed offset); a partition without a commit counts
// from its first offset. Used by the launcher to detect a drained crawl.
func Lag(ctx context.Context, c Config, groupID, topic string) (int64, error) { panic("unimplemented") }

// Follow reads every partition of topic from the first offset and keeps
// following it without a consumer group (for compacted state topics such as
// Proxies): fn is called for every record in partition order, tombstones
// (nil Value) included. It returns when ctx is done.
func Follow(ctx context.Context, c Config, topic string, fn func(kafka.Message)) error {
	panic("unimplemented")
}
