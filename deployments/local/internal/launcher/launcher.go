// Package launcher runs a whole crawl on one machine from one command:
// it builds the services, starts the embedded broker and a ClickHouse
// server, serves the demo site when asked, runs the pipeline until the crawl
// drains (or the user interrupts it), and prints a summary.
package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/chboot"
	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/deployments/local/internal/progress"
	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

// DefaultPartitions is the partition count of a local crawl's URL topics.
// A partition is the unit of parallelism of each consumer group: on one
// machine, with one process per service, every partition is a reader per
// group, polling and fetching on its own, and a batch of records split
// eight ways instead of thirty-two. Eight serve up to eight processes of
// a service; the services' own default (kafkaio.DefaultPartitions, 32) is
// for clusters. On the bench web, 8 instead of 32 cost the broker 0.27
// instead of 0.46 ms of CPU per request and the parser 202 instead of 373
// MiB.
const DefaultPartitions = 8

// Config is the launcher's configuration.
type Config struct {
	Seeds     []string // flag seed (repeatable)
	SeedsFile string   // flag seeds-file ("-" for stdin)
	CrawlID   string   // flag crawl-id (default generated from the time)
	// New (flag new) starts a new crawl instead of resuming an unfinished
	// crawl of the same seeds; CancelOthers (flag cancel-others) cancels
	// the other unfinished crawls of the data dir instead of finishing
	// them (see crawls.go).
	New          bool
	CancelOthers bool
	// Full (flag full) makes a new crawl of seeds whose crawl finished
	// fetch every page again, instead of re-crawling that crawl
	// incrementally (its pages asked for conditionally: crawls.go).
	Full      bool
	Demo      bool // flag demo
	DemoHosts int  // flag demo-hosts
	DemoPages int  // flag demo-pages (total over all hosts)
	// DemoScriptHosts (flag demo-script-hosts) of the demo's hosts build
	// their pages with a script (demosite.Config.ScriptHosts); the demo
	// crawl renders them (render auto in its spec, unless the spec or
	// -render says otherwise).
	DemoScriptHosts int
	Delay           time.Duration // flag delay
	AllowPrivate    bool          // flag allow-private
	Partitions      int           // flag partitions
	Fetchers        int           // flag fetchers
	DataDir         string        // flag data-dir
	Timeout         time.Duration // flag timeout (0: none)
	Bench           bool          // flag bench
	StoreLinks      bool          // flag store-links: the parser keeps the link graph
	Warc            bool          // flag warc: the fetchers archive every fetch as WARC in DataDir/warc
	// Web (flag web) serves the generated web of internal/websim
	// (WebHosts hosts of WebArticles articles, flags web-hosts,
	// web-articles) in a process of its own, pinned to SiteCPUs (flag
	// site-cpus) when set, and crawls it scoped to its hosts.
	Web         bool
	WebHosts    int
	WebPort     int // flag web-port: the generated web's port, 0 any free one
	WebArticles int
	SiteCPUs    string
	// WebTrapEvery (flag web-trap-every) puts a calendar trap on every
	// n-th host of the web (websim.Config.TrapEvery: 0 the default, -1
	// none); WebTrapGrid (flag web-trap-grid) makes its months link the
	// same month of the years next to them too (websim.Config.TrapGrid).
	WebTrapEvery int
	WebTrapGrid  bool
	// WebBestDeep (flag web-best-deep) serves sites whose most linked
	// pages sit deepest (websim.Config.BestDeep) instead of articles; with
	// --bench and a page budget (--max-pages), how many of them the crawl
	// holds is the figure of best-first.
	WebBestDeep bool
	// WebShop (flag web-shop) serves shops (websim.Config.Shop) instead
	// of articles: WebArticles product pages a host whose fields and
	// structured data are known; with --bench, how many of them the
	// crawl stored exactly (ShopReport).
	WebShop bool
	// WebScriptShare (flag web-script-share) makes that share of the
	// generated web's sites script-built (websim --script-share): HTML
	// shells whose script writes the page's text and links.
	WebScriptShare float64
	// Render (flag render) is the fetchers' --render: never, auto or
	// always; "" leaves the fetchers' own (CRAWLER_RENDER, else never).
	Render string
	// BrokerProcess (flag broker-process; --bench implies it) runs the
	// embedded broker as a process of its own, to count it apart.
	BrokerProcess  bool
	ProfileDir     string // flag profile: every service's CPU and allocation profiles go here
	BenchJSON      string // flag bench-json: the benchmark's figures as JSON
	ClickHouseAddr string // flag clickhouse-addr (empty: start a private server)
	Database       string // flag clickhouse-database
	// ClickHousePartLog (flag clickhouse-part-log) has the private server
	// keep system.part_log; with -bench, the merges of each table are
	// printed from it.
	ClickHousePartLog bool
	// KafkaBrokers (flag kafka-brokers, comma separated) is an existing
	// Kafka to crawl through instead of the embedded broker.
	KafkaBrokers string
	// Security (the services' flags kafka-tls…, kafka-sasl-…,
	// clickhouse-user, clickhouse-password-file, clickhouse-tls…) is how
	// the launcher and every service reach an existing Kafka and
	// ClickHouse.
	Security pipeline.Security
	Verbose  bool // flag verbose: copy service logs to stderr
	// Console (flag console) also runs `seeder serve`, the crawl-jobs API
	// and its operator console, at ConsoleAddr (flag console-addr), and
	// keeps it up after the crawl drained until interrupted.
	Console     bool
	ConsoleAddr string
	// SpecFile (flag spec) is a crawl request as POST /v1/crawls takes it:
	// its scope, limits, politeness and revisit policy are the crawl's, its
	// seeds are crawled with the others. Scope flags override its fields.
	SpecFile string
	Scope    ScopeFlags // flags allow-host … max-pages-per-host
	// AutoRestart (flag restart) restarts a service that exits on its own
	// per Restart (flags restart-backoff, restart-max-backoff, restart-max,
	// restart-window); a crash loop ends the crawl.
	AutoRestart bool
	Restart     supervise.Policy

	// Bins, when set, are prebuilt service binaries (tests); otherwise
	// Run builds them into DataDir/bin.
	Bins map[string]string
}

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Func("seed", "seed URL (repeatable)", func(s string) error {
		c.Seeds = append(c.Seeds, s)
		return nil
	})
	fs.StringVar(&c.SeedsFile, "seeds-file", "", "file with one seed URL per line (- for stdin)")
	fs.StringVar(&c.CrawlID, "crawl-id", "", "crawl id (default: the spec file's crawl_id, else the data dir's unfinished crawl of the same seeds, else crawl-<UTC time>)")
	fs.BoolVar(&c.New, "new", false, "start a new crawl even when the data dir holds an unfinished crawl of the same seeds (by default it is resumed)")
	fs.BoolVar(&c.Full, "full", false, "a new crawl of seeds whose crawl finished fetches every page again, instead of asking for that crawl's pages conditionally and carrying the unchanged ones over")
	fs.BoolVar(&c.CancelOthers, "cancel-others", false, "cancel the data dir's other unfinished crawls, whose URLs may be left in the topics, instead of crawling them too")
	fs.StringVar(&c.SpecFile, "spec", "", "crawl request as JSON, the body of POST /v1/crawls (scope, limits, politeness, revisit, seeds); the scope flags below override its fields")
	fs.BoolVar(&c.Demo, "demo", false, "serve the built-in demo site on 127.0.0.x and crawl it (implies -allow-private)")
	fs.IntVar(&c.DemoHosts, "demo-hosts", 5, "demo site hosts")
	fs.IntVar(&c.DemoPages, "demo-pages", 300, "demo site pages over all hosts")
	fs.IntVar(&c.DemoScriptHosts, "demo-script-hosts", 1, "demo site hosts that build their pages with a script, as React or Vue sites do; the demo crawl renders their pages in headless Chromium when it is installed (render auto)")
	fs.DurationVar(&c.Delay, "delay", time.Second, "minimum delay between two requests to one host (below 1ms: 1ms, the fetchers' smallest)")
	fs.BoolVar(&c.AllowPrivate, "allow-private", false, "allow fetching private, loopback and link-local addresses")
	fs.IntVar(&c.Partitions, "partitions", DefaultPartitions, "partitions of every URL topic: at least the number of fetchers, parsers or schedulers that share the work")
	c.Scope.RegisterFlags(fs)
	fs.IntVar(&c.Fetchers, "fetchers", 1, "fetcher processes")
	fs.StringVar(&c.DataDir, "data-dir", ".crawl", "directory for binaries, logs, the broker log and a private ClickHouse")
	fs.DurationVar(&c.Timeout, "timeout", 0, "give up when the crawl has not drained after this long (0: never)")
	fs.BoolVar(&c.StoreLinks, "store-links", false, "keep the link graph (source, target, anchor text) in ClickHouse's links table (the parser's --store-links; about 30 rows per page)")
	fs.BoolVar(&c.Warc, "warc", false, "archive every fetch as WARC/1.1 files (with CDXJ indexes) in <data-dir>/warc/fetcher-<i> (the fetchers' --warc-dir); with -bench, the archive's size per page is reported")
	fs.BoolVar(&c.Bench, "bench", false, "print pages/s, CPU seconds, CPU per request and peak memory of every process at the end (implies -broker-process)")
	fs.BoolVar(&c.Web, "web", false, "serve the generated web (many hosts, 10-30 KB pages, links spelled every way, redirects, errors, a trap) on 127.1.x.y and crawl it, scoped to its hosts (implies -allow-private)")
	fs.IntVar(&c.WebHosts, "web-hosts", websim.DefaultHosts, "hosts of the generated web")
	fs.IntVar(&c.WebPort, "web-port", 0, "port of the generated web's hosts (0: a free one); a host's fetch partition is a function of its host:port, so benchmarks compared back to back give the same one (e.g. 18080)")
	fs.IntVar(&c.WebArticles, "web-articles", websim.DefaultArticles, "articles per host of the generated web")
	fs.IntVar(&c.WebTrapEvery, "web-trap-every", websim.DefaultTrapEvery, "every n-th host of the generated web has a calendar trap (-1: none)")
	fs.BoolVar(&c.WebTrapGrid, "web-trap-grid", false, "the generated web's calendar months also link the same month of the previous and the next year (a trap with far more pages within the depth limit)")
	fs.BoolVar(&c.WebBestDeep, "web-best-deep", false, "the generated web's sites have their most linked pages deepest (530 pages each, whatever -web-articles); with -bench, how many of them a crawl under -max-pages holds")
	fs.Float64Var(&c.WebScriptShare, "web-script-share", 0, "share of the generated web's sites, 0 to 1, built in the browser by a script (an HTML shell, its text and links in /data/<page>.json); with -render auto the fetchers render them")
	fs.StringVar(&c.Render, "render", "", "the fetchers render pages in headless Chromium: never, auto (the pages that scripts build: an HTML shell with an app root) or always (default: the fetchers' own, never)")
	fs.BoolVar(&c.WebShop, "web-shop", false, "the generated web's sites are shops: category lists and -web-articles product pages each whose values, JSON-LD, microdata and OpenGraph are known, some with a manual (PDF) and a spec sheet (docx); with -bench, the share of fields (-extract deployments/local/bench/shop-extract.json), structured data and documents (-documents pdf,docx) stored exactly")
	fs.StringVar(&c.SiteCPUs, "site-cpus", "", "run the generated web on these CPUs (taskset list, e.g. 1), apart from the crawl")
	fs.BoolVar(&c.BrokerProcess, "broker-process", false, "run the embedded broker as a process of its own")
	fs.StringVar(&c.ProfileDir, "profile", "", "write every service's CPU profile of the crawl and allocation profile here (one directory per process) and print the top entries")
	fs.StringVar(&c.BenchJSON, "bench-json", "", "with -bench, also write the figures to this JSON file")
	fs.StringVar(&c.ClickHouseAddr, "clickhouse-addr", "", "ClickHouse native host:port (default: start a private server)")
	fs.StringVar(&c.Database, "clickhouse-database", "crawler", "ClickHouse database")
	fs.BoolVar(&c.ClickHousePartLog, "clickhouse-part-log", false, "the private ClickHouse records every part it inserts and merges in system.part_log; with -bench, print the inserts and merges of each table (one more table written all the time: off for figures of cost)")
	fs.StringVar(&c.KafkaBrokers, "kafka-brokers", "", "comma-separated bootstrap brokers of an existing Kafka (default: start an embedded broker)")
	c.Security.RegisterFlags(fs)
	fs.BoolVar(&c.Verbose, "verbose", false, "copy the services' logs to stderr")
	fs.BoolVar(&c.Console, "console", false, "also run the crawl-jobs API and its operator console (seeder serve) and print its address and token file; it stays up after the crawl drained until interrupted (implies -store-links)")
	fs.StringVar(&c.ConsoleAddr, "console-addr", "127.0.0.1:8480", "address of the operator console (with -console)")
	d := supervise.DefaultPolicy()
	fs.BoolVar(&c.AutoRestart, "restart", true, "restart a service that exits on its own, with back-off (false: such an exit ends the crawl)")
	fs.DurationVar(&c.Restart.Backoff, "restart-backoff", d.Backoff, "delay before restarting a service; doubles with every restart within -restart-window")
	fs.DurationVar(&c.Restart.MaxBackoff, "restart-max-backoff", d.MaxBackoff, "longest delay before a restart")
	fs.IntVar(&c.Restart.MaxRestarts, "restart-max", d.MaxRestarts, "restarts of one service tolerated within -restart-window; one more is a crash loop that ends the crawl with the service's log")
	fs.DurationVar(&c.Restart.Window, "restart-window", d.Window, "how far back restarts count for the back-off and -restart-max")
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case !c.Demo && !c.Web && len(c.Seeds) == 0 && c.SeedsFile == "" && c.SpecFile == "":
		return errors.New("nothing to crawl: give -seed, -seeds-file, -demo, -web or seeds in -spec")
	case c.Web && (c.WebHosts < 1 || c.WebArticles < 1):
		return errors.New("web-hosts and web-articles must be at least 1")
	case (c.WebShop || c.WebBestDeep) && !c.Web:
		return errors.New("web-shop and web-best-deep are shapes of the generated web: give -web too")
	case c.WebScriptShare < 0 || c.WebScriptShare > 1:
		return errors.New("web-script-share: a share from 0 to 1")
	case c.WebScriptShare > 0 && !c.Web:
		return errors.New("web-script-share is a shape of the generated web: give -web too")
	case c.Render != "" && c.Render != "never" && c.Render != "auto" && c.Render != "always":
		return fmt.Errorf("render %q: want never, auto or always", c.Render)
	case c.WebShop && c.WebBestDeep:
		return errors.New("web-shop and web-best-deep: give one shape of the generated web")
	case c.WebShop && c.WebArticles < 5:
		return errors.New("web-shop: web-articles (products per shop) must be at least 5, one a category")
	case c.Demo && (c.DemoHosts < 1 || c.DemoPages < c.DemoHosts):
		return errors.New("demo-hosts must be at least 1 and demo-pages at least demo-hosts")
	case c.Demo && (c.DemoScriptHosts < 0 || c.DemoScriptHosts > c.DemoHosts):
		return errors.New("demo-script-hosts must be from 0 to demo-hosts")
	case c.Delay < 0:
		return errors.New("delay must not be negative")
	case c.Partitions < 1:
		return errors.New("partitions must be at least 1")
	case c.Fetchers < 1:
		return errors.New("fetchers must be at least 1")
	case c.Fetchers > c.Partitions:
		return fmt.Errorf("fetchers (%d) must not exceed partitions (%d): a fetcher without a partition has nothing to fetch", c.Fetchers, c.Partitions)
	case c.DataDir == "":
		return errors.New("data-dir must not be empty")
	case c.Console && c.ConsoleAddr == "":
		return errors.New("console-addr must not be empty with -console")
	case c.Timeout < 0:
		return errors.New("timeout must not be negative")
	case c.BrokerProcess && c.KafkaBrokers != "":
		return errors.New("broker-process runs the embedded broker, kafka-brokers replaces it: give one")
	case c.AutoRestart && (c.Restart.Backoff <= 0 || c.Restart.MaxBackoff <= 0 || c.Restart.MaxRestarts < 1 || c.Restart.Window <= 0):
		return errors.New("restart-backoff, restart-max-backoff and restart-window must be positive, restart-max at least 1")
	}
	if err := c.Restart.Validate(); err != nil {
		return err
	}
	if err := c.Security.Validate(); err != nil {
		return err
	}
	return c.Scope.Validate()
}

