package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestRestartRefusesUntilCaughtUp: a second API instance (a restart)
// answers 503 with Retry-After until its control follower has read the
// topic to its end, and from the first moment it is caught up it knows
// every crawl published before, so a reused id is 409, never a duplicate.
func TestRestartRefusesUntilCaughtUp(t *testing.T) {
	kc := kafkatest.Config(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kc, zap.NewNop(), nil)
	defer w.Close()

	// The previous run published 20 crawls, some with later revisions.
	first := control.New(kc, w, zap.NewNop())
	const crawls = 20
	for i := range crawls {
		spec := &crawlv1.CrawlSpec{CrawlId: fmt.Sprintf("old-%02d", i), Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING}
		if err := first.Publish(ctx, spec); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := first.Publish(ctx, &crawlv1.CrawlSpec{CrawlId: spec.CrawlId, Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED}); err != nil {
				t.Fatal(err)
			}
		}
	}

	restarted := control.New(kc, w, zap.NewNop())
	m, err := api.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	st := stats.New(chtest.NewStore(t))
	srv := httptest.NewServer(api.New(api.Config{Token: token}, crawljobs.New(restarted, st, nil, zap.NewNop()), st, m, zap.NewNop()).Handler())
	defer srv.Close()
	e := env{url: srv.URL, kafka: kc}

	// Not following yet: every authenticated route is refused.
	for _, tt := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/crawls", `{"crawl_id":"old-00","seeds":["http://127.0.0.2/"]}`},
		{http.MethodGet, "/v1/crawls", ""},
		{http.MethodGet, "/v1/crawls/old-01", ""},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s before catching up: %d (Retry-After %q), want 503 with Retry-After", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}

	rctx, rcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := restarted.Run(rctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	defer func() { rcancel(); wg.Wait() }()
	if err := restarted.WaitCaughtUp(ctx); err != nil {
		t.Fatalf("never caught up: %v", err)
	}
	// No polling: at the moment it is caught up, everything is known.
	if n := len(restarted.All()); n != crawls {
		t.Errorf("caught up knowing %d crawls, want %d", n, crawls)
	}
	if got := restarted.Get("old-03").GetRevision(); got != 2 {
		t.Errorf("old-03 revision %d, want 2", got)
	}
	for i := range crawls {
		id := fmt.Sprintf("old-%02d", i)
		if code, raw := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"`+id+`","seeds":["http://127.0.0.2/"]}`, nil); code != http.StatusConflict {
			t.Errorf("resubmitting %s after the restart: %d %s, want 409", id, code, raw)
		}
	}
}

// TestEmptyControlTopicCaughtUpAtOnce: with nothing published, the
// follower is caught up without waiting for a record.
func TestEmptyControlTopicCaughtUpAtOnce(t *testing.T) {
	kc := kafkatest.Config(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		t.Fatal(err)
	}
	c := control.New(kc, nil, zap.NewNop())
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	if err := c.WaitCaughtUp(ctx); err != nil {
		t.Errorf("not caught up on an empty topic: %v", err)
	}
	rcancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
