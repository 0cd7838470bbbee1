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
