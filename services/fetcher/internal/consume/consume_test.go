package consume

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

// site is a local HTTP server standing for one host; it records the start
// and end of every request it serves.
type site struct {
	mu    sync.Mutex
	base  string
	spans []span
	hits  map[string]int
}

type span struct {
	host, path string // Host header and path
	start, end time.Time
}

func startSite(t testing.TB, ip string, h http.Handler) *site {
	t.Helper()
	s := &site{hits: map[string]int{}}
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, r)
		s.mu.Lock()
		s.spans = append(s.spans, span{host: r.Host, path: r.URL.Path, start: start, end: time.Now()})
		s.hits[r.URL.Path]++
		s.mu.Unlock()
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	s.base = srv.URL
	return s
}

// pageHits returns the number of requests served other than robots.txt.
func (s *site) pageHits() int {
	_, hits := s.snapshot()
	n := 0
	for path, c := range hits {
		if path != "/robots.txt" {
			n += c
		}
	}
	return n
}

func (s *site) snapshot() ([]span, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hits := make(map[string]int, len(s.hits))
	for k, v := range s.hits {
		hits[k] = v
	}
	return append([]span(nil), s.spans...), hits
}

func pageHandler(robotsTxt string) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		if robotsTxt == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(robotsTxt))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<html><body><a href=\"/x\">page %s</a></body></html>", r.URL.Path)
	})
	return mux
}

