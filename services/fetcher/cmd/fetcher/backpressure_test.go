package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/app"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestHoldsBackWhileParserBehind runs the whole fetcher with
// --max-downstream-lag 2s against a real broker, ClickHouse and a local
// site of 60 pages at 10 requests a second, and a parser that stored a
// page earlier and now stores nothing: the fetcher
// fetches until its oldest fetched page waited 2 s for the parser (about
// 20 pages, plus those of the second between two measures and the
// requests running), then starts no request while nothing stores them. A consumer in the parser's
// group then takes the fetched pages and commits them, as the parser does
// once their documents are inserted: the lag falls, the fetcher resumes and
// fetches every page.
func TestHoldsBackWhileParserBehind(t *testing.T) {
	const (
		pages   = 60
		high    = 2 * time.Second
		workers = 4
		// one host at 10 requests a second: the lag is measured every
		// second, so about 10 requests start after it reached high
		delay = 100 * time.Millisecond
		rate  = int64(time.Second / delay)
		want  = rate * int64(high/time.Second)
	)
	kcfg := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	base, served := countingSite(t, "127.0.0.91")

	args := append(storeArgs(kcfg, ch),
		"-log-level", "warn",
		"-workers", strconv.Itoa(workers),
		"-delay", delay.String(),
		"-allow-private",
		"-max-downstream-lag", high.String(),
	)
	env := func(string) (string, bool) { return "", false }
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, args, env) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	// A parser that ran before: its group stored (committed) a page. (A
	// group that never committed is no parser, and holds nothing back.)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: kcfg.Brokers, GroupID: kcfg.GroupFor(app.ParserGroup), Topic: kcfg.Topics().Fetched,
		SessionTimeout: kcfg.SessionTimeout, RebalanceTimeout: kcfg.RebalanceTimeout,
		HeartbeatInterval: time.Second, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	if err := w.Write(ctx, kafka.Message{Topic: kcfg.Topics().Fetched, Key: []byte("earlier"), Value: []byte("a page stored before")}); err != nil {
		t.Fatal(err)
	}
	if m, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	} else if err := r.CommitMessages(ctx, m); err != nil {
		t.Fatal(err)
	}
	var urls []string
	for i := range pages {
		urls = append(urls, fmt.Sprintf("%s/p/%d", base, i))
	}
	msgs := fetchRequests(t, kcfg, "bp", urls)
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	// The fetcher stops fetching: no request for 3 s.
	held := settled(ctx, t, served, 3*time.Second)
	t.Logf("held back after %d of %d pages (pause at %s of lag, about %d pages; %d workers)", held, pages, high, want, workers)
	if held < want-rate || held > want+2*rate+workers {
		t.Fatalf("fetched %d pages with nothing parsed, want the pause at about %d (%s at %d/s; give or take a second's requests between two measures, and the %d running)",
			held, want, high, rate, workers)
	}

	// The parser catches up: its group takes and commits the fetched pages.
	waitServed(ctx, t, served, pages, "the parser", commitAll(ctx, r))
	t.Logf("every page fetched once the parser caught up")
}

// settled waits until n has not changed for quiet and returns it.
func settled(ctx context.Context, t *testing.T, n *atomic.Int64, quiet time.Duration) int64 {
	t.Helper()
	last, since := n.Load(), time.Now()
	for time.Since(since) < quiet || last == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for the fetcher to hold back: %v (at %d)", ctx.Err(), n.Load())
		case <-time.After(50 * time.Millisecond):
		}
		if v := n.Load(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

// TestHoldsBackWhileSchedulerBehind: with --max-scheduler-lag 2s (the
// parser not watched), links waiting for a scheduler group that decided
// none of them for 4 s hold every new request back; once the group has
// committed them, every page is fetched.
func TestHoldsBackWhileSchedulerBehind(t *testing.T) {
	const pages = 20
	kcfg := kafkatest.Config(t, 2)
	ch := chtest.Config(t)
	base, served := countingSite(t, "127.0.0.92")

	args := append(storeArgs(kcfg, ch), "-log-level", "warn", "-workers", "4", "-delay", "20ms", "-allow-private",
		"-max-downstream-lag", "0", "-max-scheduler-lag", "2s")
	env := func(string) (string, bool) { return "", false }
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, args, env) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	w := kafkaio.NewWriter(kcfg, zap.NewNop(), prometheus.NewRegistry())
	defer w.Close()
	discovered := kcfg.Topics().Discovered
	// A scheduler that ran before: its group decided (committed) a link.
	// Then links it has not decided.
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: kcfg.Brokers, GroupID: kcfg.GroupFor(app.SchedulerGroup), Topic: discovered,
		SessionTimeout: kcfg.SessionTimeout, RebalanceTimeout: kcfg.RebalanceTimeout,
		HeartbeatInterval: time.Second, MaxWait: 100 * time.Millisecond,
	})
	defer r.Close()
	if err := w.Write(ctx, kafka.Message{Topic: discovered, Key: []byte("earlier"), Value: []byte("a link decided before")}); err != nil {
		t.Fatal(err)
	}
	if m, err := r.FetchMessage(ctx); err != nil {
		t.Fatal(err)
	} else if err := r.CommitMessages(ctx, m); err != nil {
		t.Fatal(err)
	}
	var links []kafka.Message
	for i := range 50 {
		links = append(links, kafka.Message{Topic: discovered, Key: []byte(strconv.Itoa(i)), Value: []byte("a link waiting")})
	}
	if err := w.Write(ctx, links...); err != nil {
		t.Fatal(err)
	}
	select { // past 2 s of lag, and a measure after it
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(4 * time.Second):
	}
	var urls []string
	for i := range pages {
		urls = append(urls, fmt.Sprintf("%s/p/%d", base, i))
	}
	if err := w.Write(ctx, fetchRequests(t, kcfg, "sched", urls)...); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(3 * time.Second):
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("%d pages fetched while the scheduler had not decided links waiting for 4 s (--max-scheduler-lag 2s)", n)
	}

	// The scheduler catches up: its group takes and commits the links.
	waitServed(ctx, t, served, pages, "the scheduler", commitAll(ctx, r))
}

// countingSite serves pages on ip (robots.txt: none) and counts the page
// requests; it stops with the test.
func countingSite(t *testing.T, ip string) (base string, served *atomic.Int64) {
	t.Helper()
	served = new(atomic.Int64)
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		served.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body><p>page %s</p></body></html>", r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), served
}

// commitAll takes and commits every record r reads, as a stage that
// caught up, until ctx ends; the first error is sent on the channel.
func commitAll(ctx context.Context, r *kafka.Reader) <-chan error {
	errs := make(chan error, 1)
	go func() {
		for {
			m, err := r.FetchMessage(ctx)
			if err == nil {
				err = r.CommitMessages(ctx, m)
			}
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	return errs
}

// waitServed waits until served reaches pages once stage caught up
// (committing through errs).
func waitServed(ctx context.Context, t *testing.T, served *atomic.Int64, pages int64, stage string, errs <-chan error) {
	t.Helper()
	for served.Load() < pages {
		select {
		case err := <-errs:
			t.Fatalf("%s's group: %v", stage, err)
		case <-ctx.Done():
			t.Fatalf("fetched %d of %d pages after %s caught up: %v", served.Load(), pages, stage, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
