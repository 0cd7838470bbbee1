// Command websim serves the generated web of internal/websim until SIGTERM
// or Ctrl-C, for the benchmark (which runs it on its own CPU) and for
// crawling by hand. Once serving, it prints one JSON line on standard
// output: the seeds, the hosts of the crawl, the off-site host, the number
// of content pages, the address of its statistics (GET /stats) and, with
// --script-share, the hosts whose pages are built in the browser.
// GET /resources lists every resource's requests with their times,
// GET /most-linked the ids of the most linked tenth of a --best-deep web's
// pages (--shop serves shops whose product pages' values are known from the
// seed: websim.ShopProduct), and GET /content the ids of the content pages: what the multi-host harness
// (deployments/local/multihost) counts politeness and completeness from,
// running it with --private on a web host's private range.
//
//	go run ./deployments/local/cmd/websim --hosts 200 --articles 50
//	ip netns exec web websim --private --first-addr 10.78.0.1 --hosts 200 --stats-addr 10.77.0.20:8080
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "websim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var cfg websim.Config
	fs := flag.NewFlagSet("websim", flag.ContinueOnError)
	fs.IntVar(&cfg.Hosts, "hosts", websim.DefaultHosts, "hosts of the crawl")
	fs.IntVar(&cfg.Articles, "articles", websim.DefaultArticles, "articles per host")
	fs.IntVar(&cfg.MinLinks, "min-links", websim.DefaultMinLinks, "fewest links of an article")
	fs.IntVar(&cfg.MaxLinks, "max-links", websim.DefaultMaxLinks, "most links of an article")
	fs.BoolVar(&cfg.Private, "private", false, "serve on private IPv4 addresses (a web host in a network namespace of its own) instead of loopback")
	first := fs.String("first-addr", websim.DefaultFirstAddr.String(), "address of host 0; the others follow it")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the link graph and the text")
	fs.IntVar(&cfg.GBKEvery, "gbk-every", websim.DefaultGBKEvery, "every n-th host serves GBK (-1: none)")
	fs.IntVar(&cfg.TrapEvery, "trap-every", websim.DefaultTrapEvery, "every n-th host has a calendar trap (-1: none)")
	fs.BoolVar(&cfg.TrapGrid, "trap-grid", false, "calendar months also link the same month of the previous and the next year (a trap with far more pages within a depth limit)")
	fs.BoolVar(&cfg.BestDeep, "best-deep", false, "serve sites whose most linked pages sit deepest (a home, 28 sections, 448 pages, 53 popular pages linked only from those), instead of articles; GET /most-linked lists them")
	fs.BoolVar(&cfg.Shop, "shop", false, "serve shops (a home, category lists, --articles product pages a host whose fields and structured data are known in advance, manuals in PDF and spec sheets in docx) instead of articles")
	fs.Float64Var(&cfg.ScriptShare, "script-share", 0, "share of the hosts, 0 to 1, whose pages are built in the browser: an HTML shell whose /app.js writes the text and links from /data/<page>.json (the ready line lists them)")
	fs.IntVar(&cfg.Port, "port", 0, "port every host listens on (0: a free one; a host's fetch partition depends on its host:port, so runs compared back to back fix it)")
	fs.IntVar(&cfg.BigEvery, "big-every", websim.DefaultBigEvery, "every n-th host links a big page (-1: none)")
	fs.IntVar(&cfg.SlowEvery, "slow-every", websim.DefaultSlowEvery, "every n-th host links a slow page (-1: none)")
	fs.DurationVar(&cfg.SlowDelay, "slow-delay", websim.DefaultSlowDelay, "how long the slow page takes")
	statsAddr := fs.String("stats-addr", "127.0.0.1:0", "listen address of GET /stats, /resources and /content")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	a, err := netip.ParseAddr(*first)
	if err != nil {
		return fmt.Errorf("parse -first-addr: %w", err)
	}
	cfg.FirstAddr = a
	web, err := websim.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = web.Close() }() // closes listeners at exit: nothing to lose

	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", *statsAddr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", *statsAddr, err)
	}
	mux := http.NewServeMux()
	serveJSON := func(path string, v func() any) {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(v()) // the client went away: nothing to do
		})
	}
	serveJSON("/stats", func() any { return web.Stats() })
	serveJSON("/resources", func() any { return web.Resources() })
	serveJSON("/content", func() any { return web.ContentIDs() })
	serveJSON("/most-linked", func() any { return web.MostLinked() })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	ready, err := json.Marshal(websim.Ready{Seeds: web.Seeds(), Hosts: web.Hosts(), Offsite: web.Offsite(),
		Pages: web.Pages(), Stats: "http://" + ln.Addr().String() + "/stats", ScriptBuilt: web.ScriptBuiltHosts()})
	if err != nil {
		return fmt.Errorf("encode ready line: %w", err)
	}
	fmt.Println(string(ready))

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve stats: %w", err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
