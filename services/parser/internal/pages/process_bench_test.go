package pages

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// BenchmarkProcess parses a websim article (extract's testdata, about 50
// links) as the parser does in a crawl's steady state: every link of the
// page already published, so each is looked up in the recent-links table
// and dropped, or with --in-links counted (and now and then published
// again), each time from a page of another URL (the page's fingerprint
// changes).
func BenchmarkProcess(b *testing.B) {
	for _, inLinks := range []bool{false, true} {
		b.Run(fmt.Sprintf("in-links=%v", inLinks), func(b *testing.B) { benchmarkProcess(b, inLinks) })
	}
}

func benchmarkProcess(b *testing.B, inLinks bool) {
	body, err := os.ReadFile(filepath.Join("..", "extract", "testdata", "websim_article.html"))
	if err != nil {
		b.Fatal(err)
	}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cfg := Config{MaxOutlinks: 1000, MaxTextBytes: 1 << 20, BatchSize: 50, MaxURLLength: 2048,
		MaxRepeatedSegments: 3, RecentLinks: DefaultRecentLinks, ResolveCache: DefaultResolveCache, TrapAllowance: 1,
		InLinks: inLinks}
	p := NewProcessor(cfg, kafkaio.Topics{Discovered: "d", Documents: "docs"}, Sinks{}, nil, nil, zap.NewNop(), m,
		func() time.Time { return now })
	const pageURL = "http://127.1.9.1:44315/news/2021/story-1.html"
	page := &crawlv1.FetchedPage{CrawlId: "c", Url: pageURL, Depth: 2, FetchedAt: timestamppb.New(now),
		StatusCode: 200, ContentType: "text/html", Body: body}
	res := p.process(b.Context(), page)
	if len(res.links) == 0 {
		b.Fatalf("premise: the article published no link (%v)", res.dropped)
	}
	for _, fp := range res.linkFPs {
		p.recent.Add(fp, res.linkDepth)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	i, republished := uint64(0), 0
	for b.Loop() {
		i++
		page.UrlFp = fingerprint.URL("c", pageURL) + i
		res := p.process(b.Context(), page)
		if len(res.links) != 0 {
			b.Fatalf("%d links published again as new", len(res.links))
		}
		republished += len(res.inLinks)
	}
	b.ReportMetric(float64(republished)/float64(i), "republished/op")
}
