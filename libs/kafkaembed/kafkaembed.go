// Package kafkaembed runs an embedded Kafka-protocol broker (franz-go's
// kfake) for local development: one broker, listening on a TCP address,
// persisting its log and group state in a data directory so that a crawl
// survives restarts of the launcher. Production uses a real Kafka cluster;
// tests use testkit/kafkatest.
package kafkaembed

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// MaxMessageBytes is the broker's message.max.bytes; topics created by
// kafkaio set their own max.message.bytes below it.
const MaxMessageBytes = 64 << 20

// Broker is a running embedded broker. Close stops it.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	refused *atomic.Int64
}

// Start starts a broker listening on addr ("127.0.0.1:9092"; port 0 picks a
// free port, see Addr) that persists its state in dir (created if missing,
// reloaded if it holds a previous run). Topics are not auto-created:
// kafkaio.EnsureTopics creates them. opts are appended to the defaults (one
// broker, 100ms minimum session timeout, 64 MiB message.max.bytes,
// requests of at most MaxRequestBytes) for callers that need more control.
//
// ctx bounds nothing after Start returns; loading the data directory is not
// interruptible, so ctx is only checked before starting.
func Start(ctx context.Context, dir, addr string, opts ...kfake.Opt) (*Broker, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka: parse address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return nil, fmt.Errorf("start embedded kafka: parse port %q: %w", port, err)
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("start embedded kafka: create data dir: %w", err)
		}
	}
	refused := new(atomic.Int64)
	base := []kfake.Opt{
		kfake.NumBrokers(1),
		// kfake always asks for 127.0.0.1:<port>; listen where asked, and
		// refuse requests over MaxRequestBytes (see guard.go).
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := new(net.ListenConfig).Listen(ctx, network, net.JoinHostPort(host, port))
			if err != nil {
				return nil, err
			}
			return guardListener{Listener: ln, limit: MaxRequestBytes, refused: refused}, nil
		}),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(MaxMessageBytes)}),
	}
	if dir != "" {
		base = append(base, kfake.DataDir(dir))
	}
	cluster, err := kfake.NewCluster(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka: %w", err)
	}
	addrs := cluster.ListenAddrs()
	if len(addrs) == 0 {
		cluster.Close()
		return nil, fmt.Errorf("start embedded kafka: no listener")
	}
	return &Broker{cluster: cluster, addr: addrs[0], refused: refused}, nil
}

// Refused returns how many connections the broker closed because a request
// claimed more than MaxRequestBytes: clients that do not speak Kafka.
func (b *Broker) Refused() int64 { return b.refused.Load() }

// Addr returns the broker's listen address (host:port), for
// kafkaio.Config.Brokers.
func (b *Broker) Addr() string { return b.addr }

// Cluster returns the underlying kfake cluster (for tests and tooling).
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the broker, flushing its state to the data directory. Safe to
// call more than once.
func (b *Broker) Close() { b.cluster.Close() }