// Run runs the crawl, writing progress and the summary to out. stdin is
// read for -seeds-file -. The configuration and the crawl's spec are
// checked before anything is built or started.
func Run(ctx context.Context, cfg Config, stdin io.Reader, out *os.File) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	now := time.Now()
	req, chosen, err := cfg.crawlRequest(now)
	if err != nil {
		return err
	}
	if cfg.Demo && cfg.DemoScriptHosts > 0 && req.Render == nil && cfg.Render == "" {
		// The demo shows rendering: its script-built hosts' shells are
		// rendered (a fetcher without Chromium keeps them as fetched).
		req.Render = &crawlspec.Render{Mode: "auto"}
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data dir: %w", err)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	records, err := readRecords(dataDir)
	if err != nil {
		return err
	}
	// The seeds of a generated site change with its ports: only the
	// user's own seeds resume.
	var key string
	var known []string
	if !cfg.Demo && !cfg.Web {
		known = knownSeeds(cfg.Seeds, cfg.SeedsFile, req)
		key = seedsKey(known)
	}
	if err := checkDeleted(records, req.CrawlID, chosen); err != nil {
		return err
	}
	plan := planRun(records, req.CrawlID, chosen, cfg.New, cfg.Full, key, len(known), now)
	if err := plan.checkTimeLimit(req, now); err != nil {
		return err
	}
	req.CrawlID = plan.rec.CrawlID
	// The spec's previous crawl: the user's (--spec), else the one the
	// plan re-crawls, kept for the runs that resume it.
	if req.PreviousCrawlID == "" {
		req.PreviousCrawlID = plan.rec.Previous
	}
	plan.rec.Previous = req.PreviousCrawlID
	cfg.CrawlID = req.CrawlID
	fmt.Fprintln(out, plan.describe(cfg.CancelOthers))
	if err := plan.rec.write(dataDir); err != nil {
		return err
	}
	bins := cfg.Bins
	if bins == nil {
		if bins, err = build(ctx, dataDir, out); err != nil {
			return err
		}
	}
	var site *web
	if cfg.Web {
		if site, err = startWeb(ctx, bins["websim"], cfg.SiteCPUs, cfg.webArgs(), filepath.Join(dataDir, "logs")); err != nil {
			return err
		}
		defer func() { _ = site.proc.Stop(10 * time.Second) }()
		// The crawl stays on the web's hosts (its seeds' sites, the
		// default scope): its off-site host is never requested.
		fmt.Fprintf(out, "generated web: %d hosts (%s … %s), %d content pages; stats at %s\n",
			len(site.ready.Hosts), site.ready.Hosts[0], site.ready.Hosts[len(site.ready.Hosts)-1], site.ready.Pages, site.ready.Stats)
	}
	specFile, err := writeSpec(filepath.Join(dataDir, "specs"), req)
	if err != nil {
		return err
	}
	ch, err := chboot.EnsureWith(ctx, cfg.Security.ClickHouseConfig(cfg.ClickHouseAddr, cfg.Database), dataDir, chlocal.Options{PartLog: cfg.ClickHousePartLog}, out)
	if err != nil {
		return err
	}
	defer func() {
		if err := ch.Stop(); err != nil {
			fmt.Fprintln(out, err)
		}
	}()
	fmt.Fprintf(out, "clickhouse at %s (database %s)\n", ch.Addr, cfg.Database)

	seeds := cfg.Seeds
	seedsFile := cfg.SeedsFile
	if seedsFile == "-" {
		seedsFile, err = copyStdin(stdin, dataDir)
		if err != nil {
			return err
		}
	}
	allowPrivate := cfg.AllowPrivate
	if site != nil {
		seeds = append(seeds, site.ready.Seeds...)
		allowPrivate = true // the web lives on loopback addresses
	}
	var broker *supervise.Process
	var brokerAdmin string
	brokerAddr := cfg.KafkaBrokers
	if brokerAddr != "" {
		fmt.Fprintf(out, "kafka at %s\n", brokerAddr)
	} else if cfg.BrokerProcess || cfg.Bench {
		if broker, brokerAddr, brokerAdmin, err = startBroker(ctx, bins["broker"], dataDir, cfg.ProfileDir); err != nil {
			return err
		}
		defer func() { _ = broker.Stop(30 * time.Second) }()
	}
	if cfg.Demo {
		site, err := demosite.Start(ctx, demosite.Config{Hosts: cfg.DemoHosts, PagesPerHost: cfg.DemoPages / cfg.DemoHosts, ScriptHosts: cfg.DemoScriptHosts})
		if err != nil {
			return err
		}
		defer func() { _ = site.Close() }() // closes listeners at exit: nothing to lose
		seeds = append(seeds, site.Seeds()...)
		allowPrivate = true // the demo lives on loopback addresses
		fmt.Fprintf(out, "demo site: %d hosts %v, %d pages a crawler must fetch\n",
			cfg.DemoHosts, site.Hosts(), len(site.ReachableAllowed()))
		if n := cfg.DemoScriptHosts; n > 0 {
			fmt.Fprintf(out, "demo site: the last %d of them build their pages with a script (an empty app root filled from JSON); without rendering only their home pages are found\n", n)
		}
	}

	var echo io.Writer
	if cfg.Verbose {
		echo = os.Stderr
	}
	if d := pipeline.FetcherDelay(cfg.Delay); d != cfg.Delay {
		fmt.Fprintf(out, "delay %s: the fetchers wait %s, their smallest delay (requests to one host stay one at a time)\n",
			cfg.Delay, d)
	}
	disp := &progress.Display{Out: out, TTY: isTTY(out)}
	// The private ClickHouse is restarted if it dies (the services wait
	// for it meanwhile); what happens is said on the display.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go ch.Watch(watchCtx, noteWriter{disp})
	// So is the broker's process (--broker-process), under a supervisor.
	stopBrokerWatch := func() {}
	if broker != nil {
		stopBrokerWatch = watchBroker(broker, disp, filepath.Join(dataDir, "logs", "broker.log"))
		defer stopBrokerWatch()
	}
	p, err := pipeline.Start(ctx, pipeline.Config{
		DataDir: dataDir, Bins: bins, BrokerAddr: brokerAddr, ClickHouseAddr: ch.Addr, Database: cfg.Database,
		ProfileDir: cfg.ProfileDir, Args: serviceArgs(cfg, req.Limits.MaxPages), Security: cfg.Security,
		MemoryLimits: memoryLimits(req.Limits.MaxPages, cfg.Partitions, cfg.Warc),
		Partitions:   cfg.Partitions, Fetchers: cfg.Fetchers, Delay: cfg.Delay,
		AllowPrivate: allowPrivate, Echo: echo, WarcDir: warcDir(cfg, dataDir), Render: cfg.Render,
		AutoRestart: cfg.AutoRestart, Restart: cfg.Restart,
		OnRestart: func(ev supervise.Event) {
			disp.Note(ev.String() + " (log: " + filepath.Join(dataDir, "logs", ev.Name+".log") + ")")
		},
		Weather: func() string {
			if w := ch.Weather(); w != "" {
				return w
			}
			return brokerWeather(broker)
		},
	})
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintf(out, "services ready (logs in %s); crawl %s\n", filepath.Join(dataDir, "logs"), cfg.CrawlID)
	if cfg.Console {
		if err := startConsole(ctx, p, cfg.ConsoleAddr, dataDir, out); err != nil {
			return err
		}
	}
	for i, o := range plan.others {
		if !cfg.CancelOthers {
			break
		}
		if err := p.SetState(ctx, o.CrawlID, "cancelled"); err != nil {
			return err
		}
		plan.others[i].Cancelled = true
		if err := plan.others[i].write(dataDir); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "crawl spec (%s): %s\n", specFile, specLine(req))
	fmt.Fprintln(out, describeScope(req, knownSeeds(seeds, seedsFile, req)))
	if line := describeContent(req, cfg.Scope.Extract.V); line != "" {
		fmt.Fprintln(out, line)
	}

	var events0 map[string]uint64
	if cfg.Bench {
		if events0, err = readEvents(ctx, p.Store.Conn()); err != nil {
			return err
		}
	}
	start := time.Now()
	lags, runErr := crawl(ctx, cfg, p, pipeline.SeedRun{CrawlID: cfg.CrawlID, Seeds: seeds, SeedsFile: seedsFile, SpecFile: specFile}, disp)
	duration := time.Since(start)
	if runErr != nil && ctx.Err() != nil {
		fmt.Fprintln(out, "interrupted; stopping services (run the same command again to resume)")
		runErr = nil
	} else if runErr == nil {
		// Drained: nothing of this crawl or of the others is left in the
		// topics.
		finished := time.Now()
		if limit, ok := timeLimit(req); ok && !finished.Before(plan.rec.Started.Add(limit)) {
			fmt.Fprintf(out, "crawl %s reached its time limit (%s): the URLs it had not fetched are recorded as cancelled\n", cfg.CrawlID, limit)
		}
		for _, r := range append([]record{plan.rec}, plan.others...) {
			if !r.Cancelled {
				r.Finished = finished
			}
			if err := r.write(dataDir); err != nil {
				runErr = err
			}
		}
	}
	if cfg.Console && runErr == nil && ctx.Err() == nil {
		fmt.Fprintf(out, "crawl drained in %s; the console stays up at http://%s/ui/ until interrupted (Ctrl-C)\n",
			duration.Round(time.Millisecond), cfg.ConsoleAddr)
		<-ctx.Done()
	}
	// The summary is read after the services flushed their writers.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var scraped scrapes
	if cfg.Bench {
		// What the processes' runtimes counted, read while they run.
		scraped = scrapeProcesses(sctx, p, brokerAdmin)
	}
	stopErr := p.Stop()
	bench := Bench{Processes: p.Usage(), WebHosts: cfg.WebHosts, Lags: lags, MaxPages: req.Limits.MaxPages}
	bench.Order = "best-first"
	if req.Priority != nil && req.Priority.BreadthFirst {
		bench.Order = "breadth-first"
	}
	if pid := ch.Pid(); pid > 0 {
		if u, err := supervise.ProcUsage(pid); err == nil {
			bench.Processes["clickhouse"] = u
		} else {
			fmt.Fprintf(out, "clickhouse's cpu and memory not measured: %v\n", err)
		}
	}
	sum, err := progress.ReadSummary(sctx, p.Store.Conn(), cfg.CrawlID, duration)
	if err != nil {
		return errors.Join(runErr, stopErr, err)
	}
	sum.Restarts = p.Restarts()
	if sum.Joined, err = joinedSites(sctx, p.Kafka, cfg.CrawlID); err != nil {
		fmt.Fprintf(out, "sites that joined the scope not read: %v\n", err)
	}
	sum.Print(out)
	for _, o := range plan.others {
		if o.Cancelled {
			continue
		}
		// Finished alongside this one: its pages are counted too.
		osum, err := progress.ReadSummary(sctx, p.Store.Conn(), o.CrawlID, duration)
		if err != nil {
			return errors.Join(runErr, stopErr, err)
		}
		fmt.Fprintf(out, "also crawled, left unfinished by an earlier run:\n")
		osum.Print(out)
	}
	if site != nil {
		st, err := site.stats(sctx)
		if err != nil {
			return errors.Join(runErr, stopErr, err)
		}
		bench.Web = &st
		_ = site.proc.Stop(10 * time.Second)
		bench.Processes["websim"] = site.proc.Usage()
		bench.Site = append(bench.Site, "websim")
		if cfg.Bench && cfg.WebShop {
			shop, err := ReadShop(sctx, p.Store.Conn(), cfg.CrawlID, site.ready.Hosts, cfg.WebArticles, webSeed, req.Extract != nil)
			if err != nil {
				return errors.Join(runErr, stopErr, err)
			}
			if req.Documents != nil {
				shop.KeptDocuments = req.Documents.ContentTypes
			}
			bench.Shop = &shop
		}
		if cfg.Bench && len(site.ready.ScriptBuilt) > 0 {
			r, err := ReadRender(sctx, p.Store.Conn(), cfg.CrawlID, site.ready.ScriptBuilt)
			if err != nil {
				return errors.Join(runErr, stopErr, err)
			}
			r.FetcherCPU = fetcherCPU(bench)
			bench.Render = &r
		}
	}
	if broker != nil {
		stopBrokerWatch()
		stopErr = errors.Join(stopErr, broker.Stop(30*time.Second))
		bench.Processes["broker"] = broker.Usage()
	}
	if cfg.Bench {
		events, err := readEvents(sctx, p.Store.Conn())
		if err != nil {
			return errors.Join(runErr, stopErr, err)
		}
		bench.ClickHouse = since(events0, events)
		if bench.Tables, err = readTables(sctx, p.Store.Conn()); err != nil {
			return errors.Join(runErr, stopErr, err)
		}
		if bench.Merges, err = readMerges(sctx, p.Store.Conn(), start); err != nil {
			return errors.Join(runErr, stopErr, err)
		}
		if u, ok := selfUsage(); ok {
			bench.Processes["launcher"] = u
		}
		bench.Summary = sum
		bench.Runtime, bench.FetchReads, bench.ScrapeErrors = scraped.runtime, scraped.fetchReads, scraped.errs
		if cfg.Warc {
			if bench.Warc, err = readWarcUsage(warcDir(cfg, dataDir)); err != nil {
				return errors.Join(runErr, stopErr, err)
			}
		}
		bench.Print(out)
		if cfg.BenchJSON != "" {
			if err := bench.WriteJSON(cfg.BenchJSON); err != nil {
				return errors.Join(runErr, stopErr, err)
			}
		}
	}
	if cfg.ProfileDir != "" {
		printProfiles(sctx, out, cfg.ProfileDir, bins)
	}
	chHost, chPort := splitAddr(strings.Split(ch.Addr, ",")[0])
	fmt.Fprintf(out, "\nquery it:\n  clickhouse-client --host %s --port %s%s --database %s --query \"SELECT host, status, error_kind, count() FROM fetch_log FINAL WHERE crawl_id = '%s' GROUP BY host, status, error_kind ORDER BY host, status\"\n",
		chHost, chPort, clientAuthArgs(cfg.Security), cfg.Database, cfg.CrawlID)
	if ch.Private {
		fmt.Fprintf(out, "  (the private server stops now: `go run ./deployments/local/cmd/crawl query --data-dir %s \"SQL\"` starts it for one query,\n"+
			"   `go run ./deployments/local/cmd/crawl export --data-dir %s --format csv|jsonl|parquet --out FILE` writes the crawl's documents to a file)\n",
			dataDir, dataDir)
	}
	return errors.Join(runErr, stopErr)
}

