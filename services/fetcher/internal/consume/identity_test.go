package consume

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// identityRobots names one of the crawls' agents, not the other's nor the
// fetcher's own (trawl), which get the * group.
const identityRobots = `User-agent: *
Disallow: /star

User-agent: examplebot
Disallow: /ex
`

// TestCrawlIdentity runs three crawls over one site through one fetcher:
// one without an identity, one with its user agent and two extra headers,
// one with another user agent and a header. The site sees each crawl's
// requests, robots.txt included, with that crawl's User-Agent and headers
// (the first with the fetcher's own and none), and robots.txt's groups
// apply per crawl by its product token: examplebot is refused /ex, the
// others /star. robots.txt is fetched at most once per agent.
func TestCrawlIdentity(t *testing.T) {
	const (
		exUA    = "examplebot/1.0 (+https://example.org/bot)"
		otherUA = "otherbot/2.0 (mailto:ops@example.org)"
	)
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	type seen struct{ path, crawl, ua, xCrawl, lang string }
	var (
		mu   sync.Mutex
		reqs []seen
	)
	mux := pageHandler(identityRobots)
	s := startSite(t, "127.0.0.66", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, seen{r.URL.Path, r.URL.Query().Get("c"), r.UserAgent(), r.Header.Get("X-Crawl"), r.Header.Get("Accept-Language")})
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))

	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "plain", Revision: 1})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "ex", Revision: 1, Identity: &crawlv1.Identity{UserAgent: exUA,
		Headers: []*crawlv1.Header{{Name: "Accept-Language", Value: "de"}, {Name: "X-Crawl", Value: "ex"}}}})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "other", Revision: 1, Identity: &crawlv1.Identity{UserAgent: otherUA,
		// a header the seeder refuses, published by something else: not sent
		Headers: []*crawlv1.Header{{Name: "X-Crawl", Value: "other"}, {Name: "Cookie", Value: "session=1"}}}})

	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	fp := uint64(0)
	for _, crawl := range []string{"plain", "ex", "other"} {
		for _, path := range []string{"/ok", "/ex", "/star"} {
			u := fmt.Sprintf("%s%s?c=%s", s.base, path, crawl)
			key, err := kafkaio.Key(u)
			if err != nil {
				t.Fatal(err)
			}
			fp++
			m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: crawl, Url: u, UrlFp: fp})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	p := startFetcher(ctx, t, kcfg, store, "identity", 100, Options{Politeness: politeness.Options{Delay: 20 * time.Millisecond}, Crawls: specs})
	defer p.stop(t)

	type outcome struct{ status, kind string }
	got := map[string]outcome{}
	waitFor(ctx, t, "a fetch_log row per request", func() bool {
		rows, err := store.Conn().Query(ctx, "SELECT crawl_id, url, toString(status), error_kind FROM fetch_log FINAL")
		if err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			var crawl, u, status, kind string
			if err := rows.Scan(&crawl, &u, &status, &kind); err != nil {
				t.Fatal(err)
			}
			path := strings.TrimPrefix(u, s.base)
			path, _, _ = strings.Cut(path, "?")
			got[crawl+" "+path] = outcome{status, kind}
		}
		return len(got) == 9
	})
	want := map[string]outcome{
		"plain /ok": {"200", ""}, "plain /ex": {"200", ""}, "plain /star": {"0", "robots_denied"},
		"ex /ok": {"200", ""}, "ex /ex": {"0", "robots_denied"}, "ex /star": {"200", ""},
		"other /ok": {"200", ""}, "other /ex": {"200", ""}, "other /star": {"0", "robots_denied"},
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}

	wantHeaders := map[string]seen{
		"plain": {ua: httpfetch.DefaultUserAgent},
		"ex":    {ua: exUA, xCrawl: "ex", lang: "de"},
		"other": {ua: otherUA, xCrawl: "other"},
	}
	mu.Lock()
	defer mu.Unlock()
	robotsFetches := map[string]int{}
	for _, r := range reqs {
		if r.path == "/robots.txt" {
			// robots.txt carries the identity of the crawl whose turn
			// fetched it
			crawl := ""
			for c, h := range wantHeaders {
				if r.ua == h.ua {
					crawl = c
				}
			}
			h := wantHeaders[crawl]
			if crawl == "" || r.xCrawl != h.xCrawl || r.lang != h.lang {
				t.Errorf("robots.txt requested with User-Agent %q, X-Crawl %q, Accept-Language %q: not one crawl's identity", r.ua, r.xCrawl, r.lang)
			}
			robotsFetches[crawl]++
			continue
		}
		h := wantHeaders[r.crawl]
		if r.ua != h.ua || r.xCrawl != h.xCrawl || r.lang != h.lang {
			t.Errorf("crawl %s: %s requested with User-Agent %q, X-Crawl %q, Accept-Language %q; want %q, %q, %q",
				r.crawl, r.path, r.ua, r.xCrawl, r.lang, h.ua, h.xCrawl, h.lang)
		}
	}
	total := 0
	for crawl, n := range robotsFetches {
		total += n
		if n > 1 {
			t.Errorf("robots.txt fetched %d times as crawl %s", n, crawl)
		}
	}
	if total == 0 || total > 3 {
		t.Errorf("robots.txt fetched %d times, want 1 to 3 (once per agent at most)", total)
	}
	t.Logf("robots.txt fetches per crawl: %v", robotsFetches)
}
