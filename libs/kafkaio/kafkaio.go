// Package kafkaio is the Kafka adapter every service uses (segmentio/kafka-go):
// topic names and creation, the one partitioner, a writer that only returns
// once all in-sync replicas acknowledged, and a consumer-group runner that
// hands each assigned partition to a handler and commits the lowest
// unfinished offset.
//
// Delivery is at-least-once. A Group hands each assigned partition to its
// own Handler, tracks every record from read to ack, and commits the lowest
// unacked offset every CommitInterval and once more when the partition is
// revoked (after Handler.Close) or the group stops. Records never acked are
// read again by the partition's next owner; the duplicates this causes are
// bounded by MaxInFlight per partition. Reading a partition pauses while
// MaxInFlight of its records are unacked.
//
// Errors are crash-only: a handler, assign or read error stops Run, which
// still closes the handlers, commits what was acked and leaves the group,
// and returns the error so that the process exits and restarts.
//
// It is the only package that imports kafka-go (tests aside).
package kafkaio

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/tlsfiles"
)

// DefaultPartitions is the partition count of every URL topic.
const DefaultPartitions = 32

// ControlPartitions is the partition count of the compacted Control topic:
// one ordered log of crawl specifications, small after compaction.
const ControlPartitions = 1

// ProxiesPartitions is the partition count of the compacted Proxies topic
// and of the proxy pool's compacted ProxyState topic.
// One partition keeps the proxy state in one totally ordered log that every
// fetcher follows from the start; the topic is small (one record per proxy
// after compaction), so it needs no parallelism.
const ProxiesPartitions = 1

// Config is the broker configuration shared by every service.
type Config struct {
	Brokers          []string      // flag kafka-brokers, comma separated (default 127.0.0.1:9092)
	Partitions       int           // flag kafka-partitions (default 32): every URL topic has exactly this many
	TopicPrefix      string        // flag kafka-topic-prefix (default "crawler.")
	SessionTimeout   time.Duration // flag kafka-session-timeout (default 10s)
	RebalanceTimeout time.Duration // flag kafka-rebalance-timeout (default 10s)
	MaxMessageBytes  int           // flag kafka-max-message-bytes (default 16 MiB): topic max.message.bytes and writer batch bytes
	Compression      string        // flag kafka-compression (default snappy): codec of produced batches
	FetchMinBytes    int           // flag kafka-fetch-min-bytes (default 64 KiB; 0 takes it): bytes a group's fetch waits for, up to 500ms
	FetchMaxBytes    int           // flag kafka-fetch-max-bytes (default 1 MiB; 0 takes it): bytes a group's fetch returns per partition at most
	// TLS (flags kafka-tls, kafka-tls-ca-file, kafka-tls-cert-file,
	// kafka-tls-key-file, kafka-tls-server-name,
	// kafka-tls-insecure-skip-verify) and SASL (flags kafka-sasl-mechanism,
	// kafka-sasl-username, kafka-sasl-password-file) secure every
	// connection: admin client, writers, readers and consumer groups.
	TLS  tlsfiles.Config
	SASL SASL
}

// Defaults of Config, as registered by RegisterFlags.
const (
	DefaultBrokers          = "127.0.0.1:9092"
	DefaultTopicPrefix      = "crawler."
	DefaultSessionTimeout   = 10 * time.Second
	DefaultRebalanceTimeout = 10 * time.Second
	DefaultMaxMessageBytes  = 16 << 20
	// DefaultCompression: snappy compresses HTML 2.5 times faster than
	// zstd (550 vs 220 MB/s on a 18 KB article, decoding 2.2 vs 0.9
	// GB/s) at a ratio of 2.8 against zstd's 3.4; a page crosses the
	// broker twice (fetched page, document), so codec CPU is paid per page.
	// Writers encode snappy with its fast encoder (see fastSnappy).
	DefaultCompression = "snappy"
	// DefaultFetchMinBytes: a consumer group's fetch waits at the broker
	// until a partition has this much, or fetchMaxWait has passed. With
	// one byte (Kafka's default) every produce woke every waiting fetch,
	// and the bench crawl moved its records in tiny fetches: at 64 KiB
	// the whole crawl took 23.8-27.5 s of CPU instead of 35.3-36.5 (two
	// runs each, alternated: the scheduler 2.1 -> 0.8-0.9 s, the parser
	// 10.6 -> 6.9-7.3, the broker 3.7-3.9 -> 2.1-2.6). The price is
	// latency where records trickle: up to fetchMaxWait per hop.
	DefaultFetchMinBytes = 64 << 10
	// DefaultFetchMaxBytes: what one fetch of a consumer group's partition
	// returns at most (a record batch larger than that still comes whole:
	// Kafka and kfake return the first batch whatever its size). A broker
	// builds a fetch response in memory before it sends it, and kfake keeps
	// each connection's largest response buffer for the connection's
	// life: with the fetch capped at MaxMessageBytes (16 MiB) a consumer
	// that fell behind and caught up left that much on the broker, for
	// each of its partitions, for good (the embedded broker grew from 17
	// to 65 MiB over a bench crawl, 30 MB of it such buffers at the end).
	// A fetch of 1 MiB is still sixteen times the fetch minimum.
	DefaultFetchMaxBytes = 1 << 20
)

