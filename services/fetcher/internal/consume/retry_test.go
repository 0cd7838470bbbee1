package consume

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/ftptest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// logRow is one fetch_log row as the tests read it.
type logRow struct {
	url, kind string
	status    uint16
	attempt   uint16
	at        time.Time
}

// TestRetriesRedirects runs the consumer against the real broker and
// ClickHouse with hosts that fail transiently, fail permanently, redirect
// (a chain, a redirect to itself, a chain at the hop limit), answer 304,
// have robots.txt unavailable at first, hold more URLs than a host queue
// may buffer, and a request due beyond the hold horizon. Every attempt must
// have its fetch_log row and FetchedPage, retries must stop at the attempt
// limit, a redirect target must go to the scheduler (never fetched inline)
// unless it is the URL itself or the chain is at the limit, and the delay
// must hold between all requests to a host.
func TestRetriesRedirects(t *testing.T) {
	const (
		delay       = 100 * time.Millisecond
		maxAttempts = 3
		hostQueue   = 3
		giantPages  = 10
	)
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	var flaky atomic.Int32
	mux := pageHandler("")
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, _ *http.Request) {
		if flaky.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>finally</p>")
	})
	mux.HandleFunc("/always500", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	mux.HandleFunc("/gone", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	mux.HandleFunc("/r1", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/r2", http.StatusMovedPermanently) })
	mux.HandleFunc("/r2", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/final", http.StatusFound) })
	mux.HandleFunc("/final", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>arrived</p>")
	})
	mux.HandleFunc("/self", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/self?", http.StatusFound) })
	mux.HandleFunc("/cond", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		fmt.Fprint(w, "<p>changed</p>")
	})
	hostR := startSite(t, "127.0.0.8", mux)

	// robots.txt answers 503 once, then allows everything
	var robotsHits atomic.Int32
	muxU := http.NewServeMux()
	muxU.Handle("/", pageHandler(""))
	muxU.HandleFunc("/robots.txt", func(w http.ResponseWriter, _ *http.Request) {
		if robotsHits.Add(1) == 1 {
			http.Error(w, "later", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "User-agent: *\nAllow: /\nSitemap: /relative-is-ignored.xml\nSitemap: http://sitemaps.example/site.xml\n")
	})
	hostU := startSite(t, "127.0.0.9", muxU)
	hostG := startSite(t, "127.0.0.11", pageHandler("")) // more URLs than a host queue holds
	hostF := startSite(t, "127.0.0.12", pageHandler("")) // one request due far ahead
	ftpSrv := ftptest.Start(t, "127.0.0.41", ftptest.Options{Files: map[string]string{"/pub/a.txt": "file a", "/pub/b/c.txt": "file c"}})

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	farAt := time.Now().Add(2 * time.Second)
	const maxRedirects = 4
	type reqSpec struct {
		url       string
		etag      string
		notBefore time.Time
		hops      uint32 // redirects followed to reach url
		parent    string
	}
	reqs := []reqSpec{
		{url: hostR.base + "/flaky"}, {url: hostR.base + "/always500"}, {url: hostR.base + "/gone"},
		{url: hostR.base + "/r1"}, {url: hostR.base + "/r2", hops: maxRedirects, parent: hostR.base + "/r1"},
		{url: hostR.base + "/final", hops: 1, parent: hostR.base + "/r2"},
		{url: hostR.base + "/self"}, {url: hostR.base + "/cond", etag: `"v1"`},
		{url: hostU.base + "/p"}, {url: hostF.base + "/later", notBefore: farAt}, {url: ftpSrv.URL() + "/pub/"},
	}
	for i := range giantPages {
		reqs = append(reqs, reqSpec{url: fmt.Sprintf("%s/g%d", hostG.base, i)})
	}
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i, r := range reqs {
		key, err := kafkaio.Key(r.url)
		if err != nil {
			t.Fatal(err)
		}
		fr := &crawlv1.FetchRequest{CrawlId: "c2", Url: r.url, UrlFp: uint64(i + 1), Depth: 1, Etag: r.etag,
			RedirectHops: r.hops, ParentUrl: r.parent}
		if !r.notBefore.IsZero() {
			fr.NotBefore = timestamppb.New(r.notBefore)
		}
		m, err := kafkaio.NewMessage(topics.Fetch, key, fr)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("publish requests: %v", err)
	}

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 2 * time.Second})
	defer f.Close()
	// default ErrorTTL (10m): the retry itself must ask robots.txt again
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	svc, stopFetcher := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4,
		Politeness: politeness.Options{Delay: delay, MaxCrawlDelay: time.Second},
		Outcome: outcome.Options{InstanceID: "retry-test", MaxAttempts: maxAttempts,
			RetryBackoff: 150 * time.Millisecond, MaxRetryBackoff: time.Second, MaxRedirects: maxRedirects},
		Limits:     decide.Limits{MaxHostQueue: hostQueue, HoldHorizon: time.Second},
		DeferPause: 100 * time.Millisecond,
	}, f, rc, w, 20*time.Millisecond, 100, log)

	var (
		outMu      sync.Mutex
		pages      []*crawlv1.FetchedPage
		discovered []*crawlv1.DiscoveredURL
	)
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, topics.Fetched, func(_ kafka.Message, p *crawlv1.FetchedPage) {
		outMu.Lock()
		pages = append(pages, p)
		outMu.Unlock()
	})
	follow(t, followCtx, &fg, kcfg, topics.Discovered, func(_ kafka.Message, d *crawlv1.DiscoveredURL) {
		outMu.Lock()
		discovered = append(discovered, d)
		outMu.Unlock()
	})

	// flaky 3, always500 3, gone 1, r1 1, r2 at the limit 1, final 1, self 1,
	// cond 1, robots-unavailable then fetched 2, far 1, ftp listing 1, giant
	// host 10
	const wantPages = 3 + maxAttempts + 1 + 1 + 1 + 1 + 1 + 1 + 2 + 1 + 1 + giantPages
	waitFor(ctx, t, "every attempt published and committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		outMu.Lock()
		n := len(pages)
		outMu.Unlock()
		return err == nil && lag == 0 && n >= wantPages
	})
	// nothing more may come
	holdsFor(ctx, t, 3*delay, fmt.Sprintf("at most %d fetched pages published", wantPages), func() bool {
		outMu.Lock()
		defer outMu.Unlock()
		return len(pages) <= wantPages
	})
	if err := stopFetcher(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	stopFollow()
	if err := fg.Wait(); err != nil {
		t.Fatalf("follow: %v", err)
	}
	outMu.Lock()
	defer outMu.Unlock()
	if len(pages) != wantPages {
		t.Errorf("published %d fetched pages, want %d", len(pages), wantPages)
	}

	// pages by URL, in attempt order
	byURL := map[string][]*crawlv1.FetchedPage{}
	for _, p := range pages {
		byURL[p.GetUrl()] = append(byURL[p.GetUrl()], p)
	}
	for _, ps := range byURL {
		sort.Slice(ps, func(i, j int) bool { return ps[i].GetAttempt() < ps[j].GetAttempt() })
	}
	type attempt struct {
		status    uint32
		kind      failure.Kind
		willRetry bool
	}
	wantAttempts := map[string][]attempt{
		hostR.base + "/flaky":     {{503, failure.None, true}, {503, failure.None, true}, {200, failure.None, false}},
		hostR.base + "/always500": {{500, failure.None, true}, {500, failure.None, true}, {500, failure.None, false}},
		hostR.base + "/gone":      {{404, failure.None, false}},
		hostR.base + "/r1":        {{301, failure.Redirect, false}},
		hostR.base + "/r2":        {{302, failure.TooManyRedirects, false}},
		hostR.base + "/final":     {{200, failure.None, false}},
		hostR.base + "/self":      {{302, failure.RedirectLoop, false}},
		hostR.base + "/cond":      {{304, failure.None, false}},
		hostU.base + "/p":         {{0, failure.RobotsUnavailable, true}, {200, failure.None, false}},
		hostF.base + "/later":     {{200, failure.None, false}},
		ftpSrv.URL() + "/pub/":    {{200, failure.None, false}},
	}
	for i := range giantPages {
		wantAttempts[fmt.Sprintf("%s/g%d", hostG.base, i)] = []attempt{{200, failure.None, false}}
	}
	for u, want := range wantAttempts {
		got := byURL[u]
		if len(got) != len(want) {
			t.Errorf("%s: %d pages, want %d", u, len(got), len(want))
			continue
		}
		for i, p := range got {
			if p.GetAttempt() != uint32(i) || p.GetStatusCode() != want[i].status ||
				failure.Kind(p.GetErrorKind()) != want[i].kind || p.GetWillRetry() != want[i].willRetry {
				t.Errorf("%s page %d: attempt %d status %d kind %q will_retry %v, want attempt %d %+v",
					u, i, p.GetAttempt(), p.GetStatusCode(), p.GetErrorKind(), p.GetWillRetry(), i, want[i])
			}
		}
	}
	if ps := byURL[hostR.base+"/final"]; len(ps) == 1 {
		if ps[0].GetRedirectedFrom() != hostR.base+"/r2" || ps[0].GetParentUrl() != hostR.base+"/r2" ||
			!strings.Contains(string(ps[0].GetBody()), "arrived") {
			t.Errorf("final page: redirected_from %q parent %q body %q", ps[0].GetRedirectedFrom(), ps[0].GetParentUrl(), ps[0].GetBody())
		}
	}
	if ps := byURL[ftpSrv.URL()+"/pub/"]; len(ps) == 1 && (ps[0].GetContentType() != "text/html" ||
		!strings.Contains(string(ps[0].GetBody()), ftpSrv.URL()+"/pub/b/")) {
		t.Errorf("ftp listing: %q %q, want an HTML page linking %s/pub/b/", ps[0].GetContentType(), ps[0].GetBody(), ftpSrv.URL())
	}
	if ps := byURL[hostR.base+"/cond"]; len(ps) == 1 && !ps[0].GetUnchanged() {
		t.Errorf("304 page not marked unchanged")
	}
	var sitemaps, redirects []string
	for _, d := range discovered {
		if d.GetSource() == crawlv1.Source_SOURCE_REDIRECT {
			redirects = append(redirects, d.GetUrl())
			if d.GetCrawlId() != "c2" || d.GetDepth() != 1 || d.GetRedirectHops() != 1 || d.GetParentUrl() != hostR.base+"/r1" {
				t.Errorf("redirect target %v: want crawl c2, depth 1, 1 hop, parent /r1", d)
			}
			continue
		}
		if d.GetSource() != crawlv1.Source_SOURCE_SITEMAP {
			t.Errorf("discovered %v: only sitemaps and redirect targets expected", d)
			continue
		}
		sitemaps = append(sitemaps, d.GetUrl())
		if d.GetCrawlId() != "c2" || d.GetDepth() != 1 || d.GetParentUrl() != hostU.base+"/robots.txt" {
			t.Errorf("sitemap %v: want crawl c2, depth 1, parent the robots.txt", d)
		}
	}
	if len(sitemaps) != 1 || sitemaps[0] != "http://sitemaps.example/site.xml" {
		t.Errorf("sitemaps discovered = %v, want the absolute Sitemap line", sitemaps)
	}
	// /r1's target goes to the scheduler; the targets of /r2 (at the hop
	// limit) and /self (itself) do not.
	if len(redirects) != 1 || redirects[0] != hostR.base+"/r2" {
		t.Errorf("redirect targets discovered = %v, want only %s/r2", redirects, hostR.base)
	}

	// the site saw exactly those requests, the delay between any two of a host
	for _, s := range []*site{hostR, hostU, hostG, hostF} {
		spans, hits := s.snapshot()
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].end); gap < delay {
				t.Errorf("%s: %s started %v after %s ended, want >= %v", s.base, spans[i].path, gap, spans[i-1].path, delay)
			}
		}
		for path, n := range hits {
			u := s.base + path
			if path == "/robots.txt" {
				continue
			}
			want := len(wantAttempts[u])
			if u == hostU.base+"/p" {
				want = 1 // the first attempt made no request: robots.txt was unavailable
			}
			if n != want {
				t.Errorf("%s requested %d times, want %d", u, n, want)
			}
		}
		if s == hostF {
			for _, sp := range spans {
				if sp.path == "/later" && sp.start.Before(farAt) {
					t.Errorf("/later fetched at %v, before its not_before %v", sp.start, farAt)
				}
			}
		}
	}
	if robotsHits.Load() != 2 {
		t.Errorf("robots.txt of the unavailable host requested %d times, want 2", robotsHits.Load())
	}

	// one fetch_log row per attempt, final exactly when no retry follows
	rows, err := store.Conn().Query(ctx, "SELECT url, error_kind, status, attempt, final FROM fetch_log FINAL WHERE crawl_id = 'c2'")
	if err != nil {
		t.Fatalf("query fetch_log: %v", err)
	}
	defer rows.Close()
	logged := map[string][]logRow{}
	finals := map[string]map[uint16]bool{}
	for rows.Next() {
		var (
			r     logRow
			final uint8
		)
		if err := rows.Scan(&r.url, &r.kind, &r.status, &r.attempt, &final); err != nil {
			t.Fatal(err)
		}
		logged[r.url] = append(logged[r.url], r)
		if finals[r.url] == nil {
			finals[r.url] = map[uint16]bool{}
		}
		finals[r.url][r.attempt] = final == 1
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for u, want := range wantAttempts {
		if len(logged[u]) != len(want) {
			t.Errorf("%s: %d fetch_log rows, want %d", u, len(logged[u]), len(want))
		}
		for i, a := range want {
			if final, ok := finals[u][uint16(i)]; !ok || final == a.willRetry {
				t.Errorf("%s attempt %d: fetch_log final %v (row %v), want %v", u, i, final, ok, !a.willRetry)
			}
		}
	}
	if got := testutil.ToFloat64(svc.m.retries.WithLabelValues("exhausted")); got != 1 {
		t.Errorf("retries exhausted = %v, want 1 (always500)", got)
	}
	if got := testutil.ToFloat64(svc.m.deferred); got < 1 {
		t.Errorf("deferred = %v, want the giant host's surplus and the far request deferred", got)
	}
	for outcome, want := range map[string]float64{"published": 1, "loop": 1, "too_many": 1} {
		if got := testutil.ToFloat64(svc.m.redirects.WithLabelValues(outcome)); got != want {
			t.Errorf("redirects %s = %v, want %v", outcome, got, want)
		}
	}
	t.Logf("deferred %v records", testutil.ToFloat64(svc.m.deferred))
}
