package chlocal

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Flags of BenchmarkCrawlInsertLoad (go test -args style, e.g.
// go test -run '^$' -bench CrawlInsertLoad -benchtime 1x -load.rate 300).
var (
	loadRate     = flag.Int("load.rate", 600, "CrawlInsertLoad: fetched pages per second to replay")
	loadDuration = flag.Duration("load.duration", 30*time.Second, "CrawlInsertLoad: how long to replay")
	loadFlush    = flag.Duration("load.flush", chstore.DefaultFlushInterval, "CrawlInsertLoad: BatchWriter flush interval of every table")
	loadMaxRows  = flag.Int("load.maxrows", 10000, "CrawlInsertLoad: BatchWriter MaxRows of every table")
	loadSettle   = flag.Duration("load.settle", time.Minute, "CrawlInsertLoad: after the load, wait up to this long for merges to finish (counted)")
	loadIdle     = flag.Duration("load.idle", 0, "CrawlInsertLoad: measure the idle server this long before and after the load")
	loadConfig   = flag.String("load.config", "", "CrawlInsertLoad: server config template file to use instead of chlocal's (fields of configData: {{.Dir}} {{.TCPPort}} {{.HTTPPort}} {{.Legacy}})")
	loadAddr     = flag.String("load.addr", "", "CrawlInsertLoad: use this running server (host:port) instead of a private one; events then include other clients'")
	loadPid      = flag.Int("load.pid", 0, "CrawlInsertLoad: with -load.addr, the server's pid for CPU and RSS figures")
	loadDir      = flag.String("load.dir", "", "CrawlInsertLoad: data directory of the private server (default: a temporary one, removed)")
	loadSeed     = flag.Int64("load.seed", 1, "CrawlInsertLoad: random seed of the generated crawl")
	loadTrace    = flag.Bool("load.trace", false, "CrawlInsertLoad: log the server's RSS, merges and memory every second")
)

// The shape of the replayed crawl: the benchmark site of the cost-per-page
// issue (200 hosts, 10-30 KB HTML pages, ~12 KB of text each) as the
// services store it.
const (
	loadHosts            = 200
	loadPartitions       = 32 // kafkaio.DefaultPartitions
	loadEventsPerPage    = 3  // url_events: links to URLs already seen, a few off-site
	loadPagesPerLookup   = 20 // one SeenContent per parser batch of ~20 pages
	loadPagesPerRobots   = 56 // one robots.txt per host of 56 pages
	loadTextBytes        = 12 << 10
	loadTick             = 100 * time.Millisecond
	loadMaxInflightTicks = 64 // generator stalls (and the achieved rate drops) beyond this
	loadCrawlID          = "load-bench"
)

// BenchmarkCrawlInsertLoad replays the inserts and reads a crawl makes
// against a ClickHouse server started with chlocal's config (or -load.config,
// or the server at -load.addr), through the real schema (Store.Migrate) and
// the real BatchWriter, and reports what the server spent:
//
//   - cpu-s, cpu-ms/page: server CPU (utime+stime of its process) from the
//     start of the load until merges settle (-load.settle), per page;
//     load-cpu-s: the load alone, sys-cpu-s: the kernel's share,
//     query-cpu-s: query threads (OSCPUVirtualTimeMicroseconds);
//   - peak-rss-MiB: VmHWM of the server process (since its start);
//     end-rss-MiB: VmRSS at the end (after the idle period with -load.idle);
//   - parts-created (MergeTreeDataWriterBlocks), merge-s (merge threads'
//     wall time), merged-rows, merged-MB, inserted-MB and write-amp
//     (merged / inserted uncompressed bytes): system.events deltas;
//   - max-parts (active parts of the fullest partition, sampled every 5s),
//     peak-merges and peak-merge-mem-MiB (concurrent merges and their
//     memory, sampled every second), delayed-inserts (inserts slowed by
//     too many parts);
//   - client-cpu-s: this process (generator and driver), for context;
//   - with -load.trace, a line per second: server CPU, RSS, merges and
//     their memory, query memory.
//   - idle-cpu-ms/min before and after the load with -load.idle.
//
// Per fetched page it inserts what the services insert: fetch_log 1 row
// (feeding the two per-minute materialized views), url_seen 1,
// documents 1 (~12 KB of random-word text), document_meta 1, content_seen
// 1, url_events 3, links_dropped aggregated per 100 ms batch, robots_txt 1
// per 56 pages; it looks up content_seen (SeenContent) once per 20 pages
// and reloads every url_seen partition (LoadSeen) at the start and halfway.
// Every table has its own BatchWriter flushing every -load.flush; a page
// counts when all its rows are acknowledged.
//
// It asserts nothing about performance: it fails only when an insert or a
// query fails. Run one iteration:
//
//	go test -run '^$' -bench CrawlInsertLoad -benchtime 1x ./chlocal/
//	go test -run '^$' -bench CrawlInsertLoad -benchtime 1x ./chlocal/ -args -load.rate 200 -load.duration 5m
func BenchmarkCrawlInsertLoad(b *testing.B) {
	if *loadRate <= 0 || *loadDuration <= 0 || *loadFlush <= 0 {
		b.Fatal("load.rate, load.duration and load.flush must be positive")
	}
	ctx := b.Context()
	addr, pid := *loadAddr, *loadPid
	if addr == "" {
		srv := startLoadServer(ctx, b)
		addr, pid = srv.Addr(), srv.Pid()
	}
	db := fmt.Sprintf("crawl_load_%d", time.Now().UnixNano())
	store, err := chstore.Open(ctx, chstore.Config{Addr: []string{addr}, Database: db, Username: "default", DialTimeout: 5 * time.Second}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if *loadAddr != "" {
		b.Cleanup(func() { _ = store.Conn().Exec(context.WithoutCancel(b.Context()), "DROP DATABASE IF EXISTS "+db) })
	}
	mon, err := newLoadMonitor(addr, pid)
	if err != nil {
		b.Fatal(err)
	}
	defer mon.close()

	var idleBefore, idleAfter float64
	if *loadIdle > 0 {
		idleBefore = mon.idleCPU(ctx, b, *loadIdle)
	}

	b.ResetTimer()
	clientStart := selfCPU()
	start := mon.snapshot(ctx, b)
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); mon.sample(sctx) }()

	gen := newCrawlLoad(store, *loadSeed)
	pages, genSecs := gen.run(ctx, b, *loadRate, *loadDuration)
	loaded := mon.snapshot(ctx, b)
	mon.settle(ctx, b, *loadSettle)
	settled := mon.snapshot(ctx, b)
	stopSampling()
	<-sampled
	client := selfCPU()
	b.StopTimer()
	if *loadTrace {
		b.Logf("samples:\n%s", strings.Join(mon.trace, "\n"))
	}

	if *loadIdle > 0 {
		idleAfter = mon.idleCPU(ctx, b, *loadIdle)
	}
	var endRSS int64
	if pid > 0 {
		if endRSS, err = procStatusBytes(pid, "VmRSS"); err != nil {
			b.Fatal(err)
		}
	}
	mon.logTables(ctx, b, db)

	d := settled.sub(start)
	loadSecs := loaded.at.Sub(start.at).Seconds()
	b.ReportMetric(float64(pages), "pages")
	b.ReportMetric(float64(pages)/genSecs, "pages/s")
	if pid > 0 {
		b.ReportMetric(d.cpu, "cpu-s")
		b.ReportMetric(d.sys, "sys-cpu-s")
		b.ReportMetric(loaded.sub(start).cpu, "load-cpu-s")
		b.ReportMetric(1000*d.cpu/float64(max(pages, 1)), "cpu-ms/page")
		b.ReportMetric(float64(settled.hwm)/(1<<20), "peak-rss-MiB")
		b.ReportMetric(float64(endRSS)/(1<<20), "end-rss-MiB")
	}
	b.ReportMetric(d.events["OSCPUVirtualTimeMicroseconds"]/1e6, "query-cpu-s")
	b.ReportMetric(d.events["MergeTreeDataWriterBlocks"], "parts-created")
	b.ReportMetric(d.events["MergesTimeMilliseconds"]/1000, "merge-s")
	b.ReportMetric(d.events["MergedRows"], "merged-rows")
	b.ReportMetric(d.events["MergedUncompressedBytes"]/1e6, "merged-MB")
	b.ReportMetric(d.events["InsertedBytes"]/1e6, "inserted-MB")
	if ins := d.events["InsertedBytes"]; ins > 0 {
		b.ReportMetric(d.events["MergedUncompressedBytes"]/ins, "write-amp")
	}
	b.ReportMetric(float64(mon.maxParts.Load()), "max-parts")
	b.ReportMetric(float64(mon.peakMerges.Load()), "peak-merges")
	b.ReportMetric(float64(mon.peakMergeMem.Load())/(1<<20), "peak-merge-mem-MiB")
	b.ReportMetric((client - clientStart).Seconds(), "client-cpu-s")
	b.ReportMetric(d.events["DelayedInserts"], "delayed-inserts")
	if *loadIdle > 0 && pid > 0 {
		b.ReportMetric(idleBefore, "idle-cpu-ms/min")
		b.ReportMetric(idleAfter, "idle-after-cpu-ms/min")
	}
	b.Logf("settled %.1fs after the load; %d pages in %.1fs; server pid %d", settled.at.Sub(loaded.at).Seconds(), pages, loadSecs, pid)
}

