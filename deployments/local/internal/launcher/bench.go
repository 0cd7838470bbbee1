package launcher

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// tools are the local deployment's own programs the launcher may run.
var tools = []string{"websim", "broker"}

// web is the generated web (internal/websim) served by a process of its
// own, so that it can run on other CPUs than the crawl and its CPU is not
// the crawl's.
type web struct {
	proc  *supervise.Process
	ready websim.Ready
}

// webArgs returns the websim command's flags for the web that the
// configuration asks for.
func (c Config) webArgs() []string {
	args := []string{"--hosts", strconv.Itoa(c.WebHosts), "--articles", strconv.Itoa(c.WebArticles),
		"--trap-every", strconv.Itoa(c.WebTrapEvery)}
	if c.WebTrapGrid {
		args = append(args, "--trap-grid")
	}
	if c.WebBestDeep {
		args = append(args, "--best-deep")
	}
	if c.WebShop {
		// The bench computes the shop's known values from the seed.
		args = append(args, "--shop", "--seed", strconv.Itoa(webSeed))
	}
	if c.WebPort != 0 {
		args = append(args, "--port", strconv.Itoa(c.WebPort))
	}
	if c.WebScriptShare > 0 {
		args = append(args, "--script-share", strconv.FormatFloat(c.WebScriptShare, 'f', -1, 64))
	}
	return args
}

// startWeb starts the websim binary with args (pinned to cpus with
// taskset when cpus is set) and waits for its ready line.
func startWeb(ctx context.Context, bin, cpus string, args []string, logDir string) (*web, error) {
	path := bin
	if cpus != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("pin the web to CPUs %s: %w", cpus, err)
		}
		path, args = ts, append([]string{"-c", cpus, bin}, args...)
	}
	logFile := filepath.Join(logDir, "websim.log")
	if err := os.Remove(logFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove old websim log: %w", err)
	}
	proc, err := supervise.Start(supervise.Spec{Name: "websim", Path: path, Args: args, Env: os.Environ(), LogFile: logFile})
	if err != nil {
		return nil, err
	}
	w := &web{proc: proc}
	err = waitFor(ctx, proc, 30*time.Second, func() bool {
		line, ok := firstJSONLine(logFile)
		return ok && json.Unmarshal(line, &w.ready) == nil && len(w.ready.Seeds) > 0
	})
	if err != nil {
		_ = proc.Kill()
		return nil, fmt.Errorf("start websim: %w", err)
	}
	return w, nil
}

// firstJSONLine returns the first line of a file that starts with '{'.
func firstJSONLine(path string) ([]byte, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if b := sc.Bytes(); len(b) > 0 && b[0] == '{' {
			return append([]byte(nil), b...), true
		}
	}
	return nil, false
}

// stats reads what the web received.
func (w *web) stats(ctx context.Context) (websim.Stats, error) {
	var s websim.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.ready.Stats, nil)
	if err != nil {
		return s, fmt.Errorf("read web stats: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("read web stats: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return s, fmt.Errorf("decode web stats: %w", err)
	}
	return s, nil
}

