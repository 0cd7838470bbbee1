package kafkaio_test

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/tlsfiles"
	"github.com/trawl-crawler/trawl/testkit/certtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// countingListen is a kfake.ListenFn that counts the TCP connections the
// broker accepts, below TLS: every connection attempt of a client.
func countingListen(accepted *atomic.Int64) kfake.Opt {
	return kfake.ListenFn(func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr) //nolint:noctx // kfake's listen hook has no context
		if err != nil {
			return nil, err
		}
		return &countedListener{Listener: ln, n: accepted}, nil
	})
}

type countedListener struct {
	net.Listener
	n *atomic.Int64
}

func (l *countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// TestSecureProduceConsume: through mutual TLS and SASL SCRAM-SHA-512 the
// topics are created, records produced, consumed by a group, committed
// (lag 0) and read back without a group: every kind of connection the
// package makes (admin client, writer, group coordinator, partition
// readers) authenticates.
func TestSecureProduceConsume(t *testing.T) {
	pki := certtest.New(t, "kafka")
	brokers, secure := kafkatest.Secure(t, pki)
	c := kafkatest.SecureConfigFor(t, brokers, 2, secure)

	topic := c.Topics().Fetch
	values := produce(t, c, topic, "secure", 40)

	rec := newRecorder(nil)
	g, err := kafkaio.NewGroup(c, groupConfig(c, topic), rec.assign, nopLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop := runGroup(t, g)
	eventually(t, 20*time.Second, "all records consumed", func() bool { return rec.distinct() == len(values) })
	eventually(t, 20*time.Second, "lag 0", func() bool { return lagOf(t, c, groupConfig(c, topic).GroupID, topic) == 0 })
	if err := stop(); err != nil {
		t.Fatalf("group run: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var read int
	if err := kafkaio.ReadToEnd(ctx, c, topic, kafkaio.ReadOptions{}, func(kafka.Message) { read++ }); err != nil {
		t.Fatalf("read to end: %v", err)
	}
	if read != len(values) {
		t.Errorf("read %d records back, want %d", read, len(values))
	}
}

// TestSecureRefusals: a wrong password, a server certificate from a CA
// the client does not trust, and a missing client certificate each fail
// every entry point at once with ErrAuth and a message that says why,
// after a handful of connections (no retry storm: the retry loops of
// EnsureTopics, Write and Group.Run would otherwise keep connecting until
// their context ends). The password never appears in an error.
func TestSecureRefusals(t *testing.T) {
	pki := certtest.New(t, "kafka")
	var accepted atomic.Int64
	brokers, secure := kafkatest.Secure(t, pki, countingListen(&accepted))
	good := kafkatest.SecureConfigFor(t, brokers, 2, secure)
	stranger := certtest.New(t, "stranger")

	tests := []struct {
		name   string
		modify func(*kafkaio.Config)
		want   string // in the error text
		// silent: the brokers close the connection without a word, which
		// only repeated connections tell from a dropped one (after
		// silentDials), so a one-shot call (Lag) reports the bare EOF.
		silent bool
	}{
		{"wrong password", func(c *kafkaio.Config) {
			c.SASL.PasswordFile = pki.WriteSecret(t, "wrong-password", "Tr0ub4dor&3")
		}, "sasl authentication", false},
		{"wrong mechanism", func(c *kafkaio.Config) {
			c.SASL.Mechanism = kafkaio.SASLPlain
		}, "sasl authentication", false},
		{"untrusted server certificate", func(c *kafkaio.Config) {
			c.TLS.CAFile = stranger.CAFile
		}, "certificate signed by unknown authority", false},
		{"no client certificate", func(c *kafkaio.Config) {
			c.TLS.CertFile, c.TLS.KeyFile = "", ""
		}, "certificate required", false},
		{"plain text to a TLS listener", func(c *kafkaio.Config) {
			c.TLS = tlsfiles.Config{}
		}, "without answering", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.modify(&c)
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, kafkaio.ErrAuth) || !kafkaio.IsAuthError(err) {
					t.Fatalf("%s: error %v, want one wrapping ErrAuth", what, err)
				}
				if !strings.Contains(strings.ToLower(err.Error()), tt.want) {
					t.Errorf("%s: error %q does not say %q", what, err, tt.want)
				}
				t.Logf("%s: %v", what, err)
				if strings.Contains(err.Error(), kafkatest.SASLPassword) {
					t.Errorf("%s: error shows the password: %v", what, err)
				}
			}
			// Each call may take a few connections (kafka-go's transport
			// and readers retry a dial or two); a retry loop would take
			// one or more per back-off step until the 30s context ends.
			const maxConns = 12
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			run := func(what string, call func() error) {
				t.Helper()
				before := accepted.Load()
				start := time.Now()
				err := call()
				took := time.Since(start)
				t.Logf("%s: gave up after %v, %d connections", what, took.Round(time.Millisecond), accepted.Load()-before)
				check(what, err)
				if conns := accepted.Load() - before; conns > maxConns {
					t.Errorf("%s: %d connections before giving up, want at most %d", what, conns, maxConns)
				}
				// A silent close costs silentDials connections, each
				// waiting for Go's TLS server to give up on a record
				// header that is a Kafka request (about 3s each here).
				limit := 10 * time.Second
				if tt.silent {
					limit = 25 * time.Second
				}
				if took > limit {
					t.Errorf("%s: gave up after %v, want within %v", what, took, limit)
				}
			}
			run("ensure topics", func() error { return kafkaio.EnsureTopics(ctx, c) })
			run("write", func() error {
				w := kafkaio.NewWriter(c, nopLogger(t), nil)
				defer w.Close()
				return w.Write(ctx, kafka.Message{Topic: c.Topics().Fetch, Key: []byte("k"), Value: []byte("v")})
			})
			if tt.silent {
				if _, err := kafkaio.Lag(ctx, c, c.GroupFor("x"), c.Topics().Fetch); err == nil {
					t.Error("lag: no error")
				}
			} else {
				run("lag", func() error {
					_, err := kafkaio.Lag(ctx, c, c.GroupFor("x"), c.Topics().Fetch)
					return err
				})
			}
			run("group", func() error {
				g, err := kafkaio.NewGroup(c, groupConfig(c, c.Topics().Fetch), newRecorder(nil).assign, nopLogger(t), nil)
				if err != nil {
					return err
				}
				return g.Run(ctx)
			})
		})
	}
}

// TestSecurityConfig: the security flags and their CRAWLER_* variables
// fill the Config, and a bad combination or an unreadable file is a
// Validate error naming the flag.
func TestSecurityConfig(t *testing.T) {
	pki := certtest.New(t, "kafka")
	dir := t.TempDir()
	password := pki.WriteSecret(t, "password", "p@ss")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("flags and environment", func(t *testing.T) {
		var c kafkaio.Config
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		c.RegisterFlags(fs)
		env := map[string]string{
			"CRAWLER_KAFKA_TLS_CA_FILE":        pki.CAFile,
			"CRAWLER_KAFKA_SASL_MECHANISM":     "SCRAM-SHA-256",
			"CRAWLER_KAFKA_SASL_USERNAME":      "u",
			"CRAWLER_KAFKA_SASL_PASSWORD_FILE": password,
		}
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		args := []string{"--kafka-tls-cert-file", pki.ClientCert, "--kafka-tls-key-file", pki.ClientKey, "--kafka-tls-server-name", "localhost"}
		if err := envflag.Parse(fs, args, lookup); err != nil {
			t.Fatal(err)
		}
		want := kafkaio.SASL{Mechanism: "SCRAM-SHA-256", Username: "u", PasswordFile: password}
		if c.SASL != want || c.TLS.CAFile != pki.CAFile || c.TLS.CertFile != pki.ClientCert || c.TLS.ServerName != "localhost" || !c.TLS.On() {
			t.Fatalf("config %+v", c)
		}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	})

	tests := []struct {
		name   string
		modify func(*kafkaio.Config)
		want   string // in the Validate error; "" for none
	}{
		{"plain text", func(*kafkaio.Config) {}, ""},
		{"tls with system roots", func(c *kafkaio.Config) { c.TLS.Enabled = true }, ""},
		{"unknown mechanism", func(c *kafkaio.Config) {
			c.SASL = kafkaio.SASL{Mechanism: "GSSAPI", Username: "u", PasswordFile: password}
		}, `kafka-sasl-mechanism: "GSSAPI" not one of`},
		{"no user", func(c *kafkaio.Config) {
			c.SASL = kafkaio.SASL{Mechanism: "PLAIN", PasswordFile: password}
		}, "kafka-sasl-username: required"},
		{"no password file", func(c *kafkaio.Config) { c.SASL = kafkaio.SASL{Mechanism: "PLAIN", Username: "u"} }, "kafka-sasl-password-file: required"},
		{"missing password file", func(c *kafkaio.Config) {
			c.SASL = kafkaio.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: filepath.Join(dir, "nope")}
		}, "kafka-sasl-password-file: open"},
		{"empty password file", func(c *kafkaio.Config) {
			c.SASL = kafkaio.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: empty}
		}, "is empty"},
		{"user without mechanism", func(c *kafkaio.Config) { c.SASL.Username = "u" }, "given without -kafka-sasl-mechanism"},
		{"ca file not pem", func(c *kafkaio.Config) { c.TLS.CAFile = notPEM }, "kafka-tls-ca-file: " + notPEM + " holds no PEM certificate"},
		{"cert without key", func(c *kafkaio.Config) { c.TLS.CertFile = pki.ClientCert }, "kafka-tls-cert-file: given without -kafka-tls-key-file"},
		{"key of another cert", func(c *kafkaio.Config) {
			c.TLS.CertFile, c.TLS.KeyFile = pki.ClientCert, pki.ServerKey
		}, "private key does not match public key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkaio.DefaultConfig()
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "p@ss"):
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}
