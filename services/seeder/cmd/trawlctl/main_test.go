package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

const token = "ctl-token-0123456789"

// ackAll stands in for the scheduler: a real consumer group
// (<prefix>scheduler) that acknowledges every discovered record, so the
// pipeline's lag falls to zero.
type ackAll struct{}

func (ackAll) Handle(_ context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	for _, m := range batch {
		ack(m)
	}
	return nil
}

func (ackAll) Close(context.Context) error { return nil }

func consumeDiscovered(t *testing.T, kc kafkaio.Config) {
	t.Helper()
	g, err := kafkaio.NewGroup(kc, kafkaio.GroupConfig{GroupID: kc.GroupFor("scheduler"), Topic: kc.Topics().Discovered, CommitInterval: 50 * time.Millisecond},
		func(context.Context, string, int) (kafkaio.Handler, error) { return ackAll{}, nil }, zap.NewNop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("consumer group: %v", err)
		}
	})
}

// startAPI runs the crawl-jobs API over a real broker and ClickHouse.
func startAPI(t *testing.T) (string, *chstore.Store) {
	t.Helper()
	kc := kafkatest.Config(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}
	store := chtest.NewStore(t)
	w := kafkaio.NewWriter(kc, zap.NewNop(), prometheus.NewRegistry())
	ctl := control.New(kc, w, zap.NewNop())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = ctl.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := ctl.WaitCaughtUp(wctx); err != nil {
		t.Fatalf("control never caught up: %v", err)
	}
	m, err := api.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New(store)
	srv := httptest.NewServer(api.New(api.Config{Token: token}, crawljobs.New(ctl, st, nil, zap.NewNop()), st, m, zap.NewNop()).Handler())
	t.Cleanup(func() { srv.Close(); cancel(); wg.Wait(); w.Close() })
	consumeDiscovered(t, kc)
	return srv.URL, store
}