// build builds the service binaries of the workspace around the working
// directory into dataDir/bin.
func build(ctx context.Context, dataDir string, out io.Writer) (map[string]string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("get working directory: %w", err)
	}
	root, err := supervise.FindRepoRoot(wd)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "building services")
	bins, err := supervise.Build(ctx, root, filepath.Join(dataDir, "bin"), pipeline.Services)
	if err != nil {
		return nil, err
	}
	more, err := supervise.BuildTools(ctx, root, filepath.Join(dataDir, "bin"), tools)
	if err != nil {
		return nil, err
	}
	maps.Copy(bins, more)
	return bins, nil
}

// crawl seeds the crawl and waits until it drains. It returns how far
// the parser trailed the fetcher meanwhile.
func crawl(ctx context.Context, cfg Config, p *pipeline.Pipeline, run pipeline.SeedRun, disp *progress.Display) (progress.LagStats, error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	mon := p.Monitor(cfg.CrawlID)
	defer mon.Close()
	seeder, err := p.Seed(ctx, run)
	if err != nil {
		return progress.LagStats{}, err
	}
	if err := seeder.Err(); err != nil {
		return progress.LagStats{}, fmt.Errorf("seeder: %w", err)
	}
	_, err = mon.WaitDrained(ctx, progress.DrainConfig{Check: p.Check, Display: disp})
	disp.Done()
	return mon.Stats(), err
}

