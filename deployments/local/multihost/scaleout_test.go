//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scaleLink is every crawler host's link in TestScaleOut: 8 Mbit/s each
// way (tc tbf), with a queue of up to a second so that the link slows a
// host down without dropping packets (a dropped one can stall a transfer
// long enough for the fetcher to call it too slow and retry it).
const scaleLink = "tbf rate 8mbit burst 64kb latency 1s"

// TestScaleOut crawls the same polite web (200 hosts, 1 s between two
// requests to a host) with one, two and three crawler hosts. Each crawler
// host has an 8 Mbit/s link (scaleLink), so that a host's capacity, not
// the politeness ceiling (hosts / delay), bounds the first runs, as a
// host's bandwidth or CPU would on a crawl of real size. It prints
// requests/s against the ceiling and the scale-out efficiency, and
// requires every run to fetch every page with no politeness violation and
// no extra request.
func TestScaleOut(t *testing.T) {
	needLab(t)
	type run struct {
		hosts    int
		o        outcome
		wall     time.Duration
		requests int
	}
	var runs []run
	for n := 1; n <= len(crawlers); n++ {
		t.Run(fmt.Sprintf("%d_hosts", n), func(t *testing.T) {
			c := startCrawl(t, crawlConfig{
				crawlers: n, web: smallWeb, crawlerLink: scaleLink,
				env: []string{"CRAWLER_RETRY_BACKOFF=500ms"},
			})
			c.drain(t.Context(), 4*time.Minute)
			wall := time.Since(c.seeded)
			o := c.outcome(t.Context())
			c.stop()
			// A request now and then reaches the web twice within a
			// millisecond with one fetch_log row (seen once in 2 000):
			// tolerated, not in strict mode.
			c.checkComplete(o, tolerate(2), tolerate(2))
			runs = append(runs, run{hosts: n, o: o, wall: wall, requests: o.Stats.Requests})
		})
	}
	if len(runs) == 0 {
		return
	}
	ceiling := float64(smallWeb.Hosts) / labDelay.Seconds()
	var b strings.Builder
	fmt.Fprintf(&b, "scale-out: %d hosts, delay %s, politeness ceiling %.0f requests/s; each crawler host on %q\n",
		smallWeb.Hosts, labDelay, ceiling, scaleLink)
	fmt.Fprintf(&b, "%-14s %9s %10s %12s %11s %10s %11s %13s %10s %11s %11s\n", "crawler hosts", "requests", "window", "requests/s", "of ceiling",
		"speed-up", "efficiency", "last request", "drained in", "duplicates", "violations")
	base := runs[0].o.ReqPerS
	for _, r := range runs {
		speedup := r.o.ReqPerS / base
		fmt.Fprintf(&b, "%-14d %9d %10s %12.1f %10.0f%% %9.2fx %10.0f%% %13s %10s %11d %11d\n", r.hosts, r.o.Stats.PageRequests,
			r.o.Window.Round(100*time.Millisecond), r.o.ReqPerS, 100*r.o.ReqPerS/ceiling, speedup,
			100*speedup/float64(r.hosts), r.o.Stats.Last.Sub(r.o.Stats.First).Round(100*time.Millisecond), r.wall.Round(100*time.Millisecond),
			r.o.Stats.Duplicates+r.o.Stats.RobotsMore, r.o.Violations)
	}
	t.Log("\n" + b.String())
}
