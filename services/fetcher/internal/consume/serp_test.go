package consume

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestSERPIgnoreRobots runs the fetcher against a local search engine
// whose robots.txt disallows /search, as the real engines' do. A crawl
// whose spec sets politeness.serp_ignore_robots fetches its keyword result
// pages (serp_engine set, depth 0, not a redirect target) and nothing else
// that robots.txt disallows: not a redirect target that inherited the
// engine, not a deeper URL, not a seed of its own on the engine's host, and
// no page at all of a crawl without the flag. The exemption is counted and
// logged once for the crawl and host.
func TestSERPIgnoreRobots(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	obs, logs := observer.New(zap.InfoLevel)
	log := zap.New(zapcore.NewTee(obs, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow: /search\nAllow: /\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<p>results for %s</p>", r.URL.Query().Get("q"))
	})
	engine := startSite(t, "127.0.0.71", mux)

	specs := crawlcontrol.NewSpecs()
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "serp", Revision: 1, Politeness: &crawlv1.Politeness{SerpIgnoreRobots: true}})
	specs.Apply(&crawlv1.CrawlSpec{CrawlId: "plain", Revision: 1})

	type reqCase struct {
		crawl, path, engine string
		depth, hops         uint32
		wantKind            string // fetch_log.error_kind
	}
	cases := []reqCase{
		{crawl: "serp", path: "/search?q=go", engine: "local", wantKind: ""},                          // the exemption
		{crawl: "serp", path: "/search?q=moved", engine: "local", hops: 1, wantKind: "robots_denied"}, // a redirect target
		{crawl: "serp", path: "/search?q=deep", engine: "local", depth: 1, wantKind: "robots_denied"}, // not a seed
		{crawl: "serp", path: "/search?q=mine", wantKind: "robots_denied"},                            // a seed, not a result page
		{crawl: "serp", path: "/about", wantKind: ""},                                                 // allowed anyway
		{crawl: "plain", path: "/search?q=go", engine: "local", wantKind: "robots_denied"},            // no exemption asked
	}
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i, c := range cases {
		u := engine.base + c.path
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, key, &crawlv1.FetchRequest{CrawlId: c.crawl, Url: u, UrlFp: uint64(i + 1),
			Depth: c.depth, RedirectHops: c.hops, SerpEngine: c.engine})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 2 * time.Second})
	defer f.Close()
	svc, stop := runFetcher(t, ctx, kcfg, store, Options{
		Topics: kcfg.Topics(), Workers: 2, Outcome: outcome.Options{InstanceID: "serp-test"}, Crawls: specs,
		Politeness: politeness.Options{Delay: 20 * time.Millisecond},
	}, f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), w, 20*time.Millisecond, 100, log)

	kinds := map[string]string{}
	waitFor(ctx, t, "a fetch_log row per request", func() bool {
		rows, err := store.Conn().Query(ctx, "SELECT crawl_id, url, error_kind FROM fetch_log FINAL")
		if err != nil {
			t.Fatalf("query fetch_log: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			var crawl, u, kind string
			if err := rows.Scan(&crawl, &u, &kind); err != nil {
				t.Fatal(err)
			}
			kinds[crawl+" "+u] = kind
		}
		return len(kinds) == len(cases)
	})
	if err := stop(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	for _, c := range cases {
		if got, ok := kinds[c.crawl+" "+engine.base+c.path]; !ok || got != c.wantKind {
			t.Errorf("%s %s (engine %q, depth %d, hops %d): error_kind %q (row %v), want %q",
				c.crawl, c.path, c.engine, c.depth, c.hops, got, ok, c.wantKind)
		}
	}
	if _, hits := engine.snapshot(); hits["/search"] != 1 || hits["/about"] != 1 {
		t.Errorf("engine saw %v, want /search once (the exempt result page) and /about once", hits)
	}
	if got := testutil.ToFloat64(svc.m.serpRobotsOverridden); got != 1 {
		t.Errorf("serp_robots_overridden_total = %v, want 1", got)
	}
	logged := logs.FilterMessageSnippet("robots.txt disallows").All()
	if len(logged) != 1 || logged[0].ContextMap()["host"] != strings.TrimPrefix(engine.base, "http://") || logged[0].ContextMap()["crawl"] != "serp" {
		t.Errorf("exemption logs %v, want one naming crawl serp and the engine's host", logged)
	}
}