func startLoadServer(ctx context.Context, b *testing.B) *Server {
	var o Options
	if *loadConfig != "" {
		text, err := os.ReadFile(*loadConfig)
		if err != nil {
			b.Fatal(err)
		}
		t, err := template.New(filepath.Base(*loadConfig)).Parse(string(text))
		if err != nil {
			b.Fatal(err)
		}
		o.configTemplate = t
	}
	dir := *loadDir
	if dir == "" {
		dir = b.TempDir()
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	srv, err := StartWith(sctx, dir, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// crawlLoad generates the rows of a crawl and writes them through one
// BatchWriter per table.
type crawlLoad struct {
	store *chstore.Store
	rng   *rand.Rand
	drawn []string // words of vocab drawn with Zipf frequencies
	vocab []string

	fetch   *chstore.BatchWriter[chstore.FetchLogRow]
	seen    *chstore.BatchWriter[chstore.SeenRow]
	docs    *chstore.BatchWriter[chstore.DocumentRow]
	meta    *chstore.BatchWriter[chstore.DocumentMetaRow]
	content *chstore.BatchWriter[chstore.ContentSeenRow]
	dropped *chstore.BatchWriter[chstore.LinksDroppedRow]
	events  *chstore.BatchWriter[chstore.URLEventRow]
	robots  *chstore.BatchWriter[chstore.RobotsRow]

	page     int      // pages generated
	urls     []string // of generated pages, for links to seen URLs
	contents []uint64 // content fingerprints generated, for duplicates
}

func newCrawlLoad(s *chstore.Store, seed int64) *crawlLoad {
	rng := rand.New(rand.NewSource(seed))
	vocab := make([]string, 30000)
	const letters = "etaoinshrdlcumwfgypbvkjxqz"
	for i := range vocab {
		n := 2 + rng.Intn(9)
		w := make([]byte, n)
		for j := range w {
			w[j] = letters[min(rng.Intn(len(letters)), rng.Intn(len(letters)))] // frequent letters first
		}
		vocab[i] = string(w)
	}
	o := chstore.BatchOptions{MaxRows: *loadMaxRows, FlushInterval: *loadFlush, MaxBuffered: 4 * *loadMaxRows}
	return &crawlLoad{
		store:   s,
		rng:     rng,
		drawn:   zipfWords(rng, vocab),
		vocab:   vocab,
		fetch:   chstore.NewBatchWriter(s, chstore.FetchLog, o, nil, nil),
		seen:    chstore.NewBatchWriter(s, chstore.URLSeen, o, nil, nil),
		docs:    chstore.NewBatchWriter(s, chstore.Documents, o, nil, nil),
		meta:    chstore.NewBatchWriter(s, chstore.DocumentMeta, o, nil, nil),
		content: chstore.NewBatchWriter(s, chstore.ContentSeen, o, nil, nil),
		dropped: chstore.NewBatchWriter(s, chstore.LinksDropped, o, nil, nil),
		events:  chstore.NewBatchWriter(s, chstore.URLEvents, o, nil, nil),
		robots:  chstore.NewBatchWriter(s, chstore.RobotsTxt, o, nil, nil),
	}
}

// zipfWords draws 1M words of vocab with Zipf-distributed frequencies, as
// in natural text (drawing per word costs more CPU than the server's share).
func zipfWords(rng *rand.Rand, vocab []string) []string {
	z := rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1))
	out := make([]string, 1<<20)
	for i := range out {
		out[i] = vocab[z.Uint64()]
	}
	return out
}

// words returns about n bytes of space-separated random words.
func (g *crawlLoad) words(n int) string {
	var sb strings.Builder
	sb.Grow(n + 16)
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(g.drawn[g.rng.Intn(len(g.drawn))])
	}
	return sb.String()
}

