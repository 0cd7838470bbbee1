package app

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/parser/internal/config"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/svctest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// load returns the configuration the flags give for a real broker and a
// fresh ClickHouse database; broken replaces the broker or ClickHouse
// address by one nothing listens on.
func load(t *testing.T, broken string) config.Config {
	t.Helper()
	cfg, err := config.Load(svctest.Args(t, broken), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNew builds the parser against a real broker and ClickHouse: the
// readiness check answers, there is one writer per table the parser fills
// (the run group's component names), and Close releases the clients
// (TestMain finds no goroutine left).
func TestNew(t *testing.T) {
	p, err := New(t.Context(), load(t, ""), nil, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer p.Close()
	if err := p.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	var names []string
	for _, w := range p.Writers() {
		names = append(names, w.Name)
	}
	want := "documents writer, document_meta writer, content_seen writer, links_dropped writer, " +
		"simhash_bands writer, near_duplicates writer, links writer, documents_carried writer"
	if got := strings.Join(names, ", "); got != want {
		t.Errorf("writers = %s, want %s", got, want)
	}
}

// TestNewFails: a part that cannot be built fails New with the step named,
// and what was opened before it is closed (no goroutine left).
func TestNewFails(t *testing.T) {
	tests := []struct {
		broken, wantErr string
	}{
		{broken: "clickhouse", wantErr: "open clickhouse"},
		{broken: "kafka", wantErr: "ensure topics"},
	}
	for _, tt := range tests {
		t.Run(tt.broken, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			p, err := New(ctx, load(t, tt.broken), nil, zaptest.NewLogger(t), prometheus.NewRegistry())
			if err == nil {
				p.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestDocumentBatch: documents are inserted at most
// pages.DocumentBatchRows and pages.DocumentBatchBytes together, and twice
// a batch may wait.
func TestDocumentBatch(t *testing.T) {
	tests := []struct {
		name              string
		maxRows, wantRows int
	}{
		{name: "default", maxRows: 0, wantRows: 1},
		{name: "small", maxRows: 100, wantRows: 100},
		{name: "capped", maxRows: 10 * pages.DocumentBatchRows, wantRows: pages.DocumentBatchRows},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := DocumentBatch(chstore.BatchOptions{MaxRows: tt.maxRows, MaxBuffered: 1 << 20, FlushInterval: time.Second})
			if o.MaxRows != tt.wantRows || o.MaxBuffered != 2*tt.wantRows || o.FlushInterval != time.Second ||
				o.MaxBytes != pages.DocumentBatchBytes || o.MaxBufferedBytes != 2*pages.DocumentBatchBytes {
				t.Errorf("DocumentBatch(%d) = %+v, want %d rows, %d buffered, %d and %d bytes, the flush interval kept",
					tt.maxRows, o, tt.wantRows, 2*tt.wantRows, pages.DocumentBatchBytes, 2*pages.DocumentBatchBytes)
			}
		})
	}
}
