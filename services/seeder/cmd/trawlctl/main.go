// Command trawlctl is the command-line client of the seeder's crawl-jobs
// API:
//
//	trawlctl [--api-url URL] [--api-token TOKEN] submit (--file JOB.json | --seed URL... [--keyword K... --engine E...])
//	trawlctl watch ID          live progress until the crawl drains or is cancelled (or Ctrl-C)
//	trawlctl get ID | list
//	trawlctl pause|resume|cancel ID
//	trawlctl delete ID         cancel the crawl for good and remove its rows from ClickHouse
//	trawlctl export ID [--table documents|fetch_log|links|url_events] [--format jsonl|csv|parquet] [--out FILE]
//
// --api-url and --api-token can be set as CRAWLER_API_URL and
// CRAWLER_API_TOKEN.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/trawl-crawler/trawl/libs/chexport/exportfile"
	"github.com/trawl-crawler/trawl/libs/envflag"
	"github.com/trawl-crawler/trawl/services/seeder/internal/client"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.LookupEnv)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "trawlctl: %v\n", err)
		os.Exit(1)
	}
}

// config is the client's connection.
type config struct {
	APIURL   string // flag api-url
	APIToken string // flag api-token
}

func (c config) validate() error {
	var errs []error
	if !strings.HasPrefix(c.APIURL, "http://") && !strings.HasPrefix(c.APIURL, "https://") {
		errs = append(errs, fmt.Errorf("validate api-url %q: want http(s)://host:port", c.APIURL))
	}
	if c.APIToken == "" {
		errs = append(errs, errors.New("validate api-token: required (or CRAWLER_API_TOKEN)"))
	}
	return errors.Join(errs...)
}