func host(h int) string { return fmt.Sprintf("www.site-%03d.example", h) }

func fp64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

func (g *crawlLoad) url(h, page int) string {
	return fmt.Sprintf("http://%s/%s/%s-%d.html", host(h), g.vocab[g.rng.Intn(2000)], g.vocab[g.rng.Intn(2000)], page)
}

// tickRows is what one 100 ms batch of pages inserts.
type tickRows struct {
	fetch   []chstore.FetchLogRow
	seen    []chstore.SeenRow
	docs    []chstore.DocumentRow
	meta    []chstore.DocumentMetaRow
	content []chstore.ContentSeenRow
	dropped []chstore.LinksDroppedRow
	events  []chstore.URLEventRow
	robots  []chstore.RobotsRow
	lookups [][]uint64 // content fingerprints looked up with SeenContent
}

func (g *crawlLoad) generate(n int, now time.Time) *tickRows {
	t := &tickRows{}
	sec := now.Truncate(time.Second)
	minute := now.Truncate(time.Minute)
	dropped := map[chstore.LinksDroppedRow]uint64{}
	var lookup []uint64
	for range n {
		i := g.page
		g.page++
		h := i % loadHosts
		hostName := host(h)
		part := uint16(fp64(hostName) % loadPartitions)
		u := g.url(h, i)
		ufp := fp64(u)
		g.urls = append(g.urls, u)

		status, errKind, size := uint16(200), "", uint64(10<<10+g.rng.Intn(20<<10))
		switch r := g.rng.Intn(100); {
		case r < 3:
			status, size = 404, 512
		case r < 5:
			status, errKind, size = 0, "timeout", 0
		}
		t.fetch = append(t.fetch, chstore.FetchLogRow{
			CrawlID: loadCrawlID, URL: u, URLFP: ufp, Host: hostName, Partition: part, Attempt: 1,
			FetchedAt: now, FetchedAtMs: chstore.Millis(now), Status: status, ErrorKind: errKind,
			Bytes: size, ContentType: "text/html; charset=utf-8", DurationMs: uint32(5 + g.rng.Intn(200)),
			Depth: uint16(g.rng.Intn(6)), Fetcher: "fetcher-0",
		})
		// The URL this page's links admitted next.
		next := g.url(h, i+loadHosts)
		t.seen = append(t.seen, chstore.SeenRow{CrawlID: loadCrawlID, Partition: part, FP: fp64(next), URL: next,
			Depth: uint16(g.rng.Intn(6)), FirstSeen: sec})

		cfp := g.rng.Uint64()
		if len(g.contents) > 0 && g.rng.Intn(20) == 0 { // 5% exact duplicates
			cfp = g.contents[g.rng.Intn(len(g.contents))]
		}
		g.contents = append(g.contents, cfp)
		text := g.words(loadTextBytes/2 + g.rng.Intn(loadTextBytes))
		t.docs = append(t.docs, chstore.DocumentRow{CrawlID: loadCrawlID, URL: u, URLFP: ufp, Host: hostName,
			FetchedAt: sec, Status: status, Title: g.words(40), Text: text, ContentFP: cfp,
			Outlinks: uint32(20 + g.rng.Intn(40)), ContentType: "text/html", Language: "en"})
		t.meta = append(t.meta, chstore.DocumentMetaRow{CrawlID: loadCrawlID, URL: u, URLFP: ufp, Host: hostName,
			FetchedAt: sec, Description: g.words(150), CanonicalURL: u, Simhash: g.rng.Uint64(), ContentFP: cfp,
			IsDetail: g.rng.Intn(2) == 0, Depth: uint16(g.rng.Intn(6))})
		t.content = append(t.content, chstore.ContentSeenRow{CrawlID: loadCrawlID, ContentFP: cfp, URL: u, FirstSeen: sec})
		lookup = append(lookup, cfp)
		if len(lookup) == loadPagesPerLookup {
			t.lookups = append(t.lookups, lookup)
			lookup = nil
		}

		for e := range loadEventsPerPage {
			ev := chstore.URLEventRow{CrawlID: loadCrawlID, Host: hostName, Partition: part,
				State: "duplicate", Reason: "duplicate", Depth: uint16(g.rng.Intn(6)), EventTime: sec}
			if e == 0 && g.rng.Intn(3) == 0 {
				ev.URL = fmt.Sprintf("https://elsewhere-%d.example/%s", g.rng.Intn(5000), g.vocab[g.rng.Intn(2000)])
				ev.Host, ev.State, ev.Reason = "", "out_of_scope", "offsite"
				ev.URLFP = fp64(ev.URL)
			} else {
				ev.URL = g.urls[g.rng.Intn(len(g.urls))] // a link to a page already seen
				ev.URLFP = fp64(ev.URL)
			}
			t.events = append(t.events, ev)
		}
		for _, reason := range []string{"offsite", "duplicate_link"} {
			dropped[chstore.LinksDroppedRow{CrawlID: loadCrawlID, Host: hostName, Reason: reason, Hour: minute.Truncate(time.Hour)}] += uint64(1 + g.rng.Intn(10))
		}
		if i%loadPagesPerRobots == 0 {
			rh := host(i / loadPagesPerRobots % loadHosts)
			t.robots = append(t.robots, chstore.RobotsRow{Partition: uint16(fp64(rh) % loadPartitions), Origin: "http://" + rh,
				Host: rh, Agent: "trawl", Outcome: "parsed", Status: 200, Rules: "user-agent: *\ndisallow: /private/\ndisallow: /tmp/\n",
				Sitemaps: []string{"http://" + rh + "/sitemap.xml"}, BodyBytes: 120, FetchedAt: sec, Expires: sec.Add(24 * time.Hour), Fetcher: "fetcher-0"})
		}
	}
	for k, n := range dropped {
		k.N = n
		t.dropped = append(t.dropped, k)
	}
	if len(lookup) > 0 {
		t.lookups = append(t.lookups, lookup)
	}
	return t
}

