// Package kafkatest starts a real Kafka-protocol broker for tests: an
// in-process kfake cluster listening on a loopback TCP port, one per test.
package kafkatest

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/certtest"
)

// Timeouts of the returned Config: short so that rebalances in tests take
// about a second, long enough for a loaded CI machine.
const (
	SessionTimeout   = 3 * time.Second
	RebalanceTimeout = 4 * time.Second
)

// brokerMaxMessageBytes is the broker-wide message.max.bytes; topics set
// their own (kafkaio.Config.MaxMessageBytes) below it.
const brokerMaxMessageBytes = 64 << 20

var prefixSeq atomic.Int64

// Cluster starts a kfake cluster on random 127.0.0.1 ports (one broker
// unless opts say otherwise), closed at cleanup, and returns it with its
// broker addresses. Topics are not auto-created. opts come after the
// defaults (one broker, 100ms minimum session timeout, 64 MiB
// message.max.bytes), so they may override them.
func Cluster(t testing.TB, opts ...kfake.Opt) (*kfake.Cluster, []string) {
	t.Helper()
	base := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(brokerMaxMessageBytes)}),
	}
	c, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		t.Fatalf("start kfake cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// Config starts a broker for the test (closed at cleanup) and returns a
// kafkaio.Config pointing at it, with partitions partitions, short session
// timeouts, a topic prefix unique to the test, and the topics already
// created.
func Config(t testing.TB, partitions int) kafkaio.Config {
	t.Helper()
	_, brokers := Cluster(t)
	return ConfigFor(t, brokers, partitions)
}

// ConfigFor returns a Config for an already running cluster (see Cluster)
// with a fresh topic prefix, and creates its topics.
func ConfigFor(t testing.TB, brokers []string, partitions int) kafkaio.Config {
	t.Helper()
	return SecureConfigFor(t, brokers, partitions, nil)
}

// SecureConfigFor is ConfigFor with security settings: secure, when not
// nil, sets the Config's TLS and SASL before the topics are created.
func SecureConfigFor(t testing.TB, brokers []string, partitions int, secure func(*kafkaio.Config)) kafkaio.Config {
	t.Helper()
	c := kafkaio.DefaultConfig()
	if secure != nil {
		secure(&c)
	}
	c.Brokers = brokers
	c.Partitions = partitions
	c.TopicPrefix = prefixFor(t)
	c.SessionTimeout = SessionTimeout
	c.RebalanceTimeout = RebalanceTimeout
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, c); err != nil {
		t.Fatalf("create test topics: %v", err)
	}
	return c
}

// Credentials of the SASL user of a Secure cluster.
const (
	SASLUser      = "trawl"
	SASLPassword  = "correct horse battery staple"
	SASLMechanism = kafkaio.SASLScramSHA512
)

// Secure starts a cluster (closed at cleanup) that accepts only TLS
// connections presenting a client certificate signed by pki's CA (mutual
// TLS) and authenticated with SASL SCRAM-SHA-512 as SASLUser, the way a
// managed Kafka is reached. It returns the brokers and a function that
// configures a kafkaio.Config for it (CA, client certificate and key,
// SCRAM-SHA-512 with the password in a file) for SecureConfigFor. opts
// come after the security options.
func Secure(t testing.TB, pki *certtest.PKI, opts ...kfake.Opt) ([]string, func(*kafkaio.Config)) {
	t.Helper()
	sec := []kfake.Opt{
		kfake.EnableSASL(),
		kfake.Superuser(SASLMechanism, SASLUser, SASLPassword),
		kfake.TLS(pki.ServerTLS(true)),
	}
	_, brokers := Cluster(t, append(sec, opts...)...)
	passwordFile := pki.WriteSecret(t, "kafka-password", SASLPassword)
	return brokers, func(c *kafkaio.Config) {
		c.TLS.CAFile = pki.CAFile
		c.TLS.CertFile = pki.ClientCert
		c.TLS.KeyFile = pki.ClientKey
		c.SASL = kafkaio.SASL{Mechanism: SASLMechanism, Username: SASLUser, PasswordFile: passwordFile}
	}
}

// prefixFor derives a topic prefix from the test name plus a sequence
// number: readable in logs, unique within the process.
func prefixFor(t testing.TB) string {
	var b strings.Builder
	for _, r := range t.Name() {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 60 {
			break
		}
	}
	return "t" + strconv.FormatInt(prefixSeq.Add(1), 10) + "-" + b.String() + "."
}
