package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfraFlags: --kafka-brokers and the security flags are read from
// flags and CRAWLER_* variables (a flag wins), and a bad combination or an
// unreadable secret file is refused before anything starts.
func TestInfraFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		err  string // "" for none
		want func(Config) bool
	}{
		{"embedded by default", []string{"--demo"}, nil, "", func(c Config) bool {
			return c.KafkaBrokers == "" && c.Security.Kafka.SASL.Mechanism == "" && !c.Security.Kafka.TLS.On()
		}},
		{"from the environment", []string{"--demo"}, map[string]string{
			"CRAWLER_KAFKA_BROKERS": "k1:9093,k2:9093", "CRAWLER_KAFKA_TLS": "true",
			"CRAWLER_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "CRAWLER_KAFKA_SASL_USERNAME": "u",
			"CRAWLER_KAFKA_SASL_PASSWORD_FILE": pw, "CRAWLER_CLICKHOUSE_PASSWORD_FILE": pw,
		}, "", func(c Config) bool {
			return c.KafkaBrokers == "k1:9093,k2:9093" && c.Security.Kafka.TLS.Enabled &&
				c.Security.Kafka.SASL.PasswordFile == pw && c.Security.ClickHouse.PasswordFile == pw
		}},
		{"flag wins", []string{"--demo", "--kafka-brokers", "k3:9093"}, map[string]string{"CRAWLER_KAFKA_BROKERS": "k1:9093"}, "",
			func(c Config) bool { return c.KafkaBrokers == "k3:9093" }},
		{"missing password file", []string{"--demo", "--kafka-sasl-mechanism", "PLAIN", "--kafka-sasl-username", "u",
			"--kafka-sasl-password-file", filepath.Join(dir, "nope")}, nil, "kafka-sasl-password-file: open", nil},
		{"broker process and brokers", []string{"--demo", "--broker-process", "--kafka-brokers", "k:9092"}, nil, "give one", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(t, tt.args, tt.env)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
			case err != nil:
				t.Fatal(err)
			case !tt.want(cfg):
				t.Fatalf("config %+v", cfg)
			}
		})
	}
}