// startBroker runs the embedded broker as a process of its own (so that
// its CPU and memory are counted apart from the launcher's) with its data
// in dataDir/kafka, and returns it with its address once it accepts
// connections.
// Its admin server (/metrics) is at adminAddr.
func startBroker(ctx context.Context, bin, dataDir, profileDir string) (proc *supervise.Process, addr, adminAddr string, err error) {
	if addr, err = freePort(ctx); err != nil {
		return nil, "", "", fmt.Errorf("find a port for the broker: %w", err)
	}
	if adminAddr, err = freePort(ctx); err != nil {
		return nil, "", "", fmt.Errorf("find a port for the broker's admin server: %w", err)
	}
	args := []string{"--addr", addr, "--dir", filepath.Join(dataDir, "kafka"), "--admin-addr", adminAddr}
	if profileDir != "" {
		args = append(args, "--profile-dir", filepath.Join(profileDir, "broker"))
	}
	proc, err = supervise.Start(supervise.Spec{
		Name: "broker", Path: bin, Args: args, Env: os.Environ(), LogFile: filepath.Join(dataDir, "logs", "broker.log"),
	})
	if err != nil {
		return nil, "", "", err
	}
	err = waitFor(ctx, proc, 60*time.Second, func() bool {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err != nil {
		_ = proc.Kill()
		return nil, "", "", fmt.Errorf("start broker: %w", err)
	}
	return proc, addr, adminAddr, nil
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(ctx context.Context) (string, error) {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitFor polls ok every 100ms until it holds, proc exits, ctx is done or
// limit passes.
func waitFor(ctx context.Context, proc *supervise.Process, limit time.Duration, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !ok() {
		select {
		case <-proc.Done():
			return fmt.Errorf("%s exited (%w); log tail:\n%s", proc.Name(), proc.ExitError(), proc.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w; log tail:\n%s", proc.Name(), ctx.Err(), proc.LogTail(20))
		case <-t.C:
		}
	}
	return nil
}

// Bench is what the benchmark measured: the web's view of the crawl (when
// the crawl was of the generated web) and every process's CPU time and peak
// memory.
type Bench struct {
	Summary  progress.Summary `json:"-"`
	Web      *websim.Stats    `json:"web,omitempty"`
	WebHosts int              `json:"web_hosts,omitempty"`
	// MaxPages is the crawl's page budget (limits.max_pages, 0: none),
	// and Order its crawl order ("breadth-first" or "best-first"; "" when
	// not known): beside Web.MostLinked, what a budget-stopped crawl of a
	// best-deep web holds of its most linked pages.
	MaxPages  uint64                     `json:"max_pages,omitempty"`
	Order     string                     `json:"order,omitempty"`
	Processes map[string]supervise.Usage `json:"processes"`
	// ClickHouse is what the server counted during the crawl
	// (system.events: queries, inserts, rows inserted and merged).
	ClickHouse map[string]uint64 `json:"clickhouse_events,omitempty"`
	// Tables are the crawl database's tables by rows stored (active
	// parts, before ReplacingMergeTree collapses what merges have not).
	Tables []TableSize `json:"clickhouse_tables,omitempty"`
	// Merges are the crawl database's tables by rows merged during the
	// crawl, when the server keeps a part_log (--clickhouse-part-log).
	Merges []TableMerges `json:"clickhouse_merges,omitempty"`
	// Site processes are not the crawl's: listed, not totalled.
	Site []string `json:"site_processes,omitempty"`
	// Shop is what a crawl of a shop web (--web-shop) stored exactly of
	// its known values.
	Shop *ShopReport `json:"shop,omitempty"`
	// Render is what a crawl of a web with script-built sites
	// (--web-script-share) stored of them and of the others.
	Render *RenderReport `json:"render,omitempty"`
	// Warc is the fetchers' WARC archive (flag warc), read after they
	// stopped and closed their files.
	Warc *WarcUsage `json:"warc,omitempty"`
	// Runtime is what each Go process's runtime counted of its CPU (the
	// collector's share), read from its /metrics before it stopped.
	Runtime map[string]GoRuntime `json:"go_runtime,omitempty"`
	// FetchReads are the records the fetchers read from the fetch topic:
	// a request deferred back to it (a host's surplus) is read again.
	FetchReads float64 `json:"fetch_topic_reads,omitempty"`
	// Lags is how far the stored documents trailed the fetched pages,
	// polled every second.
	Lags         progress.LagStats `json:"parser_lag"`
	ScrapeErrors []string          `json:"scrape_errors,omitempty"`
}

// WarcUsage is the disk the WARC archive of a crawl takes.
type WarcUsage struct {
	Files      int   `json:"files"`
	Bytes      int64 `json:"bytes"`       // the .warc.gz files
	IndexBytes int64 `json:"index_bytes"` // their .cdxj indexes
}

// warcDir is where the fetchers write WARC files ("" without flag warc).
func warcDir(cfg Config, dataDir string) string {
	if !cfg.Warc {
		return ""
	}
	return filepath.Join(dataDir, "warc")
}

// readWarcUsage sums the WARC files and indexes under dir.
func readWarcUsage(dir string) (*WarcUsage, error) {
	u := &WarcUsage{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(path, ".warc.gz"):
			u.Files++
			u.Bytes += info.Size()
		case strings.HasSuffix(path, ".cdxj"):
			u.IndexBytes += info.Size()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read warc archive: %w", err)
	}
	return u, nil
}

// clickHouseEvents are the server counters the benchmark reports.
var clickHouseEvents = []string{"Query", "SelectQuery", "InsertQuery", "InsertedRows", "InsertedBytes", "MergedRows",
	"MergedUncompressedBytes", "SelectedRows", "SelectedBytes", "OSCPUVirtualTimeMicroseconds"}

// readEvents reads the server's cumulative counters of clickHouseEvents.
func readEvents(ctx context.Context, conn driver.Conn) (map[string]uint64, error) {
	rows, err := conn.Query(ctx, "SELECT event, value FROM system.events WHERE event IN ('"+strings.Join(clickHouseEvents, "', '")+"')")
	if err != nil {
		return nil, fmt.Errorf("read clickhouse events: %w", err)
	}
	defer rows.Close()
	out := make(map[string]uint64, len(clickHouseEvents))
	for rows.Next() {
		var name string
		var v uint64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("read clickhouse events: %w", err)
		}
		out[name] = v
	}
	return out, rows.Err()
}

// TableMerges is what one table of the crawl database inserted and merged
// during the crawl, from system.part_log.
type TableMerges struct {
	Name         string  `json:"name"`
	Inserts      uint64  `json:"parts_inserted"`
	InsertedRows uint64  `json:"rows_inserted"`
	Merges       uint64  `json:"merges"`
	MergedRows   uint64  `json:"rows_merged"`  // read by its merges: the rows of the parts they joined
	MergedBytes  uint64  `json:"bytes_merged"` // uncompressed, read by its merges
	MergeSeconds float64 `json:"merge_seconds"`
}

// readMerges reads, from system.part_log, the parts every table of the
// current database inserted since since and what its merges read, by rows
// merged, largest first. Without a part_log (the server was not configured
// for one: chlocal.Options.PartLog, --clickhouse-part-log) it returns none.
func readMerges(ctx context.Context, conn driver.Conn, since time.Time) ([]TableMerges, error) {
	// The log is created at its first flush, and holds what was flushed.
	if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		return nil, fmt.Errorf("flush clickhouse logs: %w", err)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = 'system' AND name = 'part_log'").Scan(&n); err != nil {
		return nil, fmt.Errorf("look for system.part_log: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	// event_type 1 is an inserted part, 2 a merge (3 a part a replica
	// fetched, 5 a mutated one): 18.16 names them NEW_PART and
	// MERGE_PARTS, current releases NewPart and MergeParts. 18.16 writes
	// a merge's bytes read in its read_rows too, so the rows a merge read
	// are those of the parts it joined, found by name.
	rows, err := conn.Query(ctx, `SELECT table, inserts, inserted_rows, merges, merged_rows, merged_bytes, merge_ms FROM
		(SELECT table, countIf(t = 1) AS inserts, sumIf(rows, t = 1) AS inserted_rows, countIf(t = 2) AS merges,
			sumIf(read_bytes, t = 2) AS merged_bytes, sumIf(duration_ms, t = 2) AS merge_ms
			FROM (SELECT table, toInt8(event_type) AS t, rows, read_bytes, duration_ms FROM system.part_log
				WHERE database = currentDatabase() AND event_time >= toDateTime(?) AND error = 0)
			GROUP BY table)
		ANY LEFT JOIN
		(SELECT table, sum(src_rows) AS merged_rows FROM
			(SELECT table, src AS part_name FROM system.part_log ARRAY JOIN merged_from AS src
				WHERE database = currentDatabase() AND toInt8(event_type) = 2 AND event_time >= toDateTime(?) AND error = 0)
			ANY LEFT JOIN
			(SELECT table, part_name, rows AS src_rows FROM system.part_log
				WHERE database = currentDatabase() AND toInt8(event_type) IN (1, 2, 3, 5) AND error = 0)
			USING (table, part_name)
			GROUP BY table)
		USING (table)
		ORDER BY merged_rows DESC, table`, since.Unix(), since.Unix())
	if err != nil {
		return nil, fmt.Errorf("read system.part_log: %w", err)
	}
	defer rows.Close()
	var out []TableMerges
	for rows.Next() {
		var (
			t  TableMerges
			ms uint64
		)
		if err := rows.Scan(&t.Name, &t.Inserts, &t.InsertedRows, &t.Merges, &t.MergedRows, &t.MergedBytes, &ms); err != nil {
			return nil, fmt.Errorf("read system.part_log: %w", err)
		}
		t.MergeSeconds = float64(ms) / 1000
		out = append(out, t)
	}
	return out, rows.Err()
}

// TableSize is what one table of the crawl database stores.
type TableSize struct {
	Name  string `json:"name"`
	Rows  uint64 `json:"rows"`
	Bytes uint64 `json:"bytes_on_disk"`
	Parts uint64 `json:"parts"` // active parts: what merges have not joined yet
}

// readTables reads the rows, bytes and parts of every table of the current
// database from its active parts, largest first.
func readTables(ctx context.Context, conn driver.Conn) ([]TableSize, error) {
	rows, err := conn.Query(ctx, `SELECT table, sum(rows), sum(bytes_on_disk), count() FROM system.parts
		WHERE database = currentDatabase() AND active GROUP BY table ORDER BY sum(rows) DESC, table`)
	if err != nil {
		return nil, fmt.Errorf("read clickhouse table sizes: %w", err)
	}
	defer rows.Close()
	var out []TableSize
	for rows.Next() {
		var t TableSize
		if err := rows.Scan(&t.Name, &t.Rows, &t.Bytes, &t.Parts); err != nil {
			return nil, fmt.Errorf("read clickhouse table sizes: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// since returns the counters' growth from before.
func since(before, after map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(after))
	for k, v := range after {
		out[k] = v - min(before[k], v)
	}
	return out
}

// requests is what CPU is divided by: the requests the web received, or
// the fetch-log rows of the crawl.
func (b Bench) requests() int64 {
	if b.Web != nil {
		return int64(b.Web.Requests)
	}
	return int64(b.Summary.Fetched)
}

// selfUsage is the launcher's own CPU time and peak memory so far.
func selfUsage() (supervise.Usage, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return supervise.Usage{}, false
	}
	return supervise.Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), MaxRSS: ru.Maxrss * 1024,
		Faults: ru.Minflt + ru.Majflt, Starts: 1}, true
}

// Print writes the benchmark's table.
func (b Bench) Print(out io.Writer) {
	fmt.Fprintln(out)
	if s := b.Web; s != nil {
		active := s.Last.Sub(s.First).Seconds()
		window := s.LastPage.Sub(s.First).Seconds()
		rate := func(n int, secs float64) float64 {
			if secs <= 0 {
				return 0
			}
			return float64(n) / secs
		}
		fmt.Fprintf(out, "bench: generated web of %d hosts, %d content pages; %.1fs from the first request to the last content page, %.1fs to the last request\n",
			b.WebHosts, s.PagesTotal, window, active)
		fmt.Fprintf(out, "  %-22s %9.1f   %d of %d content pages (%.1f%%) in %.1fs\n", "distinct pages/s", rate(s.Pages, window), s.Pages, s.PagesTotal, 100*s.Coverage(), window)
		q := s.QuarterRates()
		fmt.Fprintf(out, "  %-22s %9s   %.0f, %.0f, %.0f, %.0f: the last quarter at %.0f%% of the first\n", "by quarter", "",
			q[0], q[1], q[2], q[3], 100*q[3]/max(q[0], 1e-9))
		fmt.Fprintf(out, "  %-22s %9.1f   %d requests up to the last content page, %d distinct resources in all\n", "requests/s", rate(s.PageRequests, window), s.PageRequests, s.Distinct)
		fmt.Fprintf(out, "  %-22s %9.1f   %d requests in %.1fs: the crawl to its end, with the retries waiting out their back-off\n", "requests/s, to the end", rate(s.Requests, active), s.Requests, active)
		fmt.Fprintf(out, "  %-22s %9d   (plus %d retries after a 5xx or a cut answer, %d repeated robots.txt)\n", "duplicate requests", s.Duplicates, s.Retries, s.RobotsMore)
		fmt.Fprintf(out, "  %-22s %9d   (disallowed by robots.txt %d, calendar trap pages %d, %d past their second hop = %.1f%% of requests)\n",
			"off-site requests", s.Offsite, s.Disallowed, s.Trap, s.TrapDeep, 100*float64(s.TrapDeep)/float64(max(s.Requests, 1)))
		if s.MostLinkedTotal > 0 {
			fmt.Fprintln(out, "  "+b.mostLinkedLine())
		}
		if b.Shop != nil {
			b.Shop.Print(out)
		}
		if b.Render != nil {
			b.Render.Print(out)
		}
		fmt.Fprintf(out, "  %-22s %9d   (%.3f per request, %.1f requests per connection)\n", "connections opened", s.Connections,
			float64(s.Connections)/float64(max(s.Requests, 1)), float64(s.Requests)/float64(max(s.Connections, 1)))
		if len(s.DuplicateExamples) > 0 {
			fmt.Fprintf(out, "  duplicates, e.g.: %s\n", strings.Join(s.DuplicateExamples, ", "))
		}
	} else {
		fmt.Fprintf(out, "bench: %d fetches, %.1f pages/s between first and last fetch (%.1fs); %.1fs seeding to drained\n",
			b.Summary.Fetched, b.Summary.Rate(), b.Summary.Active.Seconds(), b.Summary.Duration.Seconds())
	}
	if l := b.Lags; l.Polls > 0 {
		q := l.StoredByQuarter
		fmt.Fprintf(out, "  %-22s %9s   p50 %.1fs, p99 %.1fs, max %.1fs; pages waiting p50 %d, p99 %d, max %d (%d polls)\n", "fetch to stored", "",
			l.P50.Seconds(), l.P99.Seconds(), l.Max.Seconds(), l.RecordsP50, l.RecordsP99, l.RecordsMax, l.Polls)
		fmt.Fprintf(out, "  %-22s %9s   %d, %d, %d, %d: the last quarter at %.0f%% of the first\n", "stored by quarter", "",
			q[0], q[1], q[2], q[3], 100*float64(q[3])/float64(max(q[0], 1)))
		if w := l.WaitingMax; len(w) > 0 {
			fmt.Fprintf(out, "  %-22s %9s   links for the scheduler %d, requests for the fetchers %d, pages for the parser %d\n",
				"waiting in topics, max", "", w["scheduler"], w["fetcher"], w["parser"])
		}
	}
	reqs := b.requests()
	names := make([]string, 0, len(b.Processes))
	for n := range b.Processes {
		names = append(names, n)
	}
	slices.Sort(names)
	if b.FetchReads > 0 {
		fmt.Fprintf(out, "  %-22s %9.0f   (%.2f per fetch-log row: a request deferred back to the topic is read again)\n", "fetch topic reads",
			b.FetchReads, b.FetchReads/float64(max(b.Summary.Fetched, 1)))
	}
	fmt.Fprintf(out, "  %-14s %9s %11s %13s %12s %9s\n", "process", "cpu s", "ms/request", "peak rss MiB", "page faults", "gc share")
	var cpu time.Duration
	var rss, faults int64
	for _, n := range names {
		u := b.Processes[n]
		note := ""
		switch {
		case slices.Contains(b.Site, n):
			note = "  (the web: not counted)"
		default:
			cpu += u.CPU
			faults += u.Faults
			if n != "clickhouse" && n != "broker" {
				rss += u.MaxRSS
			}
		}
		gc := "–"
		if r, ok := b.Runtime[n]; ok {
			gc = fmt.Sprintf("%.1f%%", 100*r.GCShare())
		}
		fmt.Fprintf(out, "  %-14s %9.2f %11.3f %13.1f %12d %9s%s\n", n, u.CPU.Seconds(), perRequest(u.CPU, reqs), mib(u.MaxRSS), u.Faults, gc, note)
	}
	fmt.Fprintf(out, "  %-14s %9.2f %11.3f %13.1f %12d  (peak rss: the services and the launcher, summed)\n", "all", cpu.Seconds(), perRequest(cpu, reqs), mib(rss), faults)
	if len(b.ScrapeErrors) > 0 {
		fmt.Fprintf(out, "  gc share not read: %s\n", strings.Join(b.ScrapeErrors, "; "))
	}
	if e := b.ClickHouse; e != nil {
		fmt.Fprintf(out, "  clickhouse: %d queries (%d inserts, %d selects; %.1fs of CPU in query threads), %d rows and %.1f MiB inserted, %d rows (%.1f MiB) merged, %d rows (%.1f MiB) read by selects\n",
			e["Query"], e["InsertQuery"], e["SelectQuery"], float64(e["OSCPUVirtualTimeMicroseconds"])/1e6,
			e["InsertedRows"], float64(e["InsertedBytes"])/(1<<20), e["MergedRows"], float64(e["MergedUncompressedBytes"])/(1<<20),
			e["SelectedRows"], float64(e["SelectedBytes"])/(1<<20))
		fmt.Fprintf(out, "  clickhouse rows merged per row inserted: %.2f; bytes merged per byte inserted: %.2f (uncompressed)\n",
			float64(e["MergedRows"])/float64(max(e["InsertedRows"], 1)), float64(e["MergedUncompressedBytes"])/float64(max(e["InsertedBytes"], 1)))
	}
	if len(b.Merges) > 0 {
		fmt.Fprintln(out, "  clickhouse merges per table during the crawl (system.part_log; rows and MiB read by the merges, uncompressed):")
		fmt.Fprintf(out, "    %-22s %8s %10s %8s %12s %9s %9s %8s\n", "table", "inserts", "rows", "merges", "rows merged", "per row", "MiB read", "merge s")
		for _, t := range b.Merges {
			fmt.Fprintf(out, "    %-22s %8d %10d %8d %12d %9.2f %9.1f %8.1f\n", t.Name, t.Inserts, t.InsertedRows, t.Merges,
				t.MergedRows, float64(t.MergedRows)/float64(max(t.InsertedRows, 1)), mib(int64(t.MergedBytes)), t.MergeSeconds)
		}
	}
	if len(b.Tables) > 0 {
		pages := 0
		if b.Web != nil {
			pages = b.Web.Pages
		}
		fmt.Fprintf(out, "  clickhouse tables (rows per content page, MiB on disk, active parts at the end):")
		for i, t := range b.Tables {
			if i > 0 && i%4 == 0 {
				fmt.Fprintf(out, "\n   ")
			}
			fmt.Fprintf(out, " %s %d (%.1f/page, %.1f, %d)", t.Name, t.Rows, float64(t.Rows)/float64(max(pages, 1)), mib(int64(t.Bytes)), t.Parts)
		}
		fmt.Fprintln(out)
	}
	if w := b.Warc; w != nil {
		fmt.Fprintf(out, "  warc: %d files, %.1f MiB (%.1f KiB per fetch of %d), CDXJ indexes %.1f MiB; the fetcher's cpu above includes writing them\n",
			w.Files, mib(w.Bytes), float64(w.Bytes)/1024/float64(max(b.Summary.Fetched, 1)), b.Summary.Fetched, mib(w.IndexBytes))
	}
}

// mostLinkedLine says how many of a best-deep web's most linked pages the
// crawl fetched, under what budget and in what order.
func (b Bench) mostLinkedLine() string {
	s := b.Web
	line := fmt.Sprintf("most-linked pages held: %d of %d (%.1f %%)", s.MostLinked, s.MostLinkedTotal,
		100*float64(s.MostLinked)/float64(max(s.MostLinkedTotal, 1)))
	if b.MaxPages > 0 {
		line += fmt.Sprintf(" with a budget of %d pages (%.0f %% of the web's %d)", b.MaxPages,
			100*float64(b.MaxPages)/float64(max(s.PagesTotal, 1)), s.PagesTotal)
	} else {
		line += " without a page budget (--max-pages)"
	}
	if b.Order != "" {
		line += ", " + b.Order
	}
	return line + fmt.Sprintf("; %d requests", s.Requests)
}

func perRequest(cpu time.Duration, requests int64) float64 {
	if requests <= 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / 1000 / float64(requests)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// WriteJSON writes the benchmark's figures to path.
func (b Bench) WriteJSON(path string) error {
	v := struct {
		Bench
		Requests  int64   `json:"requests"`
		Fetched   int64   `json:"fetch_log_rows"`
		ActiveSec float64 `json:"fetch_log_active_seconds"`
	}{b, b.requests(), b.Summary.Fetched, b.Summary.Active.Seconds()}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode bench figures: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write bench figures: %w", err)
	}
	return nil
}

// printProfiles prints the top entries of every process's CPU profile in
// dir (written by the services' --profile-dir), by flat CPU, with the
// command to read more.
func printProfiles(ctx context.Context, out io.Writer, dir string, bins map[string]string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		fmt.Fprintf(out, "\nprofiles: %v\n", err)
		return
	}
	fmt.Fprintf(out, "\nprofiles in %s (go tool pprof -top BINARY DIR/cpu.pprof; allocs.pprof for allocations)\n", dir)
	for _, e := range entries {
		name := e.Name()
		bin := bins[strings.SplitN(name, "-", 2)[0]]
		prof := filepath.Join(dir, name, "cpu.pprof")
		if bin == "" || !e.IsDir() {
			continue
		}
		cmd := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=12", bin, prof)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(out, "== %s: %v\n%s\n", name, err, buf.String())
			continue
		}
		fmt.Fprintf(out, "== %s\n", name)
		show := false
		for line := range strings.Lines(buf.String()) {
			switch {
			case strings.HasPrefix(line, "Duration:"):
				fmt.Fprint(out, "  "+line)
			case strings.Contains(line, "flat%"):
				show = true
				fmt.Fprint(out, "  "+line)
			case show:
				fmt.Fprint(out, "  "+line)
			}
		}
	}
}
