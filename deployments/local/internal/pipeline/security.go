package pipeline

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/tlsfiles"
)

// Security is how the pipeline reaches an existing Kafka and ClickHouse
// that require TLS or authentication: the services' own security flags
// (kafka-tls…, kafka-sasl-…, clickhouse-user, clickhouse-password-file,
// clickhouse-tls…), registered by RegisterFlags with the services' names
// and meanings. The pipeline uses them for its own connections (topics,
// schema, progress) and hands them to every service as CRAWLER_*
// variables (Env). Only the security fields of Kafka (TLS, SASL) and
// ClickHouse (Username, PasswordFile, TLS) are used.
type Security struct {
	Kafka      kafkaio.Config
	ClickHouse chstore.Config
}

// RegisterFlags binds the security flags of Kafka and ClickHouse.
func (s *Security) RegisterFlags(fs *flag.FlagSet) {
	s.Kafka.RegisterSecurityFlags(fs)
	s.ClickHouse.RegisterSecurityFlags(fs)
}

// Validate reads the files, as the services will (errors name the flag).
func (s Security) Validate() error {
	k := kafkaio.DefaultConfig()
	k.TLS, k.SASL = s.Kafka.TLS, s.Kafka.SASL
	if err := k.Validate(); err != nil {
		return err
	}
	return s.ClickHouseConfig(chstore.DefaultAddr, chstore.DefaultDatabase).Validate()
}

// ClickHouseConfig is the store configuration of the ClickHouse at addrs
// (comma-separated host:port) and database, with these settings.
func (s Security) ClickHouseConfig(addrs, database string) chstore.Config {
	user := s.ClickHouse.Username
	if user == "" {
		user = chstore.DefaultUsername
	}
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	return chstore.Config{
		Addr: list, Database: database, Username: user, PasswordFile: s.ClickHouse.PasswordFile,
		TLS: s.ClickHouse.TLS, DialTimeout: chstore.DefaultDialTimeout,
	}
}

// Absolute returns s with every file path made absolute, so that the
// services, which run in other directories, find the files.
func (s Security) Absolute() (Security, error) {
	var err error
	abs := func(p *string) {
		if *p == "" || err != nil {
			return
		}
		var a string
		if a, err = filepath.Abs(*p); err == nil {
			*p = a
		}
	}
	for _, t := range []*tlsfiles.Config{&s.Kafka.TLS, &s.ClickHouse.TLS} {
		abs(&t.CAFile)
		abs(&t.CertFile)
		abs(&t.KeyFile)
	}
	abs(&s.Kafka.SASL.PasswordFile)
	abs(&s.ClickHouse.PasswordFile)
	if err != nil {
		return s, fmt.Errorf("resolve security file path: %w", err)
	}
	return s, nil
}

// Env returns the settings as the services' CRAWLER_* variables, every
// one of them (empty strings and false included), so that they replace
// whatever the environment held: they are the launcher's decision. Only
// file paths, never a secret.
func (s Security) Env() []string {
	user := s.ClickHouse.Username
	if user == "" {
		user = chstore.DefaultUsername
	}
	kv := func(flagName, v string) string { return envflag.EnvName(flagName) + "=" + v }
	tlsEnv := func(prefix string, t tlsfiles.Config) []string {
		return []string{
			kv(prefix+"-tls", strconv.FormatBool(t.Enabled)),
			kv(prefix+"-tls-ca-file", t.CAFile),
			kv(prefix+"-tls-cert-file", t.CertFile),
			kv(prefix+"-tls-key-file", t.KeyFile),
			kv(prefix+"-tls-server-name", t.ServerName),
			kv(prefix+"-tls-insecure-skip-verify", strconv.FormatBool(t.InsecureSkipVerify)),
		}
	}
	env := tlsEnv("kafka", s.Kafka.TLS)
	env = append(env,
		kv("kafka-sasl-mechanism", s.Kafka.SASL.Mechanism),
		kv("kafka-sasl-username", s.Kafka.SASL.Username),
		kv("kafka-sasl-password-file", s.Kafka.SASL.PasswordFile),
		kv("clickhouse-user", user),
		kv("clickhouse-password-file", s.ClickHouse.PasswordFile),
	)
	return append(env, tlsEnv("clickhouse", s.ClickHouse.TLS)...)
}

// userEnv returns the environment of this process split into the
// variables that are not CRAWLER_* and the CRAWLER_* ones by name.
func userEnv() (other []string, crawler map[string]string) {
	crawler = map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, envflag.Prefix) {
			crawler[k] = v
			continue
		}
		other = append(other, kv)
	}
	return other, crawler
}
