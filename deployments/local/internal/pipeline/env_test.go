package pipeline

import (
	"flag"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// TestCommonEnvMemoryLimits: every service process gets its service's
// memory limit, a fetcher instance too; an empty map sets none.
func TestCommonEnvMemoryLimits(t *testing.T) {
	limitOf := func(env []string) string {
		i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CRAWLER_MEMORY_LIMIT=") })
		if i < 0 {
			return ""
		}
		return strings.TrimPrefix(env[i], "CRAWLER_MEMORY_LIMIT=")
	}
	p := newPipeline(Config{})
	limit := func(service string) string { return strconv.FormatInt(DefaultMemoryLimits[service], 10) }
	tests := []struct{ name, want string }{
		{"fetcher-1", limit("fetcher")}, // an instance takes its service's limit
		{"parser", limit("parser")},
		{"seeder", limit("seeder")},
		{"websim", ""}, // not a service of the pipeline
	}
	for _, tt := range tests {
		if got := limitOf(p.CommonEnv(tt.name, "")); got != tt.want {
			t.Errorf("%s: limit %q, want %q", tt.name, got, tt.want)
		}
	}
	none := newPipeline(Config{MemoryLimits: map[string]int64{}})
	if got := limitOf(none.CommonEnv("parser", "")); got != "" {
		t.Errorf("no limits: parser limit %q", got)
	}
}

// envValue returns the value a process with env sees for key (the last
// occurrence wins, as exec does) and whether it is set.
func envValue(env []string, key string) (string, bool) {
	var v string
	var ok bool
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); k == key {
			v, ok = val, true
		}
	}
	return v, ok
}

// TestCommonEnvPassThrough: the user's CRAWLER_* variables reach the
// services, except the wiring the pipeline decides (its brokers,
// ClickHouse, admin address and security win), while the tuning it only
// defaults (log level, memory limit) yields to the user's.
func TestCommonEnvPassThrough(t *testing.T) {
	t.Setenv("CRAWLER_USER_AGENT", "trawl-test/1")
	t.Setenv("CRAWLER_KAFKA_BROKERS", "elsewhere:9092")
	t.Setenv("CRAWLER_CLICKHOUSE_ADDR", "elsewhere:9000")
	t.Setenv("CRAWLER_ADMIN_ADDR", "0.0.0.0:1")
	t.Setenv("CRAWLER_KAFKA_SASL_PASSWORD_FILE", "/elsewhere/password")
	t.Setenv("CRAWLER_LOG_LEVEL", "debug")
	t.Setenv("CRAWLER_MEMORY_LIMIT", "123")
	t.Setenv("HOME_OF_TEST", "kept")
	p := newPipeline(Config{ClickHouseAddr: "127.0.0.1:9440", Security: Security{
		Kafka: kafkaio.Config{SASL: kafkaio.SASL{Mechanism: "PLAIN", Username: "u", PasswordFile: "/run/secrets/kafka"}},
	}})
	p.Kafka = kafkaio.Config{Brokers: []string{"127.0.0.1:9093"}}
	env := p.CommonEnv("fetcher-0", "/data/run/fetcher-0.admin")
	tests := []struct{ key, want string }{
		{"CRAWLER_USER_AGENT", "trawl-test/1"},
		{"HOME_OF_TEST", "kept"},
		{"CRAWLER_KAFKA_BROKERS", "127.0.0.1:9093"},
		{"CRAWLER_CLICKHOUSE_ADDR", "127.0.0.1:9440"},
		{"CRAWLER_ADMIN_ADDR", "127.0.0.1:0"},
		{"CRAWLER_ADMIN_ADDR_FILE", "/data/run/fetcher-0.admin"},
		{"CRAWLER_KAFKA_SASL_PASSWORD_FILE", "/run/secrets/kafka"},
		{"CRAWLER_KAFKA_SASL_MECHANISM", "PLAIN"},
		{"CRAWLER_CLICKHOUSE_USER", "default"},
		{"CRAWLER_LOG_LEVEL", "debug"},
		{"CRAWLER_MEMORY_LIMIT", "123"},
		{"CRAWLER_LOG_FORMAT", "json"},
	}
	for _, tt := range tests {
		if got, ok := envValue(env, tt.key); !ok || got != tt.want {
			t.Errorf("%s = %q (set %v), want %q", tt.key, got, ok, tt.want)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CRAWLER_KAFKA_BROKERS=") && kv != "CRAWLER_KAFKA_BROKERS=127.0.0.1:9093" {
			t.Errorf("the user's broker variable is still there: %s", kv)
		}
	}
}

// TestSecurityEnvCoversFlags: every security flag the launcher registers
// (the services' own) reaches the services as its CRAWLER_* variable, so
// that a flag added to kafkaio, chstore or tlsfiles cannot be forgotten
// here.
func TestSecurityEnvCoversFlags(t *testing.T) {
	var s Security
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	s.RegisterFlags(fs)
	want := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		v := "/x/" + f.Name
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			v = "true"
		}
		if err := fs.Set(f.Name, v); err != nil {
			t.Fatal(err)
		}
		want[envflag.EnvName(f.Name)] = v
	})
	if len(want) < 15 {
		t.Fatalf("only %d security flags registered", len(want))
	}
	env := s.Env()
	for k, v := range want {
		if got, ok := envValue(env, k); !ok || got != v {
			t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
		}
	}
	if len(env) != len(want) {
		t.Errorf("%d variables for %d flags: %v", len(env), len(want), env)
	}
}

// TestFetcherArgsWarc: with a WARC directory, each fetcher archives into
// a directory of its own (a fetcher locks its --warc-dir); without, no
// --warc-dir is passed.
func TestFetcherArgsWarc(t *testing.T) {
	with := newPipeline(Config{WarcDir: "/data/warc"})
	for i, want := range []string{"/data/warc/fetcher-0", "/data/warc/fetcher-1"} {
		args := with.fetcherArgs(i)
		j := slices.Index(args, "--warc-dir")
		if j < 0 || j+1 >= len(args) || args[j+1] != want {
			t.Errorf("fetcher %d: args %q, want --warc-dir %s", i, args, want)
		}
	}
	if args := newPipeline(Config{}).fetcherArgs(0); slices.Contains(args, "--warc-dir") {
		t.Errorf("without a WARC directory: args %q", args)
	}
}
