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
// an env file.
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
