package browser

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoad loads a script-built page (a shell, its script, its JSON;
// the script writes the text and links) over and over with 1, 2 and 4
// tabs, and prints what a page load costs: the CPU time of Chromium's
// processes (user and system, the renderers of closed tabs included) and
// of this Go process (chromedp, and the test's HTTP server), per page;
// and the memory of Chromium's processes at the end: their summed RSS
// (shared pages counted once per process), their PSS (shared pages
// divided among them), and per tab the growth over a browser with no
// page loaded, divided by the tabs.
//
//	go test -run '^$' -bench Load -benchtime 60x ./internal/browser/
func BenchmarkLoad(b *testing.B) {
	for _, tabs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("tabs=%d", tabs), func(b *testing.B) {
			s := newSite(b, "127.0.0.1")
			br, err := New(b.Context(), Options{Tabs: tabs, PageTimeout: 10 * time.Second, SettleIdle: 100 * time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			base, err := br.Usage()
			if err != nil {
				b.Fatal(err)
			}
			cpu0, goCPU0 := base.CPU, processCPU()
			var n atomic.Int64
			var failed atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range tabs {
				wg.Go(func() {
					for {
						i := n.Add(1)
						if i > int64(b.N) {
							return
						}
						p, err := br.Load(b.Context(), fmt.Sprintf("%s/page/%d", s.base, i))
						if err != nil || p.Outcome != OutcomeSettled || !strings.Contains(p.HTML, fmt.Sprintf("The text of page %d,", i)) {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			end, err := br.Usage()
			if err != nil {
				b.Fatal(err)
			}
			if failed.Load() > 0 {
				b.Errorf("%d of %d loads failed", failed.Load(), b.N)
			}
			chromeCPU := end.CPU - cpu0
			goCPU := processCPU() - goCPU0
			perPage := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
			b.ReportMetric(perPage(chromeCPU+goCPU), "cpu-ms/page")
			b.ReportMetric(float64(end.RSS)/(1<<20), "rss-MiB")
			b.ReportMetric(float64(end.PSS)/(1<<20), "pss-MiB")
			b.ReportMetric(float64(end.RSS-base.RSS)/(1<<20)/float64(tabs), "rss-MiB/tab")
			b.Logf("tabs %d, %d pages: CPU %.1f ms/page (Chromium %.1f, Go %.1f); Chromium %d processes, RSS %.0f MiB (%.0f before any page; %.0f MiB per tab), PSS %.0f MiB (%.0f before; %.0f MiB per tab)",
				tabs, b.N, perPage(chromeCPU+goCPU), perPage(chromeCPU), perPage(goCPU), end.Processes,
				float64(end.RSS)/(1<<20), float64(base.RSS)/(1<<20), float64(end.RSS-base.RSS)/(1<<20)/float64(tabs),
				float64(end.PSS)/(1<<20), float64(base.PSS)/(1<<20), float64(end.PSS-base.PSS)/(1<<20)/float64(tabs))
		})
	}
}

// processCPU is the user and system time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