const usage = "usage: trawlctl [--api-url URL] [--api-token TOKEN] submit|watch|get|list|pause|resume|cancel|delete|export [ARGS]"

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, lookupEnv func(string) (string, bool)) error {
	var cfg config
	fs := flag.NewFlagSet("trawlctl", flag.ContinueOnError)
	fs.StringVar(&cfg.APIURL, "api-url", "http://127.0.0.1:8480", "crawl-jobs API of `seeder serve`")
	fs.StringVar(&cfg.APIToken, "api-token", "", "bearer token of the API (prefer CRAWLER_API_TOKEN)")
	if err := envflag.Parse(fs, args, lookupEnv); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("validate config: %w", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return errors.New(usage)
	}
	c := client.New(cfg.APIURL, cfg.APIToken, nil)
	cmd, rest := rest[0], rest[1:]
	switch cmd {
	case "submit":
		return submit(ctx, c, rest, stdin, stdout)
	case "watch":
		return watch(ctx, c, rest, stdout)
	case "list":
		crawls, err := c.List(ctx)
		if err != nil {
			return err
		}
		for _, v := range crawls {
			fmt.Fprintf(stdout, "%s\t%s\trev %d\t%s\t%s\n", v.CrawlID, v.State, v.Revision, v.CreatedAt.Format(time.RFC3339), v.Name)
		}
		return nil
	case "get":
		id, err := oneID(cmd, rest)
		if err != nil {
			return err
		}
		v, err := c.Get(ctx, id)
		if err != nil {
			return err
		}
		return printJSON(stdout, v)
	case "pause", "resume", "cancel":
		id, err := oneID(cmd, rest)
		if err != nil {
			return err
		}
		v, err := c.Action(ctx, id, cmd)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s (revision %d)\n", v.CrawlID, v.State, v.Revision)
		return nil
	case "delete":
		id, err := oneID(cmd, rest)
		if err != nil {
			return err
		}
		v, err := c.Delete(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s deleted (revision %d)%s\n", v.CrawlID, v.Revision, deletionNote(v.Deletion))
		return nil
	case "export":
		return export(ctx, c, rest, stdout)
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

// deletionNote says how far a deleted crawl's rows are removed.
func deletionNote(d *crawljobs.Deletion) string {
	switch {
	case d == nil:
		return ""
	case d.Error != "":
		return "; its rows not removed yet, the API retries: " + d.Error
	case d.Done:
		return "; no rows left"
	}
	var n uint64
	for _, left := range d.RowsLeft {
		n += left
	}
	return fmt.Sprintf("; ClickHouse is removing its %d rows in %d tables", n, len(d.RowsLeft))
}

func oneID(cmd string, args []string) (string, error) {
	if len(args) != 1 || args[0] == "" {
		return "", fmt.Errorf("%s: want one crawl id, got %q", cmd, args)
	}
	return args[0], nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func submit(ctx context.Context, c *client.Client, args []string, stdin io.Reader, stdout io.Writer) error {
	var (
		file, id, name, combine, delay string
		seeds, kw, engines             envflag.Strings
		maxDepth                       uint
		maxPages                       uint64
		pages                          int
		serpIgnoreRobots               bool
	)
	fs := flag.NewFlagSet("trawlctl submit", flag.ContinueOnError)
	fs.StringVar(&file, "file", "", `crawl request as JSON (the body of POST /v1/crawls); "-" reads standard input`)
	fs.StringVar(&id, "crawl-id", "", "crawl id (generated when empty)")
	fs.StringVar(&name, "name", "", "human label")
	fs.Var(&seeds, "seed", "seed URL (repeatable)")
	fs.Var(&kw, "keyword", "keyword for result-page seeds (repeatable)")
	fs.Var(&engines, "engine", "search engine preset for --keyword: google, bing, baidu, duckduckgo (repeatable)")
	fs.StringVar(&combine, "combine", "", "keyword combination: each, combinations")
	fs.IntVar(&pages, "pages", 0, "result pages per keyword query and engine")
	fs.UintVar(&maxDepth, "max-depth", 0, "maximum link depth (0: service default)")
	fs.Uint64Var(&maxPages, "max-pages", 0, "maximum pages (0: unlimited)")
	fs.StringVar(&delay, "delay", "", "politeness delay between two requests to a host, e.g. 2s")
	fs.BoolVar(&serpIgnoreRobots, "serp-ignore-robots", false, "fetch the --keyword result pages even where the engine's robots.txt disallows them (only those)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var body []byte
	switch {
	case file != "" && (len(seeds)+len(kw) > 0 || id != ""):
		return errors.New("submit: give --file or flags, not both")
	case file == "-":
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<20))
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		body = b
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		body = b
	default:
		req := jobs.Request{CrawlID: id, Name: name, Seeds: seeds}
		if len(kw) > 0 {
			req.Keywords = &jobs.Keywords{Terms: kw, Engines: engines, Combine: combine, Pages: pages, MaxCombination: 2}
		}
		if maxDepth > 0 || maxPages > 0 {
			req.Limits = &jobs.Limits{MaxDepth: uint32(maxDepth), MaxPages: maxPages}
		}
		if delay != "" || serpIgnoreRobots {
			req.Politeness = &jobs.Politeness{Delay: delay, SerpIgnoreRobots: serpIgnoreRobots}
		}
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = b
	}
	resp, err := c.Submit(ctx, body)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(stdout, "%s created: %d seeds published\n", resp.CrawlID, resp.SeedsPublished)
	for _, f := range resp.InvalidSeeds {
		fmt.Fprintf(stdout, "  skipped %s: %s\n", f.Field, f.Message)
	}
	return nil
}

// barWidth is the number of cells of the watch progress bar.
const barWidth = 30

func watch(ctx context.Context, c *client.Client, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("trawlctl watch", flag.ContinueOnError)
	interval := fs.Duration("interval", time.Second, "refresh interval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	id, err := oneID("watch", fs.Args())
	if err != nil {
		return err
	}
	if *interval <= 0 {
		return fmt.Errorf("watch: interval %v, want positive", *interval)
	}
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		v, err := c.Get(ctx, id)
		switch {
		case ctx.Err() != nil: // Ctrl-C
			fmt.Fprintln(stdout)
			return nil
		case err != nil:
			fmt.Fprintln(stdout)
			return fmt.Errorf("watch: %w", err)
		}
		// \r and erase-line redraw the line in a terminal.
		fmt.Fprintf(stdout, "\r\x1b[K%s", client.Progress(v, barWidth))
		if client.Finished(v) {
			fmt.Fprintln(stdout)
			return nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(stdout)
			return nil
		case <-t.C:
		}
	}
}

func export(ctx context.Context, c *client.Client, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("trawlctl export", flag.ContinueOnError)
	table := fs.String("table", "", "table: documents (default), fetch_log, links or url_events")
	format := fs.String("format", "", "format: jsonl (default), csv or parquet")
	out := fs.String("out", "", "write to this file instead of standard output (it appears only complete)")
	// The id may come before or after the flags: export c1 --out c1.jsonl.
	var ids []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		ids = append(ids, fs.Arg(0))
		args = fs.Args()[1:]
	}
	id, err := oneID("export", ids)
	if err != nil {
		return err
	}
	w := stdout
	var f *exportfile.Output
	if *out != "" && *out != "-" {
		if f, err = exportfile.CreateOutput(*out); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }() // discards the file unless committed
		w = f
	}
	if _, err := c.Export(ctx, id, *table, *format, w); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if f != nil {
		return f.Commit()
	}
	return nil
}