func TestConsumeIntegration(t *testing.T) {
	const delay = 200 * time.Millisecond
	kcfg := kafkatest.Config(t, 4)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	// host A: pages, a slow page, an oversized page, a redirect
	muxA := pageHandler("User-agent: *\nAllow: /\n")
	muxA.HandleFunc("/slow", func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	muxA.HandleFunc("/big", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(strings.Repeat("<p>big</p>", 4000)))
	})
	muxA.HandleFunc("/not-html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG binary"))
	})
	hostD := startSite(t, "127.0.0.4", pageHandler(""))
	muxA.HandleFunc("/redir", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, hostD.base+"/from-redirect", http.StatusMovedPermanently)
	})
	hostA := startSite(t, "127.0.0.2", muxA)
	// host B: robots.txt disallows /private
	hostB := startSite(t, "127.0.0.3", pageHandler("User-agent: *\nDisallow: /private\n"))
	// an unreachable host
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.5:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	type want struct {
		kind   failure.Kind
		status int
	}
	wants := map[string]want{
		hostA.base + "/p0":       {failure.None, 200},
		hostA.base + "/p1":       {failure.None, 200},
		hostA.base + "/p2":       {failure.None, 200},
		hostA.base + "/slow":     {failure.Timeout, 0},
		hostA.base + "/big":      {failure.BodyTooLarge, 200},
		hostA.base + "/redir":    {failure.Redirect, 301},
		hostB.base + "/p0":       {failure.None, 200},
		hostB.base + "/p1":       {failure.None, 200},
		hostB.base + "/private":  {failure.RobotsDenied, 0},
		hostD.base + "/p0":       {failure.None, 200},
		hostD.base + "/p1":       {failure.None, 200},
		hostD.base + "/p2":       {failure.None, 200},
		hostD.base + "/p3":       {failure.None, 200},
		dead + "/a":              {failure.Connect, 0},
		dead + "/b":              {failure.Connect, 0},
		hostA.base + "/not-html": {failure.None, 200},
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	// publish the requests (sorted, so host queues are deterministic) and one poison record
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var urls []string
	for u := range wants {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	var msgs []kafka.Message
	for i, u := range urls {
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatalf("key %s: %v", u, err)
		}
		fr := &crawlv1.FetchRequest{CrawlId: "c1", Url: u, UrlFp: uint64(i + 1), Depth: 2}
		if u == hostA.base+"/redir" {
			fr.SerpEngine = "test-engine" // carried onto the redirect target
		}
		m, err := kafkaio.NewMessage(topics.Fetch, key, fr)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs, kafka.Message{Topic: topics.Fetch, Key: []byte("poison"), Value: []byte{0xde, 0xad}})
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatalf("publish requests: %v", err)
	}

	// run the consumer
	f := httpfetch.New(httpfetch.Options{
		AllowPrivate: true, ResponseHeaderTimeout: 400 * time.Millisecond, FetchTimeout: 600 * time.Millisecond,
		MaxBodyBytes: 10 << 10,
	})
	defer f.Close()
	robotsReg := prometheus.NewRegistry()
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent(), Metrics: robotsReg})
	svc, stopFetcher := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4,
		Politeness: politeness.Options{Delay: delay, MaxCrawlDelay: time.Second},
		// one attempt per URL here; retries are TestRetriesRedirects'
		Outcome: outcome.Options{InstanceID: "test-fetcher", MaxAttempts: 1},
	}, f, rc, w, 50*time.Millisecond, 100, log)

	// collect the published pages and discovered URLs
	var (
		outMu      sync.Mutex
		pages      = map[string]*crawlv1.FetchedPage{}
		pageCount  int
		discovered []*crawlv1.DiscoveredURL
	)
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, topics.Fetched, func(_ kafka.Message, p *crawlv1.FetchedPage) {
		outMu.Lock()
		pages[p.GetUrl()] = p
		pageCount++
		outMu.Unlock()
	})
	follow(t, followCtx, &fg, kcfg, topics.Discovered, func(_ kafka.Message, d *crawlv1.DiscoveredURL) {
		outMu.Lock()
		discovered = append(discovered, d)
		outMu.Unlock()
	})

	// wait until every request is acked and committed (lag 0) and every
	// page is seen on the fetched topic
	waitFor(ctx, t, "all requests committed and published", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		outMu.Lock()
		n := len(pages)
		outMu.Unlock()
		return err == nil && lag == 0 && n == len(wants)
	})
	if err := stopFetcher(); err != nil {
		t.Fatalf("consumer: %v", err)
	}
	stopFollow()
	if err := fg.Wait(); err != nil {
		t.Fatalf("follow: %v", err)
	}

	// published pages
	outMu.Lock()
	defer outMu.Unlock()
	if pageCount != len(wants) {
		t.Errorf("published %d fetched pages, want %d (one per request)", pageCount, len(wants))
	}
	for u, wt := range wants {
		p, ok := pages[u]
		if !ok {
			t.Errorf("no fetched page for %s", u)
			continue
		}
		if failure.Kind(p.GetErrorKind()) != wt.kind || int(p.GetStatusCode()) != wt.status {
			t.Errorf("page %s: kind, status = %q %d (%s), want %q %d", u, p.GetErrorKind(), p.GetStatusCode(), p.GetErrorMessage(), wt.kind, wt.status)
		}
		if p.GetCrawlId() != "c1" || p.GetDepth() != 2 {
			t.Errorf("page %s lost request fields: %v", u, p)
		}
	}
	if p := pages[hostA.base+"/p0"]; p != nil && !strings.Contains(string(p.GetBody()), "page /p0") {
		t.Errorf("body of p0 = %q", p.GetBody())
	}
	if p := pages[hostA.base+"/big"]; p != nil && (!p.GetTruncated() || len(p.GetBody()) != 10<<10) {
		t.Errorf("big page: truncated %v, %d bytes", p.GetTruncated(), len(p.GetBody()))
	}
	if p := pages[hostA.base+"/not-html"]; p != nil && (p.GetContentType() != "image/png" || len(p.GetBody()) != 0) {
		t.Errorf("non-html page: content type %q, %d body bytes, want image/png without body", p.GetContentType(), len(p.GetBody()))
	}
	if len(discovered) != 1 || discovered[0].GetUrl() != hostD.base+"/from-redirect" ||
		discovered[0].GetSource() != crawlv1.Source_SOURCE_REDIRECT || discovered[0].GetParentUrl() != hostA.base+"/redir" ||
		discovered[0].GetDepth() != 2 || discovered[0].GetSerpEngine() != "test-engine" {
		t.Errorf("discovered = %v, want the redirect target", discovered)
	}

	// every URL fetched exactly once, robots.txt once per host, the
	// delay between two requests to one host respected
	for _, s := range []*site{hostA, hostB, hostD} {
		spans, hits := s.snapshot()
		if hits["/robots.txt"] != 1 {
			t.Errorf("%s: robots.txt fetched %d times, want 1", s.base, hits["/robots.txt"])
		}
		for u := range wants {
			if path, ok := strings.CutPrefix(u, s.base); ok {
				want := 1
				if path == "/private" {
					want = 0
				}
				if hits[path] != want {
					t.Errorf("%s fetched %d times, want %d", u, hits[path], want)
				}
			}
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
		for i := 1; i < len(spans); i++ {
			if gap := spans[i].start.Sub(spans[i-1].end); gap < delay {
				t.Errorf("%s: %s started %v after %s ended, want >= %v", s.base, spans[i].path, gap, spans[i-1].path, delay)
			}
		}
	}

	// one fetch_log row per request, with the right error kind
	rows, err := store.Conn().Query(ctx, "SELECT url, error_kind, status, fetcher FROM fetch_log FINAL WHERE crawl_id = 'c1'")
	if err != nil {
		t.Fatalf("query fetch_log: %v", err)
	}
	defer rows.Close()
	logged := map[string]int{}
	for rows.Next() {
		var (
			u, kind, fetcher string
			status           uint16
		)
		if err := rows.Scan(&u, &kind, &status, &fetcher); err != nil {
			t.Fatalf("scan: %v", err)
		}
		logged[u]++
		wt, ok := wants[u]
		if !ok {
			t.Errorf("unexpected fetch_log row for %s", u)
			continue
		}
		if failure.Kind(kind) != wt.kind || int(status) != wt.status || fetcher != "test-fetcher" {
			t.Errorf("fetch_log %s: kind, status, fetcher = %q %d %q, want %q %d", u, kind, status, fetcher, wt.kind, wt.status)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for u := range wants {
		if logged[u] != 1 {
			t.Errorf("fetch_log has %d rows for %s, want 1", logged[u], u)
		}
	}

	// metrics
	if got := testutil.ToFloat64(svc.m.poison); got != 1 {
		t.Errorf("undecodable requests = %v, want 1", got)
	}
	if got := metricstest.Value(t, robotsReg, "robots_total", "outcome", string(robots.Parsed)); got != 2 {
		t.Errorf("robots parsed = %v, want 2", got)
	}
	if got := testutil.ToFloat64(svc.m.queueDepth); got != 0 {
		t.Errorf("queue depth after close = %v, want 0", got)
	}
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// holdsFor polls cond for window and fails the test the first time it does
// not hold: what a test checks when the point is that nothing happens.
func holdsFor(ctx context.Context, t testing.TB, window time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.NewTimer(window)
	defer end.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if !cond() {
			t.Fatalf("%s stopped holding", what)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("context ended while checking %s", what)
		case <-end.C:
			return
		case <-tick.C:
		}
	}
}

// noRepeat reports whether no path of s was requested twice.
func noRepeat(s *site) func() bool {
	return func() bool {
		_, hits := s.snapshot()
		for path, n := range hits {
			if path != "/robots.txt" && n > 1 {
				return false
			}
		}
		return true
	}
}

// TestCloseHandsBackInFlight checks that a partition closing while a fetch
// is in flight returns within its deadline and leaves the record unacked
// (redelivered to the next owner), while finished records are acked.
func TestCloseHandsBackInFlight(t *testing.T) {
	kcfg := kafkatest.Config(t, 1)
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	mux := pageHandler("")
	hanging := make(chan struct{}, 1)
	mux.HandleFunc("/hang", func(_ http.ResponseWriter, r *http.Request) {
		hanging <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	fast := startSite(t, "127.0.0.6", pageHandler(""))
	slow := startSite(t, "127.0.0.7", mux)

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true, FetchTimeout: 20 * time.Second, ResponseHeaderTimeout: 20 * time.Second})
	defer f.Close()
	reg := prometheus.NewRegistry()
	w := kafkaio.NewWriter(kcfg, log, reg)
	defer w.Close()
	flog := chstore.NewBatchWriter(store, chstore.FetchLog, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, reg)
	rec, stopRec := startRecorder(t, t.Context(), w, flog, nil, reg)
	defer stopRec()

	svc, err := New(Options{Topics: kcfg.Topics(), Workers: 2, Outcome: outcome.Options{InstanceID: "t"},
		Politeness: politeness.Options{Delay: 20 * time.Millisecond}}, f, robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()}), w, rec, log, reg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := svc.Assign(t.Context(), kcfg.Topics().Fetch, 0)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[int64]bool{}
	)
	ack := func(m kafka.Message) { mu.Lock(); acked[m.Offset] = true; mu.Unlock() }
	var batch []kafka.Message
	for i, u := range []string{fast.base + "/ok", slow.base + "/hang"} {
		m, err := kafkaio.NewMessage(kcfg.Topics().Fetch, []byte("k"), &crawlv1.FetchRequest{CrawlId: "c", Url: u})
		if err != nil {
			t.Fatal(err)
		}
		m.Offset = int64(i)
		batch = append(batch, m)
	}
	if err := h.Handle(t.Context(), batch, ack); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	select {
	case <-hanging:
	case <-ctx.Done():
		t.Fatal("slow page never requested")
	}
	waitFor(ctx, t, "fast page acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked[0]
	})
	closeCtx, closeCancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer closeCancel()
	start := time.Now()
	if err := h.Close(closeCtx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v, want about its 300ms deadline", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if acked[1] {
		t.Fatalf("in-flight record acked although it was abandoned")
	}
}