func ctl(t *testing.T, ctx context.Context, url string, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	env := map[string]string{"CRAWLER_API_TOKEN": token, "CRAWLER_API_URL": url}
	err := run(ctx, args, strings.NewReader(stdin), &out, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return out.String(), err
}

func TestSubmitWatchControlExport(t *testing.T) {
	url, store := startAPI(t)
	ctx := t.Context()

	job := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(job, []byte(`{"crawl_id":"fromfile","seeds":["http://127.0.0.2/"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		stdin   string
		args    []string
		want    string // substring of the output
		wantErr string // substring of the error
	}{
		{name: "submit file", args: []string{"submit", "--file", job}, want: "fromfile created: 1 seeds published"},
		{name: "submit stdin", stdin: `{"crawl_id":"fromstdin","seeds_text":"http://127.0.0.3/\n"}`, args: []string{"submit", "--file", "-"}, want: "fromstdin created: 1"},
		{name: "submit flags", args: []string{"submit", "--crawl-id", "flags", "--seed", "http://127.0.0.2/x", "--keyword", "go", "--engine", "bing", "--pages", "2"}, want: "flags created: 3 seeds"},
		{name: "submit invalid", args: []string{"submit", "--crawl-id", "bad", "--seed", "nope"}, wantErr: "seeds[0]"},
		{name: "submit duplicate", args: []string{"submit", "--file", job}, wantErr: "409"},
		{name: "list", args: []string{"list"}, want: "fromstdin\trunning"},
		{name: "pause", args: []string{"pause", "flags"}, want: "flags paused (revision 2)"},
		{name: "resume", args: []string{"resume", "flags"}, want: "flags running (revision 3)"},
		{name: "cancel", args: []string{"cancel", "flags"}, want: "flags cancelled (revision 4)"},
		{name: "resume cancelled", args: []string{"resume", "flags"}, wantErr: "409"},
		{name: "get unknown", args: []string{"get", "nope"}, wantErr: "404"},
		{name: "no command", args: nil, wantErr: "usage"},
		{name: "unknown command", args: []string{"frobnicate"}, wantErr: "unknown command"},
		{name: "watch cancelled", args: []string{"watch", "--interval", "50ms", "flags"}, want: "cancelled"},
		{name: "delete", args: []string{"delete", "flags"}, want: "flags deleted (revision 5); no rows left"},
		{name: "delete again", args: []string{"delete", "flags"}, want: "flags deleted (revision 5)"},
		{name: "get deleted", args: []string{"get", "flags"}, wantErr: "410"},
		{name: "delete unknown", args: []string{"delete", "nope"}, wantErr: "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ctl(t, ctx, url, tt.stdin, tt.args...)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case !strings.Contains(out, tt.want):
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
	if _, err := ctl(t, ctx, url, "", "--api-token", "wrong-token", "list"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong token: %v", err)
	}

	// watch redraws until the crawl drains: the rows arrive once it has
	// drawn the running crawl.
	done := make(chan struct{})
	var err error
	screen := &firstWriteSignal{wrote: make(chan struct{})}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	go func() {
		defer close(done)
		env := map[string]string{"CRAWLER_API_TOKEN": token, "CRAWLER_API_URL": url}
		err = run(wctx, []string{"watch", "--interval", "50ms", "fromfile"}, strings.NewReader(""), screen,
			func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}()
	select {
	case <-screen.wrote:
	case <-done:
	}
	now := time.Now().UTC().Truncate(time.Second)
	// The pipeline's order: document and fetch log first, admission last
	// (the crawl looks drained as soon as url_seen is all attempted).
	insert(t, store, chstore.Documents, []chstore.DocumentRow{{CrawlID: "fromfile", URLFP: 1, URL: "http://127.0.0.2/", Title: "Home", Status: 200, FetchedAt: now}})
	insert(t, store, chstore.FetchLog, []chstore.FetchLogRow{{CrawlID: "fromfile", URLFP: 1, URL: "http://127.0.0.2/", Status: 200, FetchedAt: now, Final: true}})
	insert(t, store, chstore.URLSeen, []chstore.SeenRow{{CrawlID: "fromfile", FP: 1, URL: "http://127.0.0.2/", FirstSeen: now}})
	<-done
	if err != nil || wctx.Err() != nil {
		t.Fatalf("watch: %v (ctx %v)", err, wctx.Err())
	}
	out := screen.String()
	if !strings.Contains(out, "running") {
		t.Errorf("watch output %q: the running crawl was not drawn before it drained", out)
	}
	if !strings.HasPrefix(out, "\r\x1b[K") || !strings.Contains(out, "[##############################] 100% 1/1 urls, 1 fetched, 0 errors, 1 documents, drained") {
		t.Errorf("watch output %q", out)
	}

	file := filepath.Join(t.TempDir(), "docs.jsonl")
	if _, err := ctl(t, ctx, url, "", "export", "--out", file, "fromfile"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d jobs.Document
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &d) != nil || d.Title != "Home" {
		t.Errorf("export %q", raw)
	}

	// Another table in another format, the id before the flags.
	csvFile := filepath.Join(t.TempDir(), "fetch.csv")
	if _, err := ctl(t, ctx, url, "", "export", "fromfile", "--table", "fetch_log", "--format", "csv", "--out", csvFile); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(csvFile); err != nil || !strings.HasPrefix(string(raw), "crawl_id,url,url_fp,host,") || strings.Count(string(raw), "\r\n") != 2 {
		t.Errorf("csv export %q (%v): want a header and one row", raw, err)
	}
	// Refused exports leave no file.
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xlsx", "fromfile"}, "jsonl, csv, parquet"},
		{[]string{"--table", "links", "fromfile"}, `crawl "fromfile" has no rows in links`},
		{[]string{"nope"}, "api status 404"},
	} {
		file := filepath.Join(t.TempDir(), "refused.out")
		_, err := ctl(t, ctx, url, "", append([]string{"export", "--out", file}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("export %v: error %v, want %q", tt.args, err, tt.want)
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("export %v left %s (%v)", tt.args, file, err)
		}
	}
	if _, err := ctl(t, ctx, url, "", "export", "--out", filepath.Join(t.TempDir(), "no", "dir", "f"), "fromfile"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("export to a missing directory: %v", err)
	}

	// A crawl with rows: deleted, its rows being removed (ClickHouse
	// mutations, asynchronous), and its export gone.
	if out, err := ctl(t, ctx, url, "", "delete", "fromfile"); err != nil || !strings.Contains(out, "fromfile deleted (revision 2)") {
		t.Errorf("delete fromfile: %q, %v", out, err)
	}
	if _, err := ctl(t, ctx, url, "", "export", "--out", file, "fromfile"); err == nil || !strings.Contains(err.Error(), "410") {
		t.Errorf("export of a deleted crawl: %v, want 410", err)
	}
}

// TestWatchStopsOnCancel checks that Ctrl-C (ctx) ends a watch cleanly.
func TestWatchStopsOnCancel(t *testing.T) {
	url, _ := startAPI(t)
	if _, err := ctl(t, t.Context(), url, "", "submit", "--crawl-id", "w", "--seed", "http://127.0.0.2/"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	out, err := ctl(t, ctx, url, "", "watch", "--interval", "50ms", "w")
	if err != nil || !strings.Contains(out, "w [") || !strings.Contains(out, "running") {
		t.Errorf("watch = %q, %v", out, err)
	}
}

// firstWriteSignal is a screen that closes wrote at its first Write. Safe
// for concurrent use.
type firstWriteSignal struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *firstWriteSignal) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.Len() == 0 && len(p) > 0 {
		close(w.wrote)
	}
	return w.buf.Write(p)
}

func (w *firstWriteSignal) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func insert[T any](t *testing.T, s *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	ctx := t.Context()
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+table.Name+" ("+strings.Join(table.Columns, ", ")+")")
	if err != nil {
		t.Error(err)
		return
	}
	for _, r := range rows {
		if err := b.Append(table.Values(r)...); err != nil {
			t.Error(err)
			return
		}
	}
	if err := b.Send(); err != nil {
		t.Error(err)
	}
}
