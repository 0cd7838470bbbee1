package emit

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
)

var (
	start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	now   = start.Add(2 * time.Second)
)

var topics = kafkaio.Topics{
	Discovered: "discovered", Fetch: "fetch", Fetched: "fetched",
	ProxyFeedback: "proxy-feedback", HostState: "host-state",
}

// newEncoder retries after exactly half the back-off (Jitter always 0),
// 2s for a first attempt, and follows redirect chains of 2.
func newEncoder() *Encoder {
	return New(Options{Topics: topics, Now: func() time.Time { return now }, Outcome: outcome.Options{
		InstanceID: "f-1", MaxAttempts: 3, RetryBackoff: 4 * time.Second, MaxRetryBackoff: time.Minute,
		MaxRedirects: 2, Jitter: func(int64) int64 { return 0 },
	}})
}

// newTask returns the task of req read from its record, on host, and the
// request as a turn decodes it.
func newTask(t *testing.T, req *crawlv1.FetchRequest, host string) (*partition.Task, *crawlv1.FetchRequest) {
	t.Helper()
	value, schema, err := crawlmsg.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	task := partition.NewTask(req, partition.TaskOf{Value: value, Schema: schema, Host: host, Crawl: req.GetCrawlId()}, start)
	decoded, err := task.Request()
	if err != nil {
		t.Fatal(err)
	}
	return task, decoded
}

func request(url string, attempt uint32) *crawlv1.FetchRequest {
	return &crawlv1.FetchRequest{
		CrawlId: "c1", Url: url, UrlFp: 42, Depth: 3, ParentUrl: "http://a.example/",
		Attempt: attempt, Priority: 2, PriorityReason: "sitemap", ScheduledAt: timestamppb.New(start.Add(-time.Minute)),
	}
}

// where lists the topic and key of msgs.
func where(msgs []kafka.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Topic + " " + string(m.Key)
	}
	return out
}