// run replays rate pages per second for d and returns the pages whose rows
// were all acknowledged and the seconds it took to generate them.
func (g *crawlLoad) run(ctx context.Context, b *testing.B, rate int, d time.Duration) (int, float64) {
	wctx, stopWriters := context.WithCancel(ctx)
	var writers sync.WaitGroup
	writerErrs := make(chan error, 8)
	for _, run := range []func(context.Context) error{g.fetch.Run, g.seen.Run, g.docs.Run, g.meta.Run,
		g.content.Run, g.dropped.Run, g.events.Run, g.robots.Run} {
		writers.Add(1)
		go func() {
			defer writers.Done()
			if err := run(wctx); err != nil {
				writerErrs <- err
			}
		}()
	}

	var (
		failed   atomic.Pointer[error]
		acked    atomic.Int64
		inflight = make(chan struct{}, loadMaxInflightTicks)
		ticks    sync.WaitGroup
	)
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	loadSeen := func() {
		for p := range loadPartitions {
			if err := g.store.LoadSeen(ctx, p, nil, func(string, uint64) {}); err != nil {
				fail(err)
			}
		}
	}
	loadSeen() // the scheduler's start

	start := time.Now()
	tick := time.NewTicker(loadTick)
	defer tick.Stop()
	generated, reloaded := 0, false
	// Pages are due by the clock, so a generator that was descheduled
	// catches up instead of silently lowering the rate.
	for now := start; now.Sub(start) < d && failed.Load() == nil; now = <-tick.C {
		n := int(now.Sub(start).Seconds()*float64(rate)) + 1 - generated
		if n <= 0 {
			continue
		}
		generated += n
		rows := g.generate(n, time.Now())
		inflight <- struct{}{} // blocks when the server falls behind
		ticks.Add(1)
		go func() {
			defer ticks.Done()
			defer func() { <-inflight }()
			var wg sync.WaitGroup
			write := func(f func() error) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := f(); err != nil {
						fail(err)
					}
				}()
			}
			write(func() error { return g.fetch.Write(ctx, rows.fetch...) })
			write(func() error { return g.seen.Write(ctx, rows.seen...) })
			write(func() error { return g.docs.Write(ctx, rows.docs...) })
			write(func() error { return g.meta.Write(ctx, rows.meta...) })
			write(func() error { return g.content.Write(ctx, rows.content...) })
			write(func() error { return g.dropped.Write(ctx, rows.dropped...) })
			write(func() error { return g.events.Write(ctx, rows.events...) })
			write(func() error { return g.robots.Write(ctx, rows.robots...) })
			for _, fps := range rows.lookups {
				if _, err := g.store.SeenContent(ctx, loadCrawlID, fps); err != nil {
					fail(err)
				}
			}
			wg.Wait()
			acked.Add(int64(n))
		}()
		if !reloaded && now.Sub(start) >= d/2 {
			reloaded = true
			ticks.Add(1)
			go func() { defer ticks.Done(); loadSeen() }() // a rebalance
		}
	}
	genSecs := time.Since(start).Seconds()
	ticks.Wait()
	stopWriters()
	writers.Wait()
	close(writerErrs)
	for err := range writerErrs {
		fail(err)
	}
	if p := failed.Load(); p != nil {
		b.Fatalf("crawl load: %v", *p)
	}
	return int(acked.Load()), genSecs
}

