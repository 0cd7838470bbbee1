package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/app"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

const partitions = 4

func noEnv(string) (string, bool) { return "", false }

// record is a DiscoveredURL read back from the topic.
type record struct {
	url       string
	key       string
	partition int
	msg       *crawlv1.DiscoveredURL
}

// readDiscovered follows the discovered topic until n records arrived and
// a short while more (to catch extra records).
func readDiscovered(t *testing.T, kc kafkaio.Config, n int) []record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var (
		out   []record
		extra *time.Timer
	)
	err := kafkaio.Follow(ctx, kc, kc.Topics().Discovered, func(m kafka.Message) {
		d := new(crawlv1.DiscoveredURL)
		if err := kafkaio.Decode(m, d); err != nil {
			t.Errorf("decode: %v", err)
			return
		}
		out = append(out, record{url: d.Url, key: string(m.Key), partition: m.Partition, msg: d})
		if len(out) == n && extra == nil {
			extra = time.AfterFunc(300*time.Millisecond, cancel)
		}
	})
	if err != nil {
		t.Fatalf("follow: %v", err)
	}
	if extra != nil {
		extra.Stop()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].url < out[j].url })
	return out
}

func checkRecords(t *testing.T, got []record, crawlID string, wantURLs []string, before time.Time) {
	t.Helper()
	sort.Strings(wantURLs)
	if len(got) != len(wantURLs) {
		t.Fatalf("got %d records %+v, want %v", len(got), got, wantURLs)
	}
	for i, r := range got {
		if r.url != wantURLs[i] {
			t.Errorf("record %d url %q, want %q", i, r.url, wantURLs[i])
		}
		key, err := kafkaio.Key(r.url)
		if err != nil {
			t.Fatal(err)
		}
		if r.key != string(key) {
			t.Errorf("%s: key %q, want %q", r.url, r.key, key)
		}
		if p := kafkaio.PartitionFor(key, partitions); r.partition != p {
			t.Errorf("%s: partition %d, want %d", r.url, r.partition, p)
		}
		m := r.msg
		if m.CrawlId != crawlID || m.Depth != 0 || m.Source != crawlv1.Source_SOURCE_SEED || m.ParentUrl != "" {
			t.Errorf("%s: crawl %q depth %d source %v parent %q", r.url, m.CrawlId, m.Depth, m.Source, m.ParentUrl)
		}
		if at := m.DiscoveredAt.AsTime(); at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
			t.Errorf("%s: discovered_at %v not within the run", r.url, at)
		}
	}
}

func TestSeedFileWithInvalidLines(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	file := filepath.Join(t.TempDir(), "seeds.txt")
	content := "# crawl seeds\r\n" +
		"http://127.0.0.2/start\r\n" +
		"not a url\r\n" +
		"\r\n" +
		"  https://127.0.0.3:8443/a/../b  \r\n" +
		"mailto:someone@example.com\r\n" +
		"http://" + strings.Repeat("x", 70<<10) + "\r\n" +
		"HTTP://Example.COM/\r\n"
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	cfg := config.Seed{Kafka: kc, CrawlID: "crawl-1", SeedsFile: file,
		Seeds: envflag.Strings{"http://127.0.0.4/flag", "javascript:void(0)"}}
	before := time.Now()
	sum, err := app.Seed(t.Context(), cfg, nil, nil, zap.New(core), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if sum != (app.Summary{Published: 4, Invalid: 4}) {
		t.Errorf("summary = %+v, want 4 published, 4 invalid", sum)
	}

	// Every invalid seed is reported with its line (or argument) number.
	var gotLines, gotArgs []int
	for _, e := range logs.FilterMessage("invalid seed skipped").All() {
		fields := e.ContextMap()
		if _, ok := fields["error"]; !ok {
			t.Errorf("report without error: %v", fields)
		}
		switch {
		case fields["line"] != nil:
			gotLines = append(gotLines, int(fields["line"].(int64)))
		case fields["arg"] != nil:
			gotArgs = append(gotArgs, int(fields["arg"].(int64)))
		}
	}
	if want := []int{3, 6, 7}; !equalInts(gotLines, want) {
		t.Errorf("reported lines %v, want %v", gotLines, want)
	}
	if want := []int{2}; !equalInts(gotArgs, want) {
		t.Errorf("reported args %v, want %v", gotArgs, want)
	}
	if s := logs.FilterMessage("seeding done").All(); len(s) != 1 || s[0].ContextMap()["published"] != int64(4) || s[0].ContextMap()["invalid"] != int64(4) {
		t.Errorf("summary log = %+v", s)
	}

	checkRecords(t, readDiscovered(t, kc, 4), "crawl-1", []string{
		"http://127.0.0.2/start", "https://127.0.0.3:8443/b", "http://example.com/", "http://127.0.0.4/flag",
	}, before)
}

func TestRunStdin(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	args := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--seeds-file", "-",
		"--seed", "http://127.0.0.9/",
		"--log-level", "warn",
	}
	env := map[string]string{
		"CRAWLER_KAFKA_TOPIC_PREFIX": kc.TopicPrefix,
		"CRAWLER_CRAWL_ID":           "env.crawl_2",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	before := time.Now()
	stdin := strings.NewReader("\uFEFFhttp://127.0.0.5/\nhttp://127.0.0.6/x\n")
	if err := run(t.Context(), args, stdin, lookup); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkRecords(t, readDiscovered(t, kc, 3), "env.crawl_2",
		[]string{"http://127.0.0.5/", "http://127.0.0.6/x", "http://127.0.0.9/"}, before)
}

func TestRunRejects(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("# nothing valid\nnot-a-url\nftp//x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr error  // checked with errors.Is when set
		wantMsg string // else a substring of the error
	}{
		{name: "no crawl id", args: []string{"--seed", "http://a/"}, wantMsg: "crawl-id: required"},
		{name: "crawl id with slash", args: []string{"--crawl-id", "a/b", "--seed", "http://a/"}, wantMsg: "crawl-id"},
		{name: "crawl id too long", args: []string{"--crawl-id", strings.Repeat("a", 65), "--seed", "http://a/"}, wantMsg: "at most 64"},
		{name: "no seeds", args: []string{"--crawl-id", "c"}, wantMsg: "--seed or --seeds-file"},
		{name: "positional args", args: []string{"--crawl-id", "c", "http://a/"}, wantMsg: "unexpected"},
		{name: "missing file", args: []string{"--crawl-id", "c", "--seeds-file", filepath.Join(dir, "nope")}, wantErr: os.ErrNotExist},
		{name: "nothing valid", args: []string{"--crawl-id", "c", "--seeds-file", bad, "--seed", " "}, wantErr: app.ErrNoValidSeeds},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The broker is never reached: every case fails before.
			args := append([]string{"--kafka-brokers", "127.0.0.1:1", "--log-level", "error"}, tt.args...)
			err := run(t.Context(), args, strings.NewReader(""), noEnv)
			switch {
			case err == nil:
				t.Fatal("run succeeded, want an error")
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			case tt.wantErr == nil && !strings.Contains(err.Error(), tt.wantMsg):
				t.Errorf("err = %v, want it to mention %q", err, tt.wantMsg)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
