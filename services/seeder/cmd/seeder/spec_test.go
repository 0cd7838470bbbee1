package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// controlSpec reads the control topic to its end and returns the spec of
// crawlID (nil when none).
func controlSpec(t *testing.T, kc kafkaio.Config, crawlID string) *crawlv1.CrawlSpec {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	specs := crawlcontrol.NewSpecs()
	caught := make(chan struct{})
	errc := make(chan error, 1)
	go func() { errc <- crawlcontrol.FollowCaughtUp(ctx, kc, specs, func() { close(caught) }, nil) }()
	select {
	case <-caught:
	case err := <-errc:
		t.Fatalf("follow control topic: %v", err)
	case <-ctx.Done():
		t.Fatal("control topic not read to its end")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("follow control topic: %v", err)
	}
	return specs.Get(crawlID)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunSpec seeds with --spec: the spec reaches the control topic as the
// API publishes it, the file's seeds and the flags' are published, and a
// second run for the same crawl publishes the next revision.
func TestRunSpec(t *testing.T) {
	kc := kafkatest.Config(t, partitions)
	base := []string{
		"--kafka-brokers", strings.Join(kc.Brokers, ","),
		"--kafka-partitions", strconv.Itoa(partitions),
		"--kafka-topic-prefix", kc.TopicPrefix,
		"--log-level", "warn",
	}
	spec := writeFile(t, "spec.json", `{
		"crawl_id": "from-file", "name": "scoped",
		"seeds": ["http://127.0.0.2/"],
		"scope": {"same_host_only": true, "deny_patterns": ["/sec1/"], "allow_hosts": ["127.0.0.2", "127.0.0.3"]},
		"limits": {"max_depth": 3, "max_pages_per_host": 7}
	}`)
	before := time.Now()
	// --crawl-id overrides the file's crawl_id.
	args := append(append([]string{}, base...), "--spec", spec, "--crawl-id", "spec.crawl", "--seed", "http://127.0.0.3/")
	if err := run(t.Context(), args, strings.NewReader(""), noEnv); err != nil {
		t.Fatalf("run: %v", err)
	}
	checkRecords(t, readDiscovered(t, kc, 2), "spec.crawl", []string{"http://127.0.0.2/", "http://127.0.0.3/"}, before)

	if controlSpec(t, kc, "from-file") != nil {
		t.Error("the file's crawl_id was published although --crawl-id overrides it")
	}
	got := controlSpec(t, kc, "spec.crawl")
	if got == nil {
		t.Fatal("no spec on the control topic")
	}
	if got.GetRevision() != 1 || got.GetState() != crawlv1.CrawlState_CRAWL_STATE_RUNNING || got.GetName() != "scoped" ||
		!got.GetScope().GetSameHostOnly() || strings.Join(got.GetScope().GetDenyPatterns(), ",") != "/sec1/" ||
		len(got.GetScope().GetAllowHosts()) != 2 || got.GetLimits().GetMaxDepth() != 3 || got.GetLimits().GetMaxPagesPerHost() != 7 {
		t.Errorf("published spec %v", got)
	}

	// Again with other limits: the next revision, created_at kept.
	spec2 := writeFile(t, "spec2.json", `{"crawl_id": "spec.crawl", "limits": {"max_pages": 50}}`)
	args = append(append([]string{}, base...), "--spec", spec2, "--seed", "http://127.0.0.3/")
	if err := run(t.Context(), args, strings.NewReader(""), noEnv); err != nil {
		t.Fatalf("second run: %v", err)
	}
	got2 := controlSpec(t, kc, "spec.crawl")
	// The file names no scope: the default, the seeds' sites.
	sc := got2.GetScope()
	if got2.GetRevision() != 2 || got2.GetLimits().GetMaxPages() != 50 ||
		sc.GetMode() != crawlv1.ScopeMode_SCOPE_MODE_DOMAIN || strings.Join(sc.GetSeedHosts(), ",") != "127.0.0.3" ||
		sc.GetSameHostOnly() || len(sc.GetDenyPatterns()) != 0 ||
		!got2.GetCreatedAt().AsTime().Equal(got.GetCreatedAt().AsTime()) {
		t.Errorf("second spec %v, want revision 2 with only max_pages 50 and the default scope (the seed's site), created %v", got2, got.GetCreatedAt().AsTime())
	}

	// A cancelled crawl stays cancelled: nothing is published.
	cancelled, err := jobs.Transition(got2, crawlv1.CrawlState_CRAWL_STATE_CANCELLED, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := crawlcontrol.Message(kc.Topics().Control, cancelled)
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kc, nil, nil)
	if err := w.Write(t.Context(), []kafka.Message{msg}...); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	err = run(t.Context(), args, strings.NewReader(""), noEnv)
	if !errors.Is(err, jobs.ErrFinal) {
		t.Errorf("run on a cancelled crawl: %v, want %v", err, jobs.ErrFinal)
	}
	if got3 := controlSpec(t, kc, "spec.crawl"); got3.GetRevision() != 3 || got3.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		t.Errorf("spec after the refused run: %v", got3)
	}
}

// TestRunSpecRejects: a bad spec file is refused with the API's field
// errors before anything is published (the broker address is unusable).
func TestRunSpecRejects(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		args    []string
		wantMsg []string // substrings of the error
		notFE   bool     // the error is no FieldErrors
	}{
		{name: "not JSON", spec: `{"crawl_id": "c",`, wantMsg: []string{"malformed JSON"}, notFE: true},
		{name: "unknown field", spec: `{"crawl_id": "c", "scope": {"same_host": true}}`, wantMsg: []string{"same_host: unknown field"}},
		{name: "wrong type", spec: `{"crawl_id": "c", "limits": {"max_depth": "3"}}`, wantMsg: []string{"limits.max_depth: want uint32"}},
		{name: "bad regexp and host", spec: `{"crawl_id": "c", "scope": {"deny_patterns": ["ok", "(unclosed"], "allow_hosts": ["a/b"]}}`,
			wantMsg: []string{"scope.allow_hosts[0]", "scope.deny_patterns[1]: invalid RE2 regexp"}},
		{name: "bad seed", spec: `{"crawl_id": "c", "seeds": ["not a url"]}`, wantMsg: []string{"seeds[0]"}},
		{name: "bad crawl id", spec: `{"crawl_id": "a/b"}`, args: []string{"--seed", "http://a/"}, wantMsg: []string{"crawl_id"}},
		{name: "no crawl id", spec: `{"seeds": ["http://a/"]}`, wantMsg: []string{"no crawl id"}, notFE: true},
		{name: "no seeds anywhere", spec: `{"crawl_id": "c", "scope": {"same_host_only": true}}`, wantMsg: []string{"seeds in --spec"}, notFE: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, "spec.json", tt.spec)
			args := append([]string{"--kafka-brokers", "127.0.0.1:1", "--log-level", "error", "--spec", file}, tt.args...)
			err := run(t.Context(), args, strings.NewReader(""), noEnv)
			if err == nil {
				t.Fatal("run succeeded, want an error")
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("err = %v, want it to mention %q", err, m)
				}
			}
			var fe jobs.FieldErrors
			if errors.As(err, &fe) == tt.notFE {
				t.Errorf("err = %v (%T): field errors %v, want %v", err, err, !tt.notFE, !tt.notFE)
			}
		})
	}
}