// loadMonitor reads the server's counters: /proc for CPU and memory,
// system tables for the rest (a connection of its own).
type loadMonitor struct {
	conn driver.Conn
	pid  int

	maxParts     atomic.Int64
	peakMerges   atomic.Int64
	peakMergeMem atomic.Int64

	mu    sync.Mutex
	trace []string
}

func newLoadMonitor(addr string, pid int) (*loadMonitor, error) {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return &loadMonitor{conn: conn, pid: pid}, nil
}

func (m *loadMonitor) close() { _ = m.conn.Close() }

type loadSnapshot struct {
	at     time.Time
	cpu    float64 // seconds of utime+stime
	sys    float64 // seconds of stime
	hwm    int64   // VmHWM bytes
	events map[string]float64
}

func (s loadSnapshot) sub(o loadSnapshot) loadSnapshot {
	d := loadSnapshot{at: s.at, cpu: s.cpu - o.cpu, sys: s.sys - o.sys, hwm: s.hwm, events: map[string]float64{}}
	for k, v := range s.events {
		d.events[k] = v - o.events[k]
	}
	return d
}

func (m *loadMonitor) snapshot(ctx context.Context, b *testing.B) loadSnapshot {
	s := loadSnapshot{at: time.Now(), events: map[string]float64{}}
	if m.pid > 0 {
		var err error
		if s.cpu, s.sys, err = procCPUSys(m.pid); err != nil {
			b.Fatal(err)
		}
		if s.hwm, err = procStatusBytes(m.pid, "VmHWM"); err != nil {
			b.Fatal(err)
		}
	}
	rows, err := m.conn.Query(ctx, "SELECT event, value FROM system.events")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			v    uint64
		)
		if err := rows.Scan(&name, &v); err != nil {
			b.Fatal(err)
		}
		s.events[name] = float64(v)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return s
}

