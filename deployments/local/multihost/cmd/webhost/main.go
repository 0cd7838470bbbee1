// Command webhost serves the generated web of internal/websim on private
// addresses, as the web host of the multi-host harness
// (deployments/local/multihost): it runs inside a network namespace whose
// loopback answers for a whole private range (a local route), so every host
// of the web is an address of its own that the crawler hosts reach over the
// bridge. Once serving it prints one JSON line (websim.Ready) on standard
// output. Besides GET /stats it serves GET /resources, every resource's
// requests with their times, from which the harness counts politeness
// violations per host.
//
//	ip netns exec web webhost --first-addr 10.78.0.1 --hosts 200 --stats-addr 10.77.0.20:8080
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
		fmt.Fprintln(os.Stderr, "webhost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg := websim.Config{Private: true}
	fs := flag.NewFlagSet("webhost", flag.ContinueOnError)
	fs.IntVar(&cfg.Hosts, "hosts", websim.DefaultHosts, "hosts of the crawl")
	fs.IntVar(&cfg.Articles, "articles", websim.DefaultArticles, "articles per host")
	fs.IntVar(&cfg.MinLinks, "min-links", websim.DefaultMinLinks, "fewest links of an article")
	fs.IntVar(&cfg.MaxLinks, "max-links", websim.DefaultMaxLinks, "most links of an article")
	first := fs.String("first-addr", "10.78.0.1", "private address of host 0; the others follow it")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the link graph and the text")
	fs.IntVar(&cfg.GBKEvery, "gbk-every", websim.DefaultGBKEvery, "every n-th host serves GBK (-1: none)")
	fs.IntVar(&cfg.TrapEvery, "trap-every", -1, "every n-th host has a calendar trap (-1: none)")
	fs.IntVar(&cfg.BigEvery, "big-every", -1, "every n-th host links a big page (-1: none)")
	fs.IntVar(&cfg.SlowEvery, "slow-every", -1, "every n-th host links a slow page (-1: none)")
	statsAddr := fs.String("stats-addr", "127.0.0.1:0", "listen address of GET /stats and GET /resources")
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
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(web.Stats()) // the client went away: nothing to do
	})
	mux.HandleFunc("GET /resources", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(web.Resources()) // the client went away: nothing to do
	})
	mux.HandleFunc("GET /content", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(web.ContentIDs()) // the client went away: nothing to do
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	ready, err := json.Marshal(websim.Ready{Seeds: web.Seeds(), Hosts: web.Hosts(), Offsite: web.Offsite(),
		Pages: web.Pages(), Stats: "http://" + ln.Addr().String() + "/stats"})
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
