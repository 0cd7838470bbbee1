package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// controlGrace is how long after a state change on the control topic the
// crawl may still send requests (in-flight fetches, the follower's lag).
const controlGrace = 3 * time.Second

// publishState publishes the crawl's spec with state and revision to the
// control topic and returns when it is durable.
func (e *crawlEnv) publishState(ctx context.Context, state crawlv1.CrawlState, revision uint64) time.Time {
	e.t.Helper()
	w := kafkaio.NewWriter(e.p.Kafka, nil, nil)
	defer w.Close()
	m, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, &crawlv1.CrawlSpec{CrawlId: e.crawlID, Revision: revision, State: state})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.Write(ctx, m); err != nil {
		e.t.Fatalf("publish crawl state %v: %v", state, err)
	}
	return time.Now()
}

// waitRequests waits until the site has served at least n page requests.
func (e *crawlEnv) waitRequests(ctx context.Context, n int) {
	e.t.Helper()
	for len(pageRequests(e.site.Requests())) < n {
		select {
		case <-ctx.Done():
			e.t.Fatalf("only %d site requests before the deadline", len(pageRequests(e.site.Requests())))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// injectBacklog produces n fetch requests of the crawl straight to the
// fetch topic, due at notBefore: a backlog the scheduler admitted before a
// state change and cannot recall. Their URLs (/backlog/page<i>.html, spread
// over the site's hosts) are linked from no page, so the pipeline holds no
// request of its own for them and any request the site sees for one is the
// backlog's. Reachable pages not requested so far would not do: the fetcher
// may have dispatched one of them before it read the state change, a
// request the grace allows that would be taken for the backlog's.
func (e *crawlEnv) injectBacklog(ctx context.Context, n int, notBefore time.Time) []string {
	e.t.Helper()
	hosts := len(e.site.Hosts())
	var urls []string
	var msgs []kafka.Message
	for i := range n {
		u, err := urlcanon.Canonicalize(e.site.URL(i%hosts, fmt.Sprintf("/backlog/page%d.html", i)))
		if err != nil {
			e.t.Fatal(err)
		}
		key, err := kafkaio.Key(u)
		if err != nil {
			e.t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(e.p.Kafka.Topics().Fetch, key, &crawlv1.FetchRequest{
			CrawlId: e.crawlID, Url: u, UrlFp: fingerprint.URL(e.crawlID, u), Depth: 1, NotBefore: timestamppb.New(notBefore),
		})
		if err != nil {
			e.t.Fatal(err)
		}
		urls, msgs = append(urls, u), append(msgs, m)
	}
	w := kafkaio.NewWriter(e.p.Kafka, nil, nil)
	defer w.Close()
	if err := w.Write(ctx, msgs...); err != nil {
		e.t.Fatalf("inject fetch backlog: %v", err)
	}
	return urls
}

// requestsAfter returns the site requests (robots.txt included) made after t.
func requestsAfter(reqs []demosite.Request, t time.Time) []string {
	var out []string
	for _, r := range reqs {
		if r.Time.After(t) {
			out = append(out, r.URL())
		}
	}
	return out
}

// TestCancelCrawl cancels a large crawl through the control topic after
// its first requests: within a few seconds the site sees no more
// requests, the pipeline still drains (nothing is held), and the URLs the
// fetcher had not fetched are recorded as cancelled. Besides what the
// pipeline itself had in flight (which depends on how fast the scheduler
// obeys too), a backlog of fetch requests admitted before the cancel is
// injected into the fetch topic: each must get a cancelled row and no
// request.
func TestCancelCrawl(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 4, PagesPerHost: 200, FirstHostOctet: 220}, delay: e2eDelay})
	e.seed(ctx, e.site.Seeds(), "")
	e.waitRequests(ctx, 20)
	at := e.publishState(ctx, crawlv1.CrawlState_CRAWL_STATE_CANCELLED, 2)
	backlog := e.injectBacklog(ctx, 30, at.Add(time.Second))
	s := e.drain(ctx, 90*time.Second)
	e.stop()

	reqs := e.site.Requests()
	if late := requestsAfter(reqs, at.Add(controlGrace)); len(late) > 0 {
		t.Errorf("%d site requests more than %s after the cancel, e.g. %v", len(late), controlGrace, first(late, 5))
	}
	before := len(requestsAfter(reqs, time.Time{})) - len(requestsAfter(reqs, at))
	rows := e.fetchLog(ctx)
	cancelled := 0
	kinds := map[string]string{}
	for _, r := range rows {
		if r.ErrorKind == "cancelled" {
			cancelled++
		}
		kinds[r.URL] = r.ErrorKind
	}
	requested := pageRequests(reqs)
	for _, u := range backlog {
		if kinds[u] != "cancelled" || requested[u] > 0 {
			t.Errorf("backlog %s: fetch_log kind %q, %d requests; want a cancelled row and none", u, kinds[u], requested[u])
		}
	}
	if len(backlog) == 0 || cancelled < len(backlog) {
		t.Errorf("%d cancelled fetch_log rows among %d, backlog of %d", cancelled, len(rows), len(backlog))
	}
	if n := len(pageRequests(reqs)); n >= len(e.site.ReachableAllowed()) {
		t.Errorf("all %d reachable pages were requested despite the cancel", n)
	}
	t.Logf("cancelled after %d requests; %d requests in all (%d pages of %d reachable); %d fetch_log rows, %d cancelled (%d of them the injected backlog); drained: %s",
		before, len(reqs), len(requested), len(e.site.ReachableAllowed()), len(rows), cancelled, len(backlog), s.Line())
}

// TestPauseResumeCrawl pauses a crawl through the control topic: within a
// few seconds the site sees no more requests; after the resume the crawl
// completes with every reachable page fetched exactly once.
func TestPauseResumeCrawl(t *testing.T) {
	const pausedFor = 8 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 4, PagesPerHost: 60, FirstHostOctet: 230}, delay: e2eDelay})
	e.seed(ctx, e.site.Seeds(), "")
	e.waitRequests(ctx, 20)
	at := e.publishState(ctx, crawlv1.CrawlState_CRAWL_STATE_PAUSED, 2)
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(pausedFor):
	}
	resumed := e.publishState(ctx, crawlv1.CrawlState_CRAWL_STATE_RUNNING, 3)
	var late []string
	for _, r := range e.site.Requests() {
		if r.Time.After(at.Add(controlGrace)) && r.Time.Before(resumed) {
			late = append(late, r.URL())
		}
	}
	if len(late) > 0 {
		t.Errorf("%d site requests while paused (more than %s after the pause), e.g. %v", len(late), controlGrace, first(late, 5))
	}
	s := e.drain(ctx, 120*time.Second)
	e.stop()
	if dups := checkCoverage(t, e.site, true); dups > 0 {
		t.Errorf("%d duplicate fetches across the pause", dups)
	}
	for _, r := range e.fetchLog(ctx) {
		if r.ErrorKind == "cancelled" || strings.Contains(r.ErrorKind, "paus") {
			t.Errorf("fetch_log row %s: %s", r.URL, r.ErrorKind)
		}
	}
	t.Logf("paused %s after %d page requests; %d requests in all; drained: %s",
		pausedFor, len(pageRequests(e.site.Requests()))-len(requestsAfter(e.site.Requests(), at)), len(e.site.Requests()), s.Line())
}

