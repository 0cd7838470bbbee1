package launcher

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// RenderReport is what a crawl of a web with script-built sites
// (--web-script-share) stored of them and of the others: the figures of
// issue 36, read from documents.rendered and the documents' text.
type RenderReport struct {
	ScriptHosts int `json:"script_hosts"`
	// Script are the script-built sites' HTML documents: stored, rendered
	// (documents.rendered), and with the text their script writes (not
	// the shell's "Please enable JavaScript").
	Script RenderTally `json:"script"`
	// Server are the server-rendered sites' HTML documents: auto must
	// render none of them.
	Server RenderTally `json:"server"`
	// FetcherCPU is the fetchers' CPU, Chromium's processes included
	// (they are the fetchers' children), for CPU per rendered page.
	FetcherCPU time.Duration `json:"fetcher_cpu_ns"`
}

// RenderTally counts HTML documents of a group of sites.
type RenderTally struct {
	Documents uint64 `json:"documents"`
	Rendered  uint64 `json:"rendered"`
	WithText  uint64 `json:"with_text"`
}

// shellText is what a script-built page of websim says before its script
// ran (websim/script.go).
const shellText = "Please enable JavaScript"

// ReadRender reads what crawl crawlID stored of a web whose script-built
// hosts are scriptHosts (host:port, websim's ready line).
func ReadRender(ctx context.Context, conn driver.Conn, crawlID string, scriptHosts []string) (RenderReport, error) {
	r := RenderReport{ScriptHosts: len(scriptHosts)}
	rows, err := conn.Query(ctx, `SELECT host, count(), countIf(rendered != ''), countIf(length(text) > 0 AND position(text, ?) = 0)
		FROM documents FINAL WHERE crawl_id = ? AND content_type = 'text/html' GROUP BY host`, shellText, crawlID)
	if err != nil {
		return r, fmt.Errorf("read rendered documents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var host string
		var n, rendered, text uint64
		if err := rows.Scan(&host, &n, &rendered, &text); err != nil {
			return r, fmt.Errorf("read rendered documents: %w", err)
		}
		t := &r.Server
		if slices.Contains(scriptHosts, host) {
			t = &r.Script
		}
		t.Documents += n
		t.Rendered += rendered
		t.WithText += text
	}
	return r, rows.Err()
}

// Print writes the report as the bench's lines.
func (r RenderReport) Print(out io.Writer) {
	fmt.Fprintf(out, "  %-22s %9d   HTML documents of the %d script-built sites: %d rendered, %d with the text their script writes\n",
		"script-built pages", r.Script.Documents, r.ScriptHosts, r.Script.Rendered, r.Script.WithText)
	fmt.Fprintf(out, "  %-22s %9d   HTML documents of the other sites: %d rendered (auto renders none of them)\n",
		"server-rendered pages", r.Server.Documents, r.Server.Rendered)
	if n := r.Script.Rendered + r.Server.Rendered; n > 0 {
		fmt.Fprintf(out, "  %-22s %9.1f   ms: the fetchers' CPU with the Chromium processes they reaped (%.1fs), per rendered page (%d)\n",
			"CPU per rendered page", float64(r.FetcherCPU.Milliseconds())/float64(n), r.FetcherCPU.Seconds(), n)
		fmt.Fprintf(out, "  %-22s %9s   (a lower bound: Chromium processes the fetcher did not reap are not counted; make bench-render counts the whole tree)\n", "", "")
	}
}

// fetcherCPU sums the CPU of the processes named fetcher*.
func fetcherCPU(b Bench) time.Duration {
	var d time.Duration
	for name, u := range b.Processes {
		if strings.HasPrefix(name, "fetcher") {
			d += u.CPU
		}
	}
	return d
}