func copyStdin(stdin io.Reader, dataDir string) (string, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	f, err := os.CreateTemp(dataDir, "seeds-*.txt")
	if err != nil {
		return "", fmt.Errorf("create seeds file: %w", err)
	}
	if _, err := io.Copy(f, stdin); err != nil {
		_ = f.Close() // the copy error is the one to report
		return "", fmt.Errorf("copy seeds from stdin: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write seeds file: %w", err)
	}
	return f.Name(), nil
}

func isTTY(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// serviceArgs are the flags the launcher's own flags pass to services.
func serviceArgs(cfg Config, maxPages uint64) map[string][]string {
	args := map[string][]string{}
	// The console's URL story shows the pages linking to a URL: the link
	// graph.
	if cfg.StoreLinks || cfg.Console {
		args["parser"] = []string{"--store-links"}
	}
	if w := budgetWindow(maxPages, cfg.Partitions); w > defaultWindow {
		args["fetcher"] = []string{"--max-inflight-per-partition", strconv.Itoa(w), "--max-host-queue", strconv.Itoa(budgetHostQueue)}
	}
	if len(args) == 0 {
		return nil
	}
	return args
}

// The fetchers' defaults of --max-inflight-per-partition and
// --max-host-queue, and the most a budgeted crawl widens them to.
const (
	defaultWindow   = 1000
	maxBudgetWindow = 16000
	budgetHostQueue = 1000
	// windowBytes is what the fetcher holds per request its window may
	// hold: the queued task and its queue entry (about 500 bytes,
	// services/fetcher's README) and its share of the attempts it
	// remembers (two generations of two entries of 40 bytes).
	windowBytes = 700
)

// budgetWindow is the fetchers' in-flight window per partition for a
// crawl of maxPages pages (0: no budget, the default window). A budget is
// spent best first only among the requests the fetcher holds (issue 38):
// a request still in the fetch topic behind a full window cannot be
// chosen. The scheduler sends a crawl at most four times its budget (the
// admission ceiling, --budget-admit-factor 2, and the second allowance of
// as many for URLs whose priority is above 0), so a window that holds
// that share of each partition lets the fetchers choose among every URL
// sent; it never goes below the default nor above maxBudgetWindow
// (16 000 requests, about 11 MB a partition). Larger budgets are left to
// the scheduler's frontier (--host-quota), which holds what waits in
// ClickHouse and releases it best first.
func budgetWindow(maxPages uint64, partitions int) int {
	if maxPages == 0 || partitions < 1 {
		return defaultWindow
	}
	w := 4 * maxPages / uint64(partitions)
	return int(min(max(w, defaultWindow), maxBudgetWindow))
}

// memoryLimits are the services' soft memory limits for a crawl of
// maxPages pages: pipeline.DefaultMemoryLimits, with the fetcher's raised
// by what a window widened for the budget may hold, and by warcMemory when
// it archives (warc), so that the limit stays a safety net above the
// fetcher's live heap.
func memoryLimits(maxPages uint64, partitions int, warc bool) map[string]int64 {
	w := budgetWindow(maxPages, partitions)
	if w <= defaultWindow && !warc {
		return nil
	}
	limits := maps.Clone(pipeline.DefaultMemoryLimits)
	if w > defaultWindow {
		limits["fetcher"] += int64(w-defaultWindow) * int64(partitions) * windowBytes
	}
	if warc {
		limits["fetcher"] += warcMemory
	}
	return limits
}

// warcMemory is what the WARC archive adds to the fetcher's live heap: the
// CDXJ lines of its open files, the payload digests and attempts it
// remembers (bounded), the exchanges being archived. Measured on 400
// sites of 17 KB pages: 66 MB live with --warc against 25 MB without;
// under the default 96 MiB limit the collector ran without pause (38 % of
// the fetcher's CPU, 0.47 ms a request against 0.09 without --warc).
const warcMemory = 64 << 20

// clientAuthArgs are the clickhouse-client arguments of a secured
// ClickHouse: --secure, the user and the password read from its file by
// the shell (never the password itself).
func clientAuthArgs(s pipeline.Security) string {
	var b strings.Builder
	if s.ClickHouse.TLS.On() {
		b.WriteString(" --secure")
	}
	if u := s.ClickHouse.Username; u != "" && u != chstore.DefaultUsername {
		fmt.Fprintf(&b, " --user %s", u)
	}
	if f := s.ClickHouse.PasswordFile; f != "" {
		fmt.Fprintf(&b, " --password \"$(cat %s)\"", f)
	}
	return b.String()
}

func splitAddr(addr string) (host, port string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, "9000"
	}
	return host, port
}

