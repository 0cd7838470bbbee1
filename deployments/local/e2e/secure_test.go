package e2e_test

import (
	"context"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/testkit/certtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestLauncherSecureInfra runs the launcher against existing, secured
// infrastructure the way a user points it at a managed Kafka and
// ClickHouse: a Kafka-protocol broker started outside the launcher that
// requires mutual TLS and SASL SCRAM-SHA-512, and a ClickHouse server
// reached only on its TLS port as a password user, every secret in a file.
// The launcher must start no broker and no ClickHouse of its own, pass the
// settings to every service (the Kafka ones through CRAWLER_* variables,
// the way a deployment sets them), and complete a small crawl of the demo
// site, whose pages end up in the external ClickHouse.
func TestLauncherSecureInfra(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	pki := certtest.New(t, "infra")
	brokers, _ := kafkatest.Secure(t, pki)
	kafkaPassword := pki.WriteSecret(t, "kafka-password", kafkatest.SASLPassword)

	const chPassword = "clickhouse s3cret"
	chDir := t.TempDir()
	srv, err := chlocal.StartWith(ctx, chDir, chlocal.Options{
		TLS:   &chlocal.TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile},
		Users: map[string]string{"crawler": chPassword},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	chPasswordFile := pki.WriteSecret(t, "clickhouse-password", chPassword)

	// The Kafka settings come from the environment, as in a deployment;
	// the ClickHouse ones from flags.
	env := map[string]string{
		"CRAWLER_KAFKA_BROKERS":            strings.Join(brokers, ","),
		"CRAWLER_KAFKA_TLS_CA_FILE":        pki.CAFile,
		"CRAWLER_KAFKA_TLS_CERT_FILE":      pki.ClientCert,
		"CRAWLER_KAFKA_TLS_KEY_FILE":       pki.ClientKey,
		"CRAWLER_KAFKA_SASL_MECHANISM":     kafkatest.SASLMechanism,
		"CRAWLER_KAFKA_SASL_USERNAME":      kafkatest.SASLUser,
		"CRAWLER_KAFKA_SASL_PASSWORD_FILE": kafkaPassword,
	}
	dir := t.TempDir()
	args := []string{
		"--demo", "--demo-hosts", "2", "--demo-pages", "20",
		"--crawl-id", "e2e-secure-infra", "--delay", e2eDelay.String(), "--partitions", "4",
		"--data-dir", filepath.Join(dir, "data"), "--timeout", "100s",
		"--clickhouse-addr", srv.TLSAddr(), "--clickhouse-database", "secure_infra",
		"--clickhouse-user", "crawler", "--clickhouse-password-file", chPasswordFile,
		"--clickhouse-tls-ca-file", pki.CAFile,
		"--clickhouse-tls-cert-file", pki.ClientCert, "--clickhouse-tls-key-file", pki.ClientKey,
	}
	parse := func(args []string, env map[string]string) launcher.Config {
		t.Helper()
		var cfg launcher.Config
		fs := flag.NewFlagSet("crawl", flag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := envflag.Parse(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Fatalf("flags: %v", err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("flags: %v", err)
		}
		cfg.Bins = serviceBins(t)
		return cfg
	}

	// A wrong Kafka password and an untrusted ClickHouse certificate end
	// the launcher at once, saying why.
	stranger := certtest.New(t, "stranger")
	refusals := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"wrong kafka password", args, map[string]string{
			"CRAWLER_KAFKA_SASL_PASSWORD_FILE": pki.WriteSecret(t, "wrong-kafka-password", "not it"),
		}, "kafka authentication failed"},
		{"untrusted clickhouse certificate", append(slices.Clone(args), "--clickhouse-tls-ca-file", stranger.CAFile), nil,
			"certificate signed by unknown authority"},
	}
	for _, r := range refusals {
		renv := maps.Clone(env)
		maps.Copy(renv, r.env)
		cfg := parse(r.args, renv)
		cfg.DataDir = filepath.Join(dir, "refused")
		start := time.Now()
		err := launcher.Run(ctx, cfg, strings.NewReader(""), devNull(t))
		took := time.Since(start)
		t.Logf("%s: after %v: %v", r.name, took.Round(time.Millisecond), err)
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("%s: error %v, want one saying %q", r.name, err, r.want)
		}
		if took > 30*time.Second {
			t.Errorf("%s: refused after %v, want at once", r.name, took)
		}
	}

	cfg := parse(args, env)
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	start := time.Now()
	runErr := launcher.Run(ctx, cfg, strings.NewReader(""), out)
	printed, _ := os.ReadFile(out.Name())
	if runErr != nil {
		t.Fatalf("launcher: %v\n%s\nservice logs:\n%s", runErr, printed, tails(filepath.Join(dir, "data")))
	}
	t.Logf("launcher output (%s):\n%s", time.Since(start).Round(time.Millisecond), printed)
	for _, want := range []string{"kafka at " + brokers[0], "clickhouse at " + srv.TLSAddr()} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("launcher output lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "kafka")); err == nil {
		t.Error("the launcher started an embedded broker")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "clickhouse")); err == nil {
		t.Error("the launcher started a private ClickHouse")
	}
	for _, secret := range []string{kafkatest.SASLPassword, chPassword} {
		if strings.Contains(string(printed), secret) || strings.Contains(tails(filepath.Join(dir, "data")), secret) {
			t.Errorf("a password shows in the output or the service logs")
		}
	}

	// The crawl's rows are in the external ClickHouse, read over TLS.
	store, err := chstore.Open(ctx, chstore.Config{
		Addr: []string{srv.TLSAddr()}, Database: "secure_infra", Username: "crawler", PasswordFile: chPasswordFile,
		DialTimeout: 5 * time.Second, TLS: cfg.Security.ClickHouse.TLS,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var fetched uint64
	if err := store.Conn().QueryRow(ctx,
		"SELECT uniqExact(url) FROM fetch_log WHERE crawl_id = 'e2e-secure-infra' AND status = 200").Scan(&fetched); err != nil {
		t.Fatal(err)
	}
	if fetched < 10 {
		t.Errorf("%d pages fetched through the secured infrastructure, want the demo site's (at least 10)", fetched)
	}
	t.Logf("%d pages fetched", fetched)
}

// devNull is an output file that discards what is written.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}