// fetchMaxWait is how long a fetch waits at the broker for new records. A
// broker (Kafka and kfake alike) answers as soon as records arrive, so it
// bounds how often an idle partition is polled (each of the 32 partitions
// of every group at most twice a second, not five times as at kafka-go's
// 200ms); but kafka-go's Reader.Close waits for the fetch in flight, so it
// also bounds how long a revoked partition takes to close.
const fetchMaxWait = 500 * time.Millisecond

// Compressions are the accepted values of Config.Compression.
var Compressions = []string{"none", "snappy", "lz4", "zstd", "gzip"}

// DefaultConfig returns the configuration RegisterFlags installs as defaults.
func DefaultConfig() Config {
	return Config{
		Brokers:          []string{DefaultBrokers},
		Partitions:       DefaultPartitions,
		TopicPrefix:      DefaultTopicPrefix,
		SessionTimeout:   DefaultSessionTimeout,
		RebalanceTimeout: DefaultRebalanceTimeout,
		MaxMessageBytes:  DefaultMaxMessageBytes,
		Compression:      DefaultCompression,
		FetchMinBytes:    DefaultFetchMinBytes,
		FetchMaxBytes:    DefaultFetchMaxBytes,
	}
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := DefaultConfig()
	c.Brokers = d.Brokers
	fs.Var((*brokerList)(&c.Brokers), "kafka-brokers", "comma-separated Kafka bootstrap brokers (host:port)")
	fs.IntVar(&c.Partitions, "kafka-partitions", d.Partitions, "partition count of every URL topic")
	fs.StringVar(&c.TopicPrefix, "kafka-topic-prefix", d.TopicPrefix, "prefix of every topic and consumer group name")
	fs.DurationVar(&c.SessionTimeout, "kafka-session-timeout", d.SessionTimeout, "consumer group session timeout")
	fs.DurationVar(&c.RebalanceTimeout, "kafka-rebalance-timeout", d.RebalanceTimeout, "consumer group rebalance timeout")
	fs.IntVar(&c.MaxMessageBytes, "kafka-max-message-bytes", d.MaxMessageBytes, "largest record batch in bytes (topic max.message.bytes, writer batch bytes)")
	fs.StringVar(&c.Compression, "kafka-compression", d.Compression, "codec of produced record batches: "+strings.Join(Compressions, ", "))
	fs.IntVar(&c.FetchMinBytes, "kafka-fetch-min-bytes", d.FetchMinBytes, "bytes a consumer group's fetch waits for at the broker (at most 500ms); 1 for the lowest latency")
	fs.IntVar(&c.FetchMaxBytes, "kafka-fetch-max-bytes", d.FetchMaxBytes, "bytes a consumer group's fetch returns per partition at most (a larger record batch still comes whole)")
	c.RegisterSecurityFlags(fs)
}

// brokerList is a flag.Value for a comma-separated broker list.
type brokerList []string

func (b *brokerList) String() string {
	if b == nil {
		return ""
	}
	return strings.Join(*b, ",")
}

func (b *brokerList) Set(s string) error {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	*b = out
	return nil
}

// MaxPartitions is the largest accepted partition count.
const MaxPartitions = 10000

// maxMessageBytesLimit keeps max.message.bytes inside Kafka's int32 configs
// with room for the record batch overhead.
const maxMessageBytesLimit = 1 << 30

