package consume

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestServerGrouping crawls six virtual hosts of one shared-hosting server
// (six names resolving to one loopback address, spread over three
// partitions) with a 20 ms host delay. Grouped by server with a 150 ms
// gap, the server's own request log shows one request at a time and every
// gap at least 150 ms; ungrouped, the same crawl overlaps its requests,
// which is what the grouping is for.
func TestServerGrouping(t *testing.T) {
	const (
		hostDelay = 20 * time.Millisecond
		serverGap = 150 * time.Millisecond
		vhosts    = 6
		pages     = 3
	)
	crawl := func(t *testing.T, ip string, servers *politeness.Gate) ([]span, *fetcherProc) {
		kcfg := kafkatest.Config(t, 3)
		store := chtest.NewStore(t)
		log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()

		srv := startSite(t, ip, pageHandler(""))
		port := srv.base[strings.LastIndex(srv.base, ":")+1:]
		lookup := func(_ context.Context, _, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".shared.test") {
				return []netip.Addr{netip.MustParseAddr(ip)}, nil
			}
			return nil, errors.New("no such host")
		}
		w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
		defer w.Close()
		// The names' partitions depend on the site's port: the last name
		// is chosen so that they never all fall in one partition.
		partOf := func(host string) int {
			key, err := kafkaio.Key("http://" + host + ":" + port + "/")
			if err != nil {
				t.Fatal(err)
			}
			return kafkaio.PartitionFor(key, kcfg.Partitions)
		}
		var names []string
		for v := range vhosts - 1 {
			names = append(names, fmt.Sprintf("v%d.shared.test", v))
		}
		same := true // the first names all in one partition
		for _, n := range names {
			same = same && partOf(n) == partOf(names[0])
		}
		last := vhosts - 1
		for same && partOf(fmt.Sprintf("v%d.shared.test", last)) == partOf(names[0]) {
			last++
		}
		names = append(names, fmt.Sprintf("v%d.shared.test", last))
		var msgs []kafka.Message
		partitions := map[int]bool{}
		for v, name := range names {
			for i := range pages {
				u := fmt.Sprintf("http://%s:%s/p%d", name, port, i)
				key, err := kafkaio.Key(u)
				if err != nil {
					t.Fatal(err)
				}
				partitions[kafkaio.PartitionFor(key, kcfg.Partitions)] = true
				m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: "c", Url: u, UrlFp: uint64(v*pages + i + 1)})
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
		}
		if len(partitions) < 2 {
			t.Fatalf("the virtual hosts fall in %d partition(s); the test wants them spread", len(partitions))
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		p := startFetcherWith(ctx, t, kcfg, store, "shared", 100, Options{
			Workers: 8, Politeness: politeness.Options{Delay: hostDelay}, Servers: servers,
		}, httpfetch.Options{Lookup: lookup})
		defer p.stop(t)
		waitFor(ctx, t, "every page fetched", func() bool { return srv.pageHits() >= vhosts*pages })
		spans, _ := srv.snapshot()
		seen := map[string]int{}
		for _, s := range spans {
			seen[s.host+s.path]++
		}
		for _, name := range names {
			for _, path := range []string{"/robots.txt", "/p0", "/p1", "/p2"} {
				if k := fmt.Sprintf("%s:%s%s", name, port, path); seen[k] != 1 {
					t.Errorf("%s requested %d times, want 1", k, seen[k])
				}
			}
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		return spans, p
	}
	smallestGap := func(spans []span) time.Duration {
		gap := time.Hour
		for i := 1; i < len(spans); i++ {
			gap = min(gap, spans[i].start.Sub(spans[i-1].end)) // negative: overlap
		}
		return gap
	}

	t.Run("grouped", func(t *testing.T) {
		spans, p := crawl(t, "127.0.0.81", politeness.NewGate(time.Now, serverGap))
		gap := smallestGap(spans)
		t.Logf("grouped: %d requests, smallest gap between two %s (server gap %s)", len(spans), gap, serverGap)
		if gap < serverGap {
			t.Errorf("smallest gap between two requests to the server %s, want at least %s", gap, serverGap)
		}
		if n := testutil.ToFloat64(p.svc.m.serverWaits); n == 0 {
			t.Error("no request waited for its server")
		}
	})
	t.Run("ungrouped", func(t *testing.T) {
		spans, _ := crawl(t, "127.0.0.82", nil)
		gap := smallestGap(spans)
		t.Logf("ungrouped: %d requests, smallest gap between two %s", len(spans), gap)
		if gap >= serverGap {
			t.Errorf("ungrouped crawl kept %s between requests: the grouped case proves nothing", gap)
		}
	})
}
