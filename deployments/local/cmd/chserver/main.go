// Command chserver runs one private ClickHouse server (chlocal) until
// SIGTERM or Ctrl-C: scripts/test.sh starts it once for the whole test run.
// It writes the native address to -addr-file once the server answers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/trawl-crawler/trawl/deployments/local/internal/chboot"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "chserver:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fs := flag.NewFlagSet("chserver", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory (required); the server's files go in DIR/clickhouse")
	addrFile := fs.String("addr-file", "", "write the native host:port here once the server answers")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("-dir is required")
	}
	srv, err := chboot.Ensure(ctx, chstore.Config{}, *dir, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "clickhouse serving on %s (data in %s)\n", srv.Addr, filepath.Join(*dir, "clickhouse"))
	if *addrFile != "" {
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(srv.Addr+"\n"), 0o644); err != nil {
			return errors.Join(fmt.Errorf("write address file: %w", err), srv.Stop())
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return errors.Join(fmt.Errorf("write address file: %w", err), srv.Stop())
		}
	}
	<-ctx.Done()
	return srv.Stop()
}