// Validate reports a configuration error, reading the TLS and SASL files
// to check them.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka-brokers: empty"))
	}
	for _, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			errs = append(errs, errors.New("kafka-brokers: empty broker address"))
			break
		}
	}
	if c.FetchMinBytes < 0 {
		errs = append(errs, fmt.Errorf("kafka-fetch-min-bytes: %d must not be negative", c.FetchMinBytes))
	}
	if c.FetchMaxBytes < 0 || c.FetchMaxBytes > maxMessageBytesLimit {
		errs = append(errs, fmt.Errorf("kafka-fetch-max-bytes: %d not in [0, 1 GiB]", c.FetchMaxBytes))
	} else if c.FetchMinBytes >= 0 && c.fetchMaxBytes() < c.fetchMinBytes() {
		errs = append(errs, fmt.Errorf("kafka-fetch-max-bytes: %d below kafka-fetch-min-bytes %d", c.fetchMaxBytes(), c.fetchMinBytes()))
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, fmt.Errorf("kafka-partitions: %d not in [1, %d]", c.Partitions, MaxPartitions))
	}
	if !validTopicChars(c.TopicPrefix) {
		errs = append(errs, fmt.Errorf("kafka-topic-prefix: %q has characters outside [a-zA-Z0-9._-]", c.TopicPrefix))
	}
	if c.SessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("kafka-session-timeout: %v must be positive", c.SessionTimeout))
	}
	if c.RebalanceTimeout <= 0 {
		errs = append(errs, fmt.Errorf("kafka-rebalance-timeout: %v must be positive", c.RebalanceTimeout))
	}
	if c.Compression != "" && !slices.Contains(Compressions, c.Compression) {
		errs = append(errs, fmt.Errorf("kafka-compression: %q not one of %s", c.Compression, strings.Join(Compressions, ", ")))
	}
	if c.MaxMessageBytes < 1<<20 || c.MaxMessageBytes > maxMessageBytesLimit {
		errs = append(errs, fmt.Errorf("kafka-max-message-bytes: %d not in [1 MiB, 1 GiB]", c.MaxMessageBytes))
	}
	// The certificate, key and password files are read here too, so that
	// a missing or malformed one fails the service at start with the
	// flag's name rather than at its first connection.
	if _, err := c.loadSecurity(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validTopicChars(s string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// Topics names every topic of the pipeline; the only place topic names live.
type Topics struct {
	Discovered    string // DiscoveredURL, keyed by politeness key
	Fetch         string // FetchRequest, keyed by politeness key
	Fetched       string // FetchedPage, keyed by politeness key
	Proxies       string // Proxy, compacted, keyed by proxy id
	ProxyState    string // ProxyState (the proxy pool's own state), compacted, keyed by proxy id
	ProxyFeedback string // ProxyFeedback, keyed by proxy id
	Control       string // CrawlSpec, compacted, keyed by crawl id
	HostState     string // fetcher per-host politeness state, compacted, keyed by politeness key
	Documents     string // extracted documents for downstream consumers, keyed by politeness key
}

// Topics returns the topic names under c.TopicPrefix:
// <prefix>urls.discovered, <prefix>urls.fetch, <prefix>pages.fetched,
// <prefix>proxies, <prefix>proxypool.state, <prefix>proxies.feedback, <prefix>control,
// <prefix>fetcher.hoststate, <prefix>documents.
func (c Config) Topics() Topics {
	p := c.TopicPrefix
	return Topics{
		Discovered:    p + "urls.discovered",
		Fetch:         p + "urls.fetch",
		Fetched:       p + "pages.fetched",
		Proxies:       p + "proxies",
		ProxyState:    p + "proxypool.state",
		ProxyFeedback: p + "proxies.feedback",
		Control:       p + "control",
		HostState:     p + "fetcher.hoststate",
		Documents:     p + "documents",
	}
}

// URLTopics returns the topics keyed by politeness key, which must all have
// c.Partitions partitions so that partition p of each holds the same hosts.
func (t Topics) URLTopics() []string {
	return []string{t.Discovered, t.Fetch, t.Fetched, t.HostState, t.Documents}
}

// GroupFor returns the consumer group id of a service ("<prefix>scheduler",
// "<prefix>fetcher", "<prefix>parser"), so the launcher can measure lag.
func (c Config) GroupFor(service string) string { return c.TopicPrefix + service }

// fetchMaxBytes is FetchMaxBytes with its default for zero.
func (c Config) fetchMaxBytes() int {
	if c.FetchMaxBytes <= 0 {
		return DefaultFetchMaxBytes
	}
	return c.FetchMaxBytes
}

// fetchMinBytes is FetchMinBytes with its default for zero.
func (c Config) fetchMinBytes() int {
	if c.FetchMinBytes <= 0 {
		return DefaultFetchMinBytes
	}
	return c.FetchMinBytes
}
