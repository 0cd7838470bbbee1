package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// memoryBoundMiB is the RSS the fetcher process must stay under while a
// million URLs wait in its partitions (8 partitions, default limits:
// 1000 unacked records per partition, 100 per host).
const memoryBoundMiB = 128

// BenchmarkMemoryWaitingURLs produces TRAWL_BENCH_MEMORY_URLS fetch
// requests (opt-in; e.g. 1000000) to the real broker, half of them for one
// giant host and the rest spread over 100-URL hosts, starts the fetcher
// binary as its own process with a one-hour delay (so everything waits),
// samples its RSS for 20 s and fails above memoryBoundMiB.
//
//	TRAWL_BENCH_MEMORY_URLS=1000000 go test -run '^$' -bench MemoryWaitingURLs -benchtime 1x ./cmd/fetcher/
func BenchmarkMemoryWaitingURLs(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("TRAWL_BENCH_MEMORY_URLS"))
	if n <= 0 {
		b.Skip("set TRAWL_BENCH_MEMORY_URLS (e.g. 1000000) to run")
	}
	const partitions = 8
	kcfg := kafkatest.Config(b, partitions)
	ch := chtest.Config(b)
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()

	bin := filepath.Join(b.TempDir(), "fetcher")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build fetcher: %v\n%s", err, out)
	}

	start := time.Now()
	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	topic := kcfg.Topics().Fetch
	const batch = 10000
	msgs := make([]kafka.Message, 0, batch)
	for i := range n {
		u := fmt.Sprintf("http://giant.example/p%d", i)
		if i%2 == 1 {
			u = fmt.Sprintf("http://h%d.example/p%d", i/200, i)
		}
		key, err := kafkaio.Key(u)
		if err != nil {
			b.Fatal(err)
		}
		m, err := kafkaio.NewMessage(topic, key, &crawlv1.FetchRequest{CrawlId: "mem", Url: u, UrlFp: uint64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
		if len(msgs) == batch || i == n-1 {
			if err := w.Write(ctx, msgs...); err != nil {
				b.Fatalf("produce: %v", err)
			}
			msgs = msgs[:0]
		}
	}
	b.Logf("produced %d fetch requests in %s", n, time.Since(start).Round(time.Millisecond))

	b.ResetTimer()
	cmd := exec.CommandContext(ctx, bin,
		"-kafka-brokers", strings.Join(kcfg.Brokers, ","),
		"-kafka-partitions", strconv.Itoa(partitions),
		"-kafka-topic-prefix", kcfg.TopicPrefix,
		"-clickhouse-addr", strings.Join(ch.Addr, ","),
		"-clickhouse-database", ch.Database,
		"-admin-addr", "127.0.0.1:0",
		"-log-level", "warn",
		"-delay", "1h", "-max-crawl-delay", "1h",
	)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("start fetcher: %v", err)
	}
	// Sample the real process's RSS once a second for 20 s: a measurement
	// cadence, not a wait for something to happen.
	peak := 0
	tick := time.NewTicker(time.Second)
	for range 20 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
		if rss := rssKiB(cmd.Process.Pid); rss > peak {
			peak = rss
		}
	}
	tick.Stop()
	_ = cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		b.Errorf("fetcher exit: %v", err)
	}
	b.StopTimer()
	lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topic)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(peak)/1024, "peakRSS_MiB")
	b.Logf("%d URLs waiting (group lag %d at the end): fetcher peak RSS %.1f MiB (bound %d MiB)", n, lag, float64(peak)/1024, memoryBoundMiB)
	if peak/1024 > memoryBoundMiB {
		b.Errorf("peak RSS %d MiB over the %d MiB bound", peak/1024, memoryBoundMiB)
	}
}

// rssKiB returns VmRSS of pid in KiB (0 when unreadable).
func rssKiB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}
