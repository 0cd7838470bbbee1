package pipeline

import (
	"slices"
	"strings"
	"testing"
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
	tests := []struct{ name, want string }{
		{"fetcher-1", "75497472"},
		{"parser", "184549376"},
		{"seeder", "33554432"},
		{"websim", ""}, // not a service of the pipeline
	}
	for _, tt := range tests {
		if got := limitOf(p.CommonEnv(tt.name, "127.0.0.1:1")); got != tt.want {
			t.Errorf("%s: limit %q, want %q", tt.name, got, tt.want)
		}
	}
	none := newPipeline(Config{MemoryLimits: map[string]int64{}})
	if got := limitOf(none.CommonEnv("parser", "127.0.0.1:1")); got != "" {
		t.Errorf("no limits: parser limit %q", got)
	}
}

// TestCommonEnvGCPercents: the parser gets its collector target, a
// service without one none; an empty map sets none.
func TestCommonEnvGCPercents(t *testing.T) {
	gcOf := func(env []string) string {
		i := slices.IndexFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CRAWLER_GC_PERCENT=") })
		if i < 0 {
			return ""
		}
		return strings.TrimPrefix(env[i], "CRAWLER_GC_PERCENT=")
	}
	p := newPipeline(Config{})
	if got := gcOf(p.CommonEnv("parser", "127.0.0.1:1")); got != "50" {
		t.Errorf("parser: gc percent %q, want 50", got)
	}
	if got := gcOf(p.CommonEnv("scheduler", "127.0.0.1:1")); got != "" {
		t.Errorf("scheduler: gc percent %q, want none", got)
	}
	none := newPipeline(Config{GCPercents: map[string]int{}})
	if got := gcOf(none.CommonEnv("parser", "127.0.0.1:1")); got != "" {
		t.Errorf("no targets: parser gc percent %q", got)
	}
}
