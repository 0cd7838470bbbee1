// Command broker runs the embedded Kafka-protocol broker (libs/kafkaembed,
// franz-go's kfake) as a process of its own until SIGTERM or Ctrl-C, so that
// the benchmark can count its CPU and memory apart from the launcher's.
//
//	go run ./deployments/local/cmd/broker --addr 127.0.0.1:9092 --dir .crawl/kafka
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fs := flag.NewFlagSet("broker", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:9092", "listen address")
	dir := fs.String("dir", "", "data directory (empty: in memory only)")
	profileDir := fs.String("profile-dir", "", "write cpu.pprof (the whole run) and allocs.pprof (at exit) here")
	adminAddr := fs.String("admin-addr", "", "serve /metrics (the process and Go runtime collectors), /healthz and /readyz here (empty: none)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	stopProfiles, err := telemetry.StartProfiles(telemetry.Config{ProfileDir: *profileDir}, zap.NewNop())
	if err != nil {
		return err
	}
	defer stopProfiles()
	b, err := kafkaembed.Start(ctx, *dir, *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "broker listening on %s\n", b.Addr())
	if *adminAddr == "" {
		<-ctx.Done()
		b.Close()
		return nil
	}
	admin := telemetry.NewAdmin(*adminAddr, telemetry.NewRegistry(), zap.NewNop())
	admin.SetReady(true)
	err = admin.Run(ctx) // until ctx is done
	b.Close()
	return err
}
