package checks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// TestComposeLoads loads deployments/compose/compose.yaml with compose-go,
// the library docker compose itself loads files with: schema validation
// (unknown keys are errors), interpolation, env files (secrets.env from
// its example), consistency checks (every depends_on, volume and network
// exists). It then checks the promises of the README: health-gated start,
// one job per service in prometheus.yml, seeder serve with the token from
// an env file, a fetcher that can render (checkComposeRender).
func TestComposeLoads(t *testing.T) {
	src := filepath.Join(repoRoot(t), "deployments", "compose")
	// A copy of the directory with secrets.env made from its example, as
	// the quick start does; the relative paths to ../monitoring and the
	// build context (../..) are kept by placing the copy beside nothing:
	// they are resolved, not opened, by the loader.
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := e.Name()
		if name == "secrets.env.example" {
			name = "secrets.env"
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The ClickHouse password file the quick start creates.
	if err := os.WriteFile(filepath.Join(dir, "clickhouse_password"), []byte("0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := cli.NewProjectOptions([]string{filepath.Join(dir, "compose.yaml")},
		cli.WithWorkingDirectory(dir), cli.WithConsistency(true), cli.WithProfiles([]string{"cli"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}

	for _, name := range []string{"scheduler", "fetcher", "parser", "proxypool", "seeder"} {
		svc, ok := p.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		for _, infra := range []string{"kafka", "clickhouse"} {
			if d, ok := svc.DependsOn[infra]; !ok || d.Condition != types.ServiceConditionHealthy {
				t.Errorf("%s: want depends_on %s service_healthy, got %+v", name, infra, svc.DependsOn[infra])
			}
		}
		if d := svc.DependsOn["topics"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s: want depends_on topics service_completed_successfully", name)
		}
		if svc.Restart != types.RestartPolicyUnlessStopped {
			t.Errorf("%s: restart %q", name, svc.Restart)
		}
		if svc.Build == nil || svc.Build.Dockerfile != "deployments/docker/"+name+".Dockerfile" {
			t.Errorf("%s: build %+v", name, svc.Build)
		}
		if v := svc.Environment["CRAWLER_KAFKA_BROKERS"]; v == nil || *v != "kafka:9092" {
			t.Errorf("%s: CRAWLER_KAFKA_BROKERS %v", name, v)
		}
		if v := svc.Environment["CRAWLER_CLICKHOUSE_PASSWORD_FILE"]; v == nil || *v != "/run/secrets/clickhouse_password" {
			t.Errorf("%s: CRAWLER_CLICKHOUSE_PASSWORD_FILE %v, want the secret's file", name, v)
		}
		if !usesSecret(svc, "clickhouse_password") {
			t.Errorf("%s: secret clickhouse_password not mounted", name)
		}
	}
	// The password is a file, never a variable: no service, ClickHouse
	// included, gets it in its environment.
	for name, svc := range p.Services {
		for _, k := range []string{"CRAWLER_CLICKHOUSE_PASSWORD", "CLICKHOUSE_PASSWORD"} {
			if _, ok := svc.Environment[k]; ok {
				t.Errorf("%s: the ClickHouse password in variable %s", name, k)
			}
		}
	}
	if sec, ok := p.Secrets["clickhouse_password"]; !ok || sec.File != filepath.Join(dir, "clickhouse_password") {
		t.Errorf("secret clickhouse_password: %+v, want the file clickhouse_password", sec)
	}
	ch := p.Services["clickhouse"]
	if v := ch.Environment["CLICKHOUSE_PASSWORD_FILE"]; v == nil || *v != "/run/secrets/clickhouse_password" || !usesSecret(ch, "clickhouse_password") {
		t.Errorf("clickhouse: CLICKHOUSE_PASSWORD_FILE %v, secrets %+v: want the mounted secret", v, ch.Secrets)
	}
	if kh := p.Services["kafka"].HealthCheck; kh == nil || len(kh.Test) == 0 {
		t.Error("kafka has no health check")
	}
	if ch := p.Services["clickhouse"].HealthCheck; ch == nil || len(ch.Test) == 0 {
		t.Error("clickhouse has no health check")
	}
	seeder := p.Services["seeder"]
	if !slices.Equal(seeder.Command, types.ShellCommand{"serve"}) {
		t.Errorf("seeder command %q, want serve", seeder.Command)
	}
	if tok := seeder.Environment["CRAWLER_API_TOKEN"]; tok == nil || *tok == "" {
		t.Error("seeder serve gets no CRAWLER_API_TOKEN from the env file")
	}

	for _, bad := range checkComposeRender(p) {
		t.Error(bad)
	}

	prom, err := os.ReadFile(filepath.Join(src, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"fetcher", "parser", "scheduler", "proxypool", "seeder"} {
		if !strings.Contains(string(prom), "job_name: "+job+"\n") {
			t.Errorf("prometheus.yml has no job %s", job)
		}
	}
}

// usesSecret reports whether svc mounts the project secret name.
func usesSecret(svc types.ServiceConfig, name string) bool {
	for _, s := range svc.Secrets {
		if s.Source == name {
			return true
		}
	}
	return false
}