// TestTimeLimitCrawl runs a large crawl with a short time limit and an
// identity of its own, given as the launcher gives them (a --spec file the
// seeder publishes): every request the site sees, robots.txt included,
// carries the crawl's User-Agent and From header; once the limit has passed
// since the crawl's creation the site sees no more requests, without any
// new specification; the pipeline drains and every URL the crawl admitted
// is terminal, the unfetched ones recorded as cancelled.
func TestTimeLimitCrawl(t *testing.T) {
	const (
		limit = 6 * time.Second
		ua    = "endtoendbot/1.0 (+https://example.org/bot)"
		from  = "ops@example.org"
	)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 4, PagesPerHost: 200, FirstHostOctet: 200}, delay: e2eDelay})
	spec := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(spec, []byte(fmt.Sprintf(`{"limits": {"max_duration": %q}, "identity": {"user_agent": %q, "headers": ["From: %s"]}}`,
		limit, ua, from)), 0o644); err != nil {
		t.Fatal(err)
	}
	seeded := time.Now()
	if _, err := e.p.Seed(ctx, pipeline.SeedRun{CrawlID: e.crawlID, Seeds: e.site.Seeds(), SpecFile: spec}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	s := e.drain(ctx, 120*time.Second)
	drained := time.Now()
	e.stop()

	reqs := e.site.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request")
	}
	// The spec is created before the seeds are published, so before the
	// first request: the limit ends no later than that request + limit.
	deadline := reqs[0].Time.Add(limit)
	for _, r := range reqs {
		if r.Time.Before(reqs[0].Time) {
			deadline = r.Time.Add(limit)
		}
	}
	if late := requestsAfter(reqs, deadline.Add(controlGrace)); len(late) > 0 {
		t.Errorf("%d site requests more than %s after the time limit, e.g. %v", len(late), controlGrace, first(late, 5))
	}
	robots := 0
	for _, r := range reqs {
		if r.IsRobots() {
			robots++
		}
		if r.UserAgent != ua || r.From != from {
			t.Errorf("%s requested with User-Agent %q, From %q; want the crawl's %q, %q", r.URL(), r.UserAgent, r.From, ua, from)
			break
		}
	}
	requested := pageRequests(reqs)
	if n := len(requested); n == 0 || n >= len(e.site.ReachableAllowed()) {
		t.Errorf("%d of %d reachable pages requested: want some, not all", n, len(e.site.ReachableAllowed()))
	}
	st := e.crawlStatus(ctx, e.crawlID)
	if !st.found || st.pending != 0 || st.cx == 0 || st.terminal != st.admitted {
		t.Errorf("crawl_status %+v: want every admitted URL terminal, some cancelled", st)
	}
	cancelled := 0
	for _, r := range e.fetchLog(ctx) {
		if r.ErrorKind == "cancelled" {
			cancelled++
			if requested[r.URL] > 0 {
				t.Errorf("%s: a cancelled row and %d requests", r.URL, requested[r.URL])
			}
		}
	}
	t.Logf("time limit %s: %d requests (%d pages of %d reachable, %d robots.txt), the last %s after the seeding; %d admitted, %d cancelled (%d fetch_log rows); drained %s after the seeding: %s",
		limit, len(reqs), len(requested), len(e.site.ReachableAllowed()), robots, reqs[len(reqs)-1].Time.Sub(seeded).Round(time.Millisecond),
		st.admitted, st.cx, cancelled, drained.Sub(seeded).Round(time.Second), s.Line())
}