// noteWriter writes each line it is given as a note of the display.
type noteWriter struct{ d *progress.Display }

func (w noteWriter) Write(b []byte) (int, error) {
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" {
			w.d.Note(line)
		}
	}
	return len(b), nil
}

// watchBroker restarts the broker's process whenever it exits on its own
// (supervise.DefaultPolicy: on the same address and data directory, its
// arguments), each exit said on the display. The returned function stops
// watching; call it before stopping the broker.
func watchBroker(broker *supervise.Process, disp *progress.Display, logFile string) (stop func()) {
	sup := supervise.NewSupervisor(broker, supervise.DefaultPolicy(), func(ev supervise.Event) {
		disp.Note(ev.String() + "; the services wait for it (log: " + logFile + ")")
	})
	// Not the run's context: the broker is stopped after the services,
	// and watched until then.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := sup.Run(ctx); err != nil {
			disp.Note(err.Error())
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// brokerWeather says why a service's exit now is the broker's outage (""
// when it is not): the broker's process is down, or came back within
// chboot.WeatherGrace.
func brokerWeather(broker *supervise.Process) string {
	switch {
	case broker == nil:
		return ""
	case !broker.Running():
		return "the broker is down, being restarted"
	case broker.Usage().Starts > 1 && time.Since(broker.StartedAt()) < chboot.WeatherGrace:
		return fmt.Sprintf("the broker came back %s ago", time.Since(broker.StartedAt()).Round(time.Second))
	}
	return ""
}

// joinedSites reads the sites that joined a crawl's scope because a seed
// redirected to them: its scope grants on the control topic.
func joinedSites(ctx context.Context, kc kafkaio.Config, crawlID string) ([]progress.Joined, error) {
	specs, err := crawlcontrol.Snapshot(ctx, kc)
	if err != nil {
		return nil, err
	}
	var out []progress.Joined
	for _, g := range specs.Grants(crawlID) {
		out = append(out, progress.Joined{From: g.GetRedirectedFrom(), To: g.GetTargetUrl(), Hops: g.GetRedirectHops(), Site: g.GetHost() + g.GetDomain()})
	}
	return out, nil
}
