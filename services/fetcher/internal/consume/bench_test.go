package consume

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// BenchmarkPoliteness runs one fetcher on one partition of the real broker
// against H zero-latency local hosts with delay d and reports the pages/s
// the healthy hosts achieved against the ideal H/d (target: at least 95 %)
// and the politeness violations found in the sites' own request logs
// (target: zero). "mixed" makes a third of the hosts answer 429 with
// Retry-After: 1 and adds one host holding half of the partition's URLs;
// the healthy hosts must still reach their rate and the throttled hosts
// must see nothing before their Retry-After.
//
//	go test -run '^$' -bench Politeness -benchtime 1x ./internal/consume/
func BenchmarkPoliteness(b *testing.B) {
	for _, sc := range []struct {
		name      string
		healthy   int
		throttled int
		giant     bool
	}{
		{name: "uniform", healthy: 24},
		{name: "mixed", healthy: 16, throttled: 8, giant: true},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				runPoliteness(b, sc.healthy, sc.throttled, sc.giant)
			}
		})
	}
}

func runPoliteness(b *testing.B, healthy, throttled int, giant bool) {
	const (
		delay   = 200 * time.Millisecond
		perHost = 25
	)
	kcfg := kafkatest.Config(b, 1)
	store := chtest.NewStore(b)
	topics := kcfg.Topics()
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()

	type host struct {
		site      *site
		pages     int
		throttled bool
	}
	var hosts []host
	ip := 0
	next := func() string { ip++; return fmt.Sprintf("127.0.1.%d", ip) }
	for range healthy {
		hosts = append(hosts, host{site: startSite(b, next(), pageHandler("")), pages: perHost})
	}
	tooMany := http.NewServeMux()
	tooMany.Handle("/robots.txt", pageHandler(""))
	tooMany.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	for range throttled {
		hosts = append(hosts, host{site: startSite(b, next(), tooMany), pages: perHost, throttled: true})
	}
	if giant {
		total := 0
		for _, h := range hosts {
			total += h.pages
		}
		hosts = append(hosts, host{site: startSite(b, next(), pageHandler("")), pages: total})
	}

	// interleave the hosts' URLs, the giant host's first, as a crawl
	// frontier would produce them
	var msgs []kafka.Message
	for i := 0; ; i++ {
		added := false
		for j := len(hosts) - 1; j >= 0; j-- {
			h := hosts[j]
			if i >= h.pages {
				continue
			}
			added = true
			u := fmt.Sprintf("%s/p%d", h.site.base, i)
			key, _ := kafkaio.Key(u)
			m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "bench", Url: u})
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		if !added {
			break
		}
	}
	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		b.Fatal(err)
	}

	b.ResetTimer()
	f := startFetcher(ctx, b, kcfg, store, "bench", 1000, Options{
		Workers:    32,
		Politeness: politeness.Options{Delay: delay, MaxCrawlDelay: 2 * time.Second},
		Outcome:    outcome.Options{RetryBackoff: 500 * time.Millisecond, MaxRetryBackoff: 2 * time.Second},
		Limits:     decide.Limits{MaxHostWait: 3 * time.Second},
	})
	waitFor(ctx, b, "healthy hosts done", func() bool {
		for _, h := range hosts[:healthy] {
			if _, hits := h.site.snapshot(); len(hits) < h.pages+1 { // pages + robots.txt
				return false
			}
		}
		return true
	})
	f.stop(b)
	b.StopTimer()

	violations := 0
	var first, last time.Time
	requests := 0
	for i, h := range hosts {
		spans, _ := h.site.snapshot()
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for k := 1; k < len(spans); k++ {
			gap := spans[k].start.Sub(spans[k-1].end)
			want := delay
			if h.throttled && spans[k-1].path != "/robots.txt" {
				want = time.Second // Retry-After of the 429
			}
			if gap < want {
				violations++
			}
		}
		if i < healthy {
			requests += len(spans)
			if first.IsZero() || spans[0].start.Before(first) {
				first = spans[0].start
			}
			if e := spans[len(spans)-1].start; e.After(last) {
				last = e
			}
		}
	}
	// Each healthy host made pages+1 requests (robots.txt included), the
	// first one delay after the assignment: per host, requests-1 gaps of at
	// least d fit between the first and the last start.
	window := last.Sub(first)
	achieved := float64(requests-healthy) / window.Seconds()
	ideal := float64(healthy) / delay.Seconds()
	b.ReportMetric(achieved, "pages/s")
	b.ReportMetric(100*achieved/ideal, "%ideal")
	b.ReportMetric(float64(violations), "violations")
	b.Logf("%d healthy hosts (%d throttled, giant %v), delay %v: %.1f pages/s of an ideal %.1f (%.1f%%), %d violations",
		healthy, throttled, giant, delay, achieved, ideal, 100*achieved/ideal, violations)
	if violations > 0 {
		b.Errorf("%d politeness violations", violations)
	}
}
