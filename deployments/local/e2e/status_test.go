package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

// crawlStatusRow is the documented crawl_status query's row of a crawl.
type crawlStatusRow struct {
	admitted, terminal                                    uint64
	pending                                               int64
	retrying, fetched, redirected, denied, failed, cx, dr uint64
	budgetExhausted                                       uint64
	status                                                string
	found                                                 bool
}

func (e *crawlEnv) crawlStatus(ctx context.Context, crawl string) crawlStatusRow {
	e.t.Helper()
	rows, err := e.p.Store.Conn().Query(ctx, strings.TrimSuffix(analystQuery(e.t, "crawl_status"), ";"))
	if err != nil {
		e.t.Fatalf("crawl_status: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id string
			r  crawlStatusRow
		)
		if err := rows.Scan(&id, &r.admitted, &r.terminal, &r.pending, &r.retrying, &r.fetched, &r.redirected, &r.denied,
			&r.failed, &r.cx, &r.budgetExhausted, &r.dr, &r.status); err != nil {
			e.t.Fatalf("scan crawl_status: %v", err)
		}
		if id == crawl {
			r.found = true
			return r
		}
	}
	return crawlStatusRow{}
}

// TestCrawlStatusRetryRedirect crawls, through the crawl-jobs API and every
// service, a site whose /flaky answers 503 twice before it answers and
// whose /r redirects to /final, and watches the documented crawl_status
// query and the API while it runs: while /flaky waits for a retry the
// crawl is running (every other URL may be terminal by then, which the
// old query, comparing fingerprints in url_seen and fetch_log, read as
// finished); at the end every admitted URL is terminal (the redirect and
// its target each once) and both say finished.
func TestCrawlStatusRetryRedirect(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	var flaky atomic.Int32
	site, _ := startServer(t, "127.0.0.174", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<html><body><a href="/flaky">flaky</a> <a href="/r">moved</a></body></html>`)
		case "/flaky":
			if flaky.Add(1) <= 2 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "<html><body>finally</body></html>")
		case "/r":
			http.Redirect(w, r, "/final", http.StatusMovedPermanently)
		default:
			fmt.Fprintf(w, "<html><body>%s</body></html>", r.URL.Path)
		}
	}))
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 1, PagesPerHost: 1, FirstHostOctet: 175}, delay: e2eDelay,
		// Back-off of 3 s, then 6: /flaky waits for its retries through
		// several 1 s flushes of url_seen (the scheduler) and fetch_log
		// (the fetcher), long enough for the loop below, slowed by a
		// loaded machine, to see it waiting. At the services' defaults
		// (10 s and 5 s) /flaky is admitted in url_seen about when its
		// last retry is done, and the wait may never be visible.
		args: map[string][]string{
			"fetcher":   {"--retry-backoff", "3s", "--max-attempts", "3", "--clickhouse-flush-interval", "1s"},
			"scheduler": {"--seen-flush-interval", "1s"},
		}})
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := e.p.StartService(ctx, "seeder", "seeder-api", []string{"serve", "--api-addr", addr, "--api-token", jobsToken}); err != nil {
		t.Fatalf("start seeder serve: %v", err)
	}
	api := jobsAPI{t: t, base: "http://" + addr}
	if code := api.do(ctx, http.MethodPost, "/v1/crawls", `{"crawl_id":"`+e.crawlID+`","seeds":["`+site+`/"]}`, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}

	sawRetrying := false
	var (
		v  crawlView
		st crawlStatusRow
	)
	for v.Status != "drained" {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl never drained; last %+v %+v, crawl_status %+v", v, v.Counts, st)
		case <-time.After(100 * time.Millisecond):
		}
		st = e.crawlStatus(ctx, e.crawlID)
		if code := api.do(ctx, http.MethodGet, "/v1/crawls/"+e.crawlID, "", &v); code != http.StatusOK {
			t.Fatalf("get: %d", code)
		}
		if st.retrying > 0 {
			sawRetrying = true
			if st.status != "running" || st.pending < 1 {
				t.Errorf("crawl_status with a retry pending: %+v, want running", st)
			}
		}
		if v.Counts != nil && v.Counts.Retrying > 0 && (v.Status == "drained" || v.Counts.Finished) {
			t.Errorf("API with a retry pending: %s %+v, want running, not finished", v.Status, *v.Counts)
		}
	}
	if !sawRetrying {
		t.Errorf("never saw /flaky waiting for its retry (crawl_status retrying > 0)")
	}
	st = e.crawlStatus(ctx, e.crawlID)
	want := crawlStatusRow{admitted: 4, terminal: 4, fetched: 3, redirected: 1, status: "finished", found: true}
	if st != want {
		t.Errorf("crawl_status after the drain: %+v, want %+v (/, /flaky after two retries, /r redirected, /final)", st, want)
	}
	if c := v.Counts; !c.Finished || c.Admitted != 4 || c.Terminal != 4 || c.Pending != 0 || c.Retrying != 0 {
		t.Errorf("API counts %+v, want 4 admitted, all terminal, finished", *c)
	}
	if n := flaky.Load(); n != 3 {
		t.Errorf("/flaky requested %d times, want 3", n)
	}
	e.stop()
}
