package outcome

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

var (
	start = time.Date(2026, 3, 1, 12, 0, 0, 250*int(time.Millisecond), time.UTC)
	now   = start.Add(2 * time.Second)
)

// opts retries after exactly half the back-off (Jitter always 0).
var opts = Options{
	InstanceID: "f-1", MaxAttempts: 3, RetryBackoff: 4 * time.Second, MaxRetryBackoff: time.Minute,
	MaxRedirects: 2, Jitter: func(int64) int64 { return 0 },
}

func request(attempt, hops uint32) *crawlv1.FetchRequest {
	return &crawlv1.FetchRequest{
		CrawlId: "c1", Url: "http://a.example/p", UrlFp: 42, Depth: 3, ParentUrl: "http://a.example/",
		AnchorText: "p", SerpEngine: "bing", Attempt: attempt, RedirectHops: hops,
		ScheduledAt: timestamppb.New(start.Add(-time.Minute)),
	}
}

func TestOf(t *testing.T) {
	statusErr := func(code int, retryAfter time.Duration) error {
		return &failure.StatusError{Code: code, RetryAfter: retryAfter}
	}
	tests := []struct {
		name       string
		attempt    uint32
		hops       uint32
		retryAfter time.Time
		res        httpfetch.Response
		o          func(*Options)

		wantKind      failure.Kind
		wantErrPrefix string
		wantRetryAt   time.Time // zero: no retry
		wantExhausted bool
		wantRedirect  Redirect
		wantTarget    string
		wantProxy     string // proxy outcome, "" for none
	}{
		{name: "200", res: httpfetch.Response{Status: 200, ContentType: "text/html", Body: []byte("<p>"), BodyBytes: 3}},
		{name: "304 unchanged", res: httpfetch.Response{Status: 304}},
		{name: "404 never retried", res: httpfetch.Response{Status: 404, Err: statusErr(404, 0)}, wantErrPrefix: "http status 404"},
		{name: "503 retried after half the back-off", res: httpfetch.Response{Status: 503, Err: statusErr(503, 0)},
			wantErrPrefix: "http status 503", wantRetryAt: now.Add(2 * time.Second)},
		{name: "second attempt backs off twice as long", attempt: 1, res: httpfetch.Response{Status: 500, Err: statusErr(500, 0)},
			wantErrPrefix: "http status 500", wantRetryAt: now.Add(4 * time.Second)},
		{name: "a later Retry-After wins", retryAfter: now.Add(time.Hour), res: httpfetch.Response{Status: 429, Err: statusErr(429, time.Hour)},
			wantErrPrefix: "http status 429", wantRetryAt: now.Add(time.Hour)},
		{name: "last attempt exhausted", attempt: 2, res: httpfetch.Response{Status: 503, Err: statusErr(503, 0)},
			wantErrPrefix: "http status 503", wantExhausted: true},
		{name: "timeout retried", res: httpfetch.Response{Kind: failure.Timeout, Err: errors.New("deadline")},
			wantKind: failure.Timeout, wantErrPrefix: "deadline", wantRetryAt: now.Add(2 * time.Second)},
		{name: "robots.txt unavailable retried at its next check", retryAfter: now.Add(10 * time.Minute),
			res:      httpfetch.Response{Kind: failure.RobotsUnavailable, Err: errors.New("robots.txt unavailable (status 503)")},
			wantKind: failure.RobotsUnavailable, wantErrPrefix: "robots.txt unavailable", wantRetryAt: now.Add(10 * time.Minute)},
		{name: "robots denied", res: httpfetch.Response{Kind: failure.RobotsDenied, Err: errors.New("disallowed by robots.txt")},
			wantKind: failure.RobotsDenied, wantErrPrefix: "disallowed"},
		{name: "cancelled", res: httpfetch.Response{Kind: failure.Cancelled, Err: errors.New("crawl cancelled")},
			wantKind: failure.Cancelled, wantErrPrefix: "crawl cancelled"},
		{name: "budget exhausted", res: httpfetch.Response{Kind: failure.BudgetExhausted, Err: errors.New("page budget of 10 spent")},
			wantKind: failure.BudgetExhausted, wantErrPrefix: "page budget"},
		{name: "redirect published", hops: 1, res: httpfetch.Response{Status: 301, Kind: failure.Redirect, RedirectLocation: "HTTP://B.example:80/q"},
			wantKind: failure.Redirect, wantRedirect: RedirectPublished, wantTarget: "http://b.example/q"},
		{name: "redirect to itself", res: httpfetch.Response{Status: 302, Kind: failure.Redirect, RedirectLocation: "http://a.example/p"},
			wantKind: failure.RedirectLoop, wantErrPrefix: "redirect from http://a.example/p to itself", wantRedirect: RedirectLoop},
		{name: "redirect beyond the chain's length", hops: 2, res: httpfetch.Response{Status: 302, Kind: failure.Redirect, RedirectLocation: "http://b.example/"},
			wantKind: failure.TooManyRedirects, wantErrPrefix: "redirect to http://b.example/ after 2 redirects", wantRedirect: RedirectTooMany},
		{name: "no redirect followed at all", o: func(o *Options) { o.MaxRedirects = -1 },
			res:      httpfetch.Response{Status: 302, Kind: failure.Redirect, RedirectLocation: "http://b.example/"},
			wantKind: failure.TooManyRedirects, wantErrPrefix: "redirect to http://b.example/ after 0 redirects", wantRedirect: RedirectTooMany},
		{name: "uncrawlable redirect target", res: httpfetch.Response{Status: 302, Kind: failure.Redirect, RedirectLocation: "mailto:x@a.example"},
			wantKind: failure.Redirect, wantRedirect: RedirectInvalid},
		{name: "through a proxy, blocked", res: httpfetch.Response{Status: 403, Err: statusErr(403, 0), ProxyID: "p1", Host: "a.example"},
			wantErrPrefix: "http status 403", wantProxy: ProxyBlocked},
		{name: "through a proxy, timed out", res: httpfetch.Response{Kind: failure.Timeout, Err: errors.New("deadline"), ProxyID: "p1"},
			wantKind: failure.Timeout, wantErrPrefix: "deadline", wantRetryAt: now.Add(2 * time.Second), wantProxy: ProxyTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.o != nil {
				tt.o(&o)
			}
			req := request(tt.attempt, tt.hops)
			res := tt.res
			res.Start, res.Duration = start, 30*time.Millisecond
			before := res
			r := Of(o, Attempt{Req: req, Host: "a.example", Partition: 5, RetryAfter: tt.retryAfter}, &res, now)

			if res.Kind != before.Kind || res.Err != before.Err { //nolint:errorlint // identity: Of must not replace the error
				t.Errorf("Of modified the response")
			}
			pg := r.Page
			if pg.GetUrl() != req.GetUrl() || pg.GetCrawlId() != "c1" || pg.GetUrlFp() != 42 || pg.GetDepth() != 3 ||
				pg.GetPartition() != 5 || pg.GetAttempt() != tt.attempt || pg.GetSerpEngine() != "bing" ||
				pg.GetStatusCode() != uint32(tt.res.Status) || !pg.GetFetchedAt().AsTime().Equal(start) {
				t.Errorf("page = %v", pg)
			}
			if got := failure.Kind(pg.GetErrorKind()); got != tt.wantKind {
				t.Errorf("kind %q, want %q", got, tt.wantKind)
			}
			if !strings.HasPrefix(pg.GetErrorMessage(), tt.wantErrPrefix) || (tt.wantErrPrefix == "") != (pg.GetErrorMessage() == "") {
				t.Errorf("error message %q, want prefix %q", pg.GetErrorMessage(), tt.wantErrPrefix)
			}
			if pg.GetUnchanged() != (tt.res.Status == 304) {
				t.Errorf("unchanged = %v", pg.GetUnchanged())
			}
			if wantFrom := map[bool]string{true: req.GetParentUrl()}[tt.hops > 0]; pg.GetRedirectedFrom() != wantFrom {
				t.Errorf("redirected_from %q", pg.GetRedirectedFrom())
			}
			if r.Row != FetchLogRow(pg, "a.example", "f-1") {
				t.Errorf("row %+v is not the page's", r.Row)
			}
			if r.Row.Final != tt.wantRetryAt.IsZero() {
				t.Errorf("row final = %v, want %v (final exactly when no retry follows)", r.Row.Final, tt.wantRetryAt.IsZero())
			}

			if tt.wantRetryAt.IsZero() {
				if r.Retry != nil || pg.GetWillRetry() {
					t.Errorf("retry %v, will_retry %v; want none", r.Retry, pg.GetWillRetry())
				}
			} else {
				if r.Retry == nil || !pg.GetWillRetry() {
					t.Fatalf("no retry, want one at %v", tt.wantRetryAt)
				}
				if r.Retry.GetAttempt() != tt.attempt+1 || !r.Retry.GetNotBefore().AsTime().Equal(tt.wantRetryAt) {
					t.Errorf("retry attempt %d at %v, want %d at %v", r.Retry.GetAttempt(), r.Retry.GetNotBefore().AsTime(), tt.attempt+1, tt.wantRetryAt)
				}
				want := proto.CloneOf(req)
				want.Attempt, want.NotBefore = r.Retry.GetAttempt(), r.Retry.GetNotBefore()
				if !proto.Equal(r.Retry, want) {
					t.Errorf("retry %v is not the request's next attempt", r.Retry)
				}
			}
			if r.Exhausted != tt.wantExhausted {
				t.Errorf("exhausted = %v", r.Exhausted)
			}

			if r.Redirect != tt.wantRedirect {
				t.Errorf("redirect %q, want %q", r.Redirect, tt.wantRedirect)
			}
			if tt.wantTarget == "" {
				if r.Target != nil {
					t.Errorf("target %v, want none", r.Target)
				}
			} else {
				want := &crawlv1.DiscoveredURL{
					CrawlId: "c1", Url: tt.wantTarget, Depth: 3, ParentUrl: req.GetUrl(), DiscoveredAt: timestamppb.New(now),
					Source: crawlv1.Source_SOURCE_REDIRECT, AnchorText: "p", SerpEngine: "bing", RedirectHops: tt.hops + 1,
				}
				if !proto.Equal(r.Target, want) {
					t.Errorf("target %v, want %v", r.Target, want)
				}
			}
			if (tt.wantRedirect == RedirectInvalid) != (r.RedirectErr != nil) {
				t.Errorf("redirect error %v", r.RedirectErr)
			}

			if tt.wantProxy == "" {
				if r.Proxy != nil {
					t.Errorf("proxy feedback %v, want none", r.Proxy)
				}
			} else if r.Proxy.GetOutcome() != tt.wantProxy || r.Proxy.GetProxyId() != "p1" || r.Proxy.GetLatencyUs() != 30000 {
				t.Errorf("proxy feedback %v, want outcome %s", r.Proxy, tt.wantProxy)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	o := Options{RetryBackoff: 5 * time.Second, MaxRetryBackoff: 30 * time.Second}
	tests := []struct {
		attempt uint32
		jitter  string // "none" or "all"
		want    time.Duration
	}{
		{0, "none", 2500 * time.Millisecond},
		{0, "all", 5 * time.Second},
		{1, "none", 5 * time.Second},
		{2, "all", 20 * time.Second},
		{3, "all", 30 * time.Second}, // 40s capped
		{30, "none", 15 * time.Second},
	}
	for _, tt := range tests {
		o.Jitter = func(n int64) int64 {
			if tt.jitter == "all" {
				return n - 1
			}
			return 0
		}
		if got := Backoff(o, tt.attempt); got != tt.want {
			t.Errorf("attempt %d, jitter %s: %v, want %v", tt.attempt, tt.jitter, got, tt.want)
		}
	}
}

func TestFetchLogRow(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 987654321, time.UTC)
	page := &crawlv1.FetchedPage{
		CrawlId: "c1", Url: "http://a.example/p", UrlFp: 42, Partition: 7, Attempt: 70000, FetchedAt: timestamppb.New(at),
		StatusCode: 200, ErrorKind: "", BodyBytes: -1, ContentType: "text/html", FetchDurationUs: 12345,
		RedirectLocation: "", Depth: 3,
	}
	want := rows.FetchLogRow{
		CrawlID: "c1", URL: "http://a.example/p", URLFP: 42, Host: "a.example", Partition: 7, Attempt: 65535,
		FetchedAt: at, FetchedAtMs: 987, Status: 200, ContentType: "text/html", DurationMs: 12, Depth: 3, Fetcher: "f-1",
		Final: true,
	}
	if got := FetchLogRow(page, "a.example", "f-1"); got != want {
		t.Fatalf("row\n %+v\nwant\n %+v", got, want)
	}
	page.WillRetry = true
	want.Final = false
	if got := FetchLogRow(page, "a.example", "f-1"); got != want {
		t.Fatalf("row of an attempt that will be retried\n %+v\nwant\n %+v", got, want)
	}
}

func TestErrorMessageTruncated(t *testing.T) {
	long := strings.Repeat("é", 600) // 1200 bytes
	r := Of(opts, Attempt{Req: request(0, 0), Host: "a.example"}, &httpfetch.Response{Start: start, Kind: failure.Other, Err: errors.New(long)}, now)
	if msg := r.Page.GetErrorMessage(); len(msg) != 1000 || msg != long[:1000] {
		t.Fatalf("message of %d bytes, want the first 1000 (500 runes)", len(msg))
	}
	odd := "x" + long
	r = Of(opts, Attempt{Req: request(0, 0), Host: "a.example"}, &httpfetch.Response{Start: start, Kind: failure.Other, Err: errors.New(odd)}, now)
	if msg := r.Page.GetErrorMessage(); len(msg) != 999 {
		t.Fatalf("message of %d bytes, want 999 (cut before a rune)", len(msg))
	}
}

// TestValidatorsKept: the fetch log keeps the validators of every answer,
// those of a 304 completed with the request's where the answer gave none
// (they still hold), so that the next crawl asks conditionally; the page
// carries the crawl whose document a 304 carries over.
func TestValidatorsKept(t *testing.T) {
	tests := []struct {
		name           string
		reqETag, reqLM string
		status         int
		header         map[string]string
		wantETag       string
		wantLM         string
	}{
		{name: "200 with both", status: 200, header: map[string]string{"etag": `"v2"`, "last-modified": "Fri, 02 Jan 2026 00:00:00 GMT"},
			wantETag: `"v2"`, wantLM: "Fri, 02 Jan 2026 00:00:00 GMT"},
		{name: "200 without validators", reqETag: `"v1"`, status: 200, header: map[string]string{}},
		{name: "304 without validators keeps the request's", reqETag: `"v1"`, reqLM: "Thu, 01 Jan 2026 00:00:00 GMT", status: 304,
			header: map[string]string{"date": "x"}, wantETag: `"v1"`, wantLM: "Thu, 01 Jan 2026 00:00:00 GMT"},
		{name: "304 with a new etag keeps it", reqETag: `"v1"`, reqLM: "Thu, 01 Jan 2026 00:00:00 GMT", status: 304,
			header: map[string]string{"etag": `"v1b"`}, wantETag: `"v1b"`, wantLM: "Thu, 01 Jan 2026 00:00:00 GMT"},
		{name: "304 to a request without validators", status: 304, header: nil},
		{name: "404 keeps none of the request's", reqETag: `"v1"`, status: 404, header: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(0, 0)
			req.Etag, req.LastModified, req.DocumentCrawlId = tt.reqETag, tt.reqLM, "c0"
			var hdr map[string]string
			if tt.header != nil {
				hdr = maps.Clone(tt.header)
			}
			res := &httpfetch.Response{Start: start, Status: tt.status, Header: hdr}
			if tt.status == 404 {
				res.Err = &failure.StatusError{Code: 404}
			}
			r := Of(opts, Attempt{Req: req, Host: "a.example"}, res, now)
			if r.Row.ETag != tt.wantETag || r.Row.LastModified != tt.wantLM {
				t.Errorf("row validators %q %q, want %q %q", r.Row.ETag, r.Row.LastModified, tt.wantETag, tt.wantLM)
			}
			if r.Page.GetDocumentCrawlId() != "c0" {
				t.Errorf("page document_crawl_id %q, want c0", r.Page.GetDocumentCrawlId())
			}
			if !maps.Equal(res.Header, hdr) {
				t.Errorf("the response's headers changed: %v, were %v", res.Header, hdr)
			}
		})
	}
}

// TestOptionsWithDefaults: zero fields take their defaults; a back-off cap
// below the first back-off is raised; a negative MaxRedirects (no target
// followed) and a set instance are kept.
func TestOptionsWithDefaults(t *testing.T) {
	tests := []struct {
		name                string
		in                  Options
		attempts, redirects int
		backoff, maxBackoff time.Duration
	}{
		{"zero", Options{}, DefaultMaxAttempts, DefaultMaxRedirects, DefaultRetryBackoff, DefaultMaxRetryBackoff},
		{"set", Options{MaxAttempts: 1, MaxRedirects: -1, RetryBackoff: time.Second, MaxRetryBackoff: 2 * time.Second}, 1, -1, time.Second, 2 * time.Second},
		{"cap below the first back-off", Options{RetryBackoff: time.Hour, MaxRetryBackoff: time.Second}, DefaultMaxAttempts, DefaultMaxRedirects, time.Hour, time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.InstanceID = "f1"
			got := tt.in.WithDefaults()
			if got.MaxAttempts != tt.attempts || got.MaxRedirects != tt.redirects || got.RetryBackoff != tt.backoff || got.MaxRetryBackoff != tt.maxBackoff {
				t.Errorf("got %+v", got)
			}
			if got.Jitter == nil || got.InstanceID != "f1" {
				t.Errorf("jitter set %v, instance %q", got.Jitter != nil, got.InstanceID)
			}
			if j := got.Jitter(10); j < 0 || j >= 10 {
				t.Errorf("jitter(10) = %d", j)
			}
		})
	}
}
