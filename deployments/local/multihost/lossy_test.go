//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// lossyLink is the bad link of TestLossyCrawlerHost: latency and loss from
// tc netem where the kernel has it; otherwise (this development VM's
// kernel has no netem) a 4 Mbit/s tbf with 100 ms of queue, whose
// queueing delay grows to 100 ms under load and which drops what does not
// fit.
const (
	lossyNetem = "netem delay 80ms 20ms loss 3%"
	lossyTBF   = "tbf rate 4mbit burst 16kb latency 100ms"
)

// TestLossyCrawlerHost crawls the small web on three crawler hosts twice:
// once on clean links, once with the third host's link slow and lossy.
// The second crawl may be slower; it must still fetch every page, with no
// politeness violation, and repeat only what the bad link cut short.
func TestLossyCrawlerHost(t *testing.T) {
	needLab(t)
	link := lossyTBF
	if haveNetem(t.Context()) {
		link = lossyNetem
	}
	type result struct {
		name string
		o    outcome
		wall time.Duration
	}
	var results []result
	for _, bad := range []bool{false, true} {
		name := "clean"
		if bad {
			name = "c3_lossy"
		}
		t.Run(name, func(t *testing.T) {
			c := startCrawl(t, crawlConfig{crawlers: 3, web: smallWeb, env: faultEnv})
			if bad {
				if err := shapeLink(t.Context(), crawlers[2], link); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = shapeLink(context.WithoutCancel(t.Context()), crawlers[2], "") })
			}
			c.drain(t.Context(), 4*time.Minute)
			wall := time.Since(c.seeded)
			o := c.outcome(t.Context())
			c.stop()
			// A transfer the bad link stalled is cut off (too slow, a
			// timeout) and fetched again: the web, which answered it,
			// counts a repeat. Beyond those, the rare repeat seen on
			// clean links too (TestScaleOut) is tolerated, not in
			// strict mode.
			var cut uint64
			err := c.store.Conn().QueryRow(t.Context(), `SELECT count() FROM fetch_log FINAL
				WHERE crawl_id = ? AND error_kind IN ('too_slow', 'timeout', 'connect')`, c.id).Scan(&cut)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d attempts cut short by the link (too slow, timeout, connect)", cut)
			c.checkComplete(o, int(cut)+tolerate(2), tolerate(2))
			results = append(results, result{name, o, wall})
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "three crawler hosts, %d web hosts; the lossy run's c3 link: %q\n", smallWeb.Hosts, link)
	fmt.Fprintf(&b, "%-10s %9s %10s %12s %11s %11s %9s %11s\n", "run", "requests", "window", "requests/s", "duplicates", "violations", "retries", "drained in")
	for _, r := range results {
		fmt.Fprintf(&b, "%-10s %9d %10s %12.1f %11d %11d %9d %11s\n", r.name, r.o.Stats.Requests, r.o.Window.Round(100*time.Millisecond),
			r.o.ReqPerS, r.o.Stats.Duplicates, r.o.Violations, r.o.Stats.Retries, r.wall.Round(100*time.Millisecond))
	}
	t.Log("\n" + b.String())
}