// decode decodes the message of msgs on topic into m.
func decode(t *testing.T, msgs []kafka.Message, topic string, m proto.Message) {
	t.Helper()
	for _, msg := range msgs {
		if msg.Topic == topic {
			if err := kafkaio.Decode(msg, m); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no message on %s among %v", topic, where(msgs))
}

func header(msg kafka.Message, key string) (string, bool) {
	for _, hd := range msg.Headers {
		if hd.Key == key {
			return string(hd.Value), true
		}
	}
	return "", false
}

func TestOutcome(t *testing.T) {
	statusErr := func(code int) error { return &failure.StatusError{Code: code} }
	tests := []struct {
		name    string
		url     string
		host    string
		attempt uint32
		res     httpfetch.Response
		state   *politeness.HostState
		warc    string

		wantMsgs  []string // topic and key of Msgs, in order
		wantPage  string   // key of the page
		wantKind  failure.Kind
		wantRetry bool
		check     func(t *testing.T, o Outcome)
	}{
		{
			name: "503 with retries left", url: "http://a.example/p", host: "a.example",
			res:      httpfetch.Response{Status: 503, Err: statusErr(503)},
			wantMsgs: []string{"fetch a.example"}, wantPage: "a.example", wantRetry: true,
			check: func(t *testing.T, o Outcome) {
				var next crawlv1.FetchRequest
				decode(t, o.Msgs, "fetch", &next)
				if next.GetUrl() != "http://a.example/p" || next.GetAttempt() != 1 || !next.GetNotBefore().AsTime().Equal(now.Add(2*time.Second)) ||
					next.GetPriority() != 2 || next.GetPriorityReason() != "sitemap" {
					t.Errorf("next attempt %v, want attempt 1 of the same request at %v", &next, now.Add(2*time.Second))
				}
				if !o.Retried || o.Exhausted || o.RetryErr != nil {
					t.Errorf("retried %v, exhausted %v, %v", o.Retried, o.Exhausted, o.RetryErr)
				}
			},
		},
		{
			name: "503 of the last attempt", url: "http://a.example/p", host: "a.example", attempt: 2,
			res:      httpfetch.Response{Status: 503, Err: statusErr(503)},
			wantPage: "a.example",
			check: func(t *testing.T, o Outcome) {
				if o.Retried || !o.Exhausted {
					t.Errorf("retried %v, exhausted %v: want exhausted", o.Retried, o.Exhausted)
				}
			},
		},
		{
			name: "redirect", url: "http://a.example/p", host: "a.example",
			res:      httpfetch.Response{Status: 301, Kind: failure.Redirect, RedirectLocation: "HTTP://B.example:80/q"},
			wantMsgs: []string{"discovered b.example"}, wantPage: "a.example", wantKind: failure.Redirect,
			check: func(t *testing.T, o Outcome) {
				var d crawlv1.DiscoveredURL
				decode(t, o.Msgs, "discovered", &d)
				if d.GetUrl() != "http://b.example/q" || d.GetParentUrl() != "http://a.example/p" || d.GetSource() != crawlv1.Source_SOURCE_REDIRECT ||
					d.GetRedirectHops() != 1 || d.GetCrawlId() != "c1" || d.GetDepth() != 3 {
					t.Errorf("redirect target %v", &d)
				}
				if o.Redirect != outcome.RedirectPublished || o.Target != "http://b.example/q" {
					t.Errorf("redirect %q to %q", o.Redirect, o.Target)
				}
			},
		},
		{
			name: "uncrawlable redirect target", url: "http://a.example/p", host: "a.example",
			res:      httpfetch.Response{Status: 302, Kind: failure.Redirect, RedirectLocation: "mailto:x@a.example"},
			wantPage: "a.example", wantKind: failure.Redirect,
			check: func(t *testing.T, o Outcome) {
				if o.Redirect != outcome.RedirectInvalid || o.RedirectErr == nil || o.Target != "" {
					t.Errorf("redirect %q (%v) to %q, want invalid with its error", o.Redirect, o.RedirectErr, o.Target)
				}
			},
		},
		{
			name: "invalid URL", url: "no url at all", host: "",
			res:      httpfetch.Response{Kind: failure.InvalidURL, Err: errors.New("key url: bad")},
			wantPage: "no url at all", wantKind: failure.InvalidURL,
		},
		{
			name: "through a proxy", url: "http://a.example/p", host: "a.example",
			res:      httpfetch.Response{Status: 200, ProxyID: "p1", Host: "a.example"},
			wantMsgs: []string{"proxy-feedback p1"}, wantPage: "a.example",
			check: func(t *testing.T, o Outcome) {
				var fb crawlv1.ProxyFeedback
				decode(t, o.Msgs, "proxy-feedback", &fb)
				if fb.GetProxyId() != "p1" || fb.GetOutcome() != outcome.ProxySuccess || o.Proxy != outcome.ProxySuccess {
					t.Errorf("proxy feedback %v, outcome %q", &fb, o.Proxy)
				}
			},
		},
		{
			name: "host state and archive", url: "http://a.example/p", host: "a.example", warc: "f-1-00001.warc.gz",
			res:      httpfetch.Response{Status: 200},
			state:    &politeness.HostState{Next: now.Add(time.Minute), Delay: 10 * time.Second, BackoffLevel: 2},
			wantMsgs: []string{"host-state a.example"}, wantPage: "a.example",
			check: func(t *testing.T, o Outcome) {
				var hp crawlv1.HostPoliteness
				decode(t, o.Msgs, "host-state", &hp)
				if hp.GetHost() != "a.example" || hp.GetDelayMs() != 10000 || hp.GetBackoffLevel() != 2 || hp.GetFetcher() != "f-1" ||
					!hp.GetNextAllowed().AsTime().Equal(now.Add(time.Minute)) {
					t.Errorf("host state %v", &hp)
				}
				if o.Row.WarcFile != "f-1-00001.warc.gz" || o.Row.WarcOffset != 512 {
					t.Errorf("row archived at %q %d", o.Row.WarcFile, o.Row.WarcOffset)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, req := newTask(t, request(tt.url, tt.attempt), tt.host)
			task.HostState = tt.state
			task.WarcFile, task.WarcOffset = tt.warc, map[bool]int64{true: 512}[tt.warc != ""]
			res := tt.res
			res.Start = start
			o, err := newEncoder().Outcome(4, task, req, &res)
			if err != nil {
				t.Fatal(err)
			}
			if got := where(o.Msgs); !slices.Equal(got, tt.wantMsgs) {
				t.Errorf("messages %q, want %q", got, tt.wantMsgs)
			}
			if o.Page.Topic != "fetched" || string(o.Page.Key) != tt.wantPage {
				t.Errorf("page on %s keyed %q, want fetched keyed %q", o.Page.Topic, o.Page.Key, tt.wantPage)
			}
			if f, _ := header(o.Page, published.FetcherHeader); f != "f-1" {
				t.Errorf("fetcher header %q, want f-1", f)
			}
			var page crawlv1.FetchedPage
			if err := kafkaio.Decode(o.Page, &page); err != nil {
				t.Fatal(err)
			}
			if page.GetUrl() != tt.url || page.GetPartition() != 4 || page.GetWillRetry() != tt.wantRetry || page.GetWarcFile() != tt.warc ||
				failure.Kind(page.GetErrorKind()) != tt.wantKind || page.GetStatusCode() != uint32(tt.res.Status) {
				t.Errorf("page %v", &page)
			}
			if o.Kind != tt.wantKind || o.Row.URL != tt.url || o.Row.Host != tt.host || o.Row.Fetcher != "f-1" || o.Row.Priority != 2 {
				t.Errorf("kind %q, row %+v", o.Kind, o.Row)
			}
			if task.HostState != nil {
				t.Error("the host state was left on the task: published twice")
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

// TestDeferEstimated: a copy deferred for a full queue, due at an
// estimate, carries the request's own not_before beside it (0 for none);
// read again and deferred again, it carries the same own not_before, not
// the estimate; a copy deferred for its own not_before carries none.
func TestDeferEstimated(t *testing.T) {
	estimate := now.Add(95 * time.Second)
	e := newEncoder()

	plain, req := newTask(t, request("http://a.example/p", 1), "a.example")
	m, err := e.Defer(plain, req, estimate, true)
	if err != nil {
		t.Fatal(err)
	}
	if own, ok := Due(m); !ok || own != 0 {
		t.Errorf("Due of a request with no not_before = %d %v, want 0 true", own, ok)
	}

	backedOff := request("http://a.example/q", 2)
	retryAt := now.Add(30 * time.Second)
	backedOff.NotBefore = timestamppb.New(retryAt)
	retry, req := newTask(t, backedOff, "a.example")
	if m, err = e.Defer(retry, req, estimate, true); err != nil {
		t.Fatal(err)
	}
	own, ok := Due(m)
	if !ok || own != retryAt.UnixNano() {
		t.Fatalf("Due of a retry = %d %v, want %d true", own, ok, retryAt.UnixNano())
	}
	// Read again: the task knows its own not_before apart from the estimate.
	again := partition.NewTask(req, partition.TaskOf{Value: m.Value, Host: "a.example", Crawl: "c1", Redefer: WasDeferred(m), Estimated: ok, Due: own}, now)
	if again.OwnNotBefore() != retryAt.UnixNano() {
		t.Errorf("own not_before read again %d, want %d", again.OwnNotBefore(), retryAt.UnixNano())
	}
	if m, err = e.Defer(again, req, estimate.Add(time.Minute), true); err != nil {
		t.Fatal(err)
	}
	if own, ok := Due(m); !ok || own != retryAt.UnixNano() {
		t.Errorf("Due deferred again = %d %v, want %d true", own, ok, retryAt.UnixNano())
	}

	if m, err = e.Defer(plain, req, estimate, false); err != nil {
		t.Fatal(err)
	}
	if _, ok := Due(m); ok {
		t.Error("a copy due at its own not_before carries an estimate mark")
	}
	m.Headers = append(m.Headers, kafka.Header{Key: dueHeader, Value: []byte("soon")})
	if _, ok := Due(m); ok {
		t.Error("an unreadable due header was taken as an estimate mark")
	}
}

// TestDeferAndHold: a deferred copy is the same request due later, keyed
// by its host and marked as deferred; a held one is not marked.
func TestDeferAndHold(t *testing.T) {
	at := now.Add(time.Hour)
	for _, deferred := range []bool{true, false} {
		t.Run(fmt.Sprintf("deferred=%v", deferred), func(t *testing.T) {
			task, req := newTask(t, request("http://a.example/p", 1), "a.example")
			e := newEncoder()
			var m kafka.Message
			var err error
			if deferred {
				m, err = e.Defer(task, req, at, false)
			} else {
				m, err = e.Hold(task, req, at)
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Topic != "fetch" || string(m.Key) != "a.example" {
				t.Errorf("copy on %s keyed %q, want fetch keyed a.example", m.Topic, m.Key)
			}
			if WasDeferred(m) != deferred {
				t.Errorf("WasDeferred %v, want %v", WasDeferred(m), deferred)
			}
			if v, ok := header(m, deferredHeader); deferred && (!ok || v != "1") {
				t.Errorf("deferred header %q %v", v, ok)
			}
			var got crawlv1.FetchRequest
			if err := kafkaio.Decode(m, &got); err != nil {
				t.Fatal(err)
			}
			if !got.GetNotBefore().AsTime().Equal(at) {
				t.Errorf("not_before %v, want %v", got.GetNotBefore().AsTime(), at)
			}
			got.NotBefore = nil
			if !proto.Equal(&got, req) {
				t.Errorf("copy %v, want %v", &got, req)
			}
			if req.GetNotBefore() != nil {
				t.Error("the task's request was changed")
			}
			if kafkaio.Schema(m) != crawlmsg.SchemaOf(req) {
				t.Errorf("schema %q, want %q", kafkaio.Schema(m), crawlmsg.SchemaOf(req))
			}
		})
	}
	if WasDeferred(kafka.Message{}) || kafkaio.Schema(kafka.Message{}) != "" {
		t.Error("a record without headers reads as deferred or with a schema")
	}
}

// TestHostStates: every state is a record of the host-state topic keyed
// by its host, written by this fetcher now.
func TestHostStates(t *testing.T) {
	msgs := newEncoder().HostStates(map[string]politeness.HostState{
		"a.example": {Next: now.Add(time.Minute), Delay: time.Second},
		"b.example": {Next: now.Add(time.Hour), Delay: 5 * time.Second, BackoffLevel: 3},
	})
	got := where(msgs)
	slices.Sort(got)
	if want := []string{"host-state a.example", "host-state b.example"}; !slices.Equal(got, want) {
		t.Fatalf("host states %q, want %q", got, want)
	}
	for _, m := range msgs {
		var hp crawlv1.HostPoliteness
		if err := kafkaio.Decode(m, &hp); err != nil {
			t.Fatal(err)
		}
		if hp.GetHost() != string(m.Key) || hp.GetFetcher() != "f-1" || !hp.GetUpdatedAt().AsTime().Equal(now) {
			t.Errorf("host state %v", &hp)
		}
		if hp.GetHost() == "b.example" && (hp.GetDelayMs() != 5000 || hp.GetBackoffLevel() != 3) {
			t.Errorf("host state of b.example %v", &hp)
		}
	}
}