// sample records, every second until ctx is done, the peaks of concurrent
// merges and of their memory, and every 5 s the peak of active parts in one
// partition; with -load.trace it keeps a line per sample.
func (m *loadMonitor) sample(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	t0 := time.Now()
	for n := 0; ; n++ {
		var merges, mergeMem uint64
		var queryMem int64
		err := m.conn.QueryRow(ctx, `SELECT (SELECT count() FROM system.merges), (SELECT sum(memory_usage) FROM system.merges),
	(SELECT sum(value) FROM system.metrics WHERE metric = 'MemoryTracking')`).Scan(&merges, &mergeMem, &queryMem)
		if err == nil {
			m.peakMerges.Store(max(m.peakMerges.Load(), int64(merges)))
			m.peakMergeMem.Store(max(m.peakMergeMem.Load(), int64(mergeMem)))
		}
		if n%5 == 0 {
			var parts uint64
			err := m.conn.QueryRow(ctx, "SELECT max(c) FROM (SELECT count() AS c FROM system.parts WHERE active GROUP BY database, table, partition_id)").Scan(&parts)
			if err == nil {
				m.maxParts.Store(max(m.maxParts.Load(), int64(parts)))
			}
		}
		if *loadTrace && m.pid > 0 {
			rss, _ := procStatusBytes(m.pid, "VmRSS")
			cpu, _ := procCPU(m.pid)
			var biggest string
			_ = m.conn.QueryRow(ctx, `SELECT concat(table, ' ', toString(num_parts), ' parts ', toString(intDiv(total_size_bytes_compressed, 1048576)),
	' MiB on disk ', toString(intDiv(memory_usage, 1048576)), ' MiB') FROM system.merges ORDER BY memory_usage DESC LIMIT 1`).Scan(&biggest)
			m.mu.Lock()
			m.trace = append(m.trace, fmt.Sprintf("t=%3.0fs cpu=%6.2fs rss=%4dMiB merges=%d merge-mem=%4dMiB query-mem=%4dMiB %s",
				time.Since(t0).Seconds(), cpu, rss>>20, merges, mergeMem>>20, queryMem>>20, biggest))
			m.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// settle waits until no merge has run for three polls in a row, or limit.
func (m *loadMonitor) settle(ctx context.Context, b *testing.B, limit time.Duration) {
	deadline := time.Now().Add(limit)
	quiet := 0
	for quiet < 3 && time.Now().Before(deadline) {
		var merges uint64
		if err := m.conn.QueryRow(ctx, "SELECT count() FROM system.merges").Scan(&merges); err != nil {
			b.Fatal(err)
		}
		if merges == 0 {
			quiet++
		} else {
			quiet = 0
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// idleCPU returns the server's CPU milliseconds per minute over d with no
// client activity.
func (m *loadMonitor) idleCPU(ctx context.Context, b *testing.B, d time.Duration) float64 {
	if m.pid <= 0 {
		return 0
	}
	c0, err := procCPU(m.pid)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	c1, err := procCPU(m.pid)
	if err != nil {
		b.Fatal(err)
	}
	return 1000 * (c1 - c0) / time.Since(t0).Minutes()
}

// logTables logs each table's active parts, rows and sizes at the end.
func (m *loadMonitor) logTables(ctx context.Context, b *testing.B, db string) {
	rows, err := m.conn.Query(ctx, `SELECT table, count(), sum(rows), sum(data_uncompressed_bytes), sum(data_compressed_bytes), max(level)
FROM system.parts WHERE active AND database = ? GROUP BY table ORDER BY sum(data_uncompressed_bytes) DESC`, db)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-22s %6s %9s %10s %10s %5s\n", "table", "parts", "rows", "raw MB", "disk MB", "level")
	for rows.Next() {
		var (
			table               string
			parts, n, raw, disk uint64
			level               uint32
		)
		if err := rows.Scan(&table, &parts, &n, &raw, &disk, &level); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&sb, "%-22s %6d %9d %10.1f %10.1f %5d\n", table, parts, n, float64(raw)/1e6, float64(disk)/1e6, level)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.Logf("active parts at the end:\n%s", sb.String())
}

// selfCPU returns the CPU time this process (the load generator and the
// driver) has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU returns the user+system CPU seconds of a process (all threads).
func procCPU(pid int) (float64, error) {
	cpu, _, err := procCPUSys(pid)
	return cpu, err
}

// procCPUSys returns the user+system and the system CPU seconds of a
// process (all threads).
func procCPUSys(pid int) (cpu, sys float64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read process cpu: %w", err)
	}
	// Fields after the parenthesized command: state is field 3, utime 14,
	// stime 15 (proc(5)).
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("read process cpu: malformed stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, errors.New("read process cpu: short stat")
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("read process cpu: %w", err)
	}
	const clkTck = 100 // USER_HZ on Linux
	return float64(utime+stime) / clkTck, float64(stime) / clkTck, nil
}

// procStatusBytes returns a "kB" field of /proc/<pid>/status in bytes.
func procStatusBytes(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read process status %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read process status: no %s", field)
}
