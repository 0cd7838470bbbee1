// Package emit encodes the records the fetcher's Kafka adapter (package
// consume) produces: the outcome of an attempt (outcome.Of) as its
// FetchedPage, next attempt, redirect target, host state and proxy
// feedback, with its fetch-log row; the copies of requests put back on
// the fetch topic (deferred, or held for a paused crawl); the host states
// handed to a partition's next owner; the Sitemap lines of a robots.txt as
// discovered URLs; and the stored form of robots.txt.
//
// It knows the topics, the keys, the headers and the encoding of the
// messages; it holds no partition state, produces nothing and acks
// nothing. Nor does it count or log: what became of an outcome's parts (a
// retry queued, exhausted or not encodable, a redirect's fate, a proxy's
// outcome) is returned for the adapter to count and log.
package emit

import (
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/published"
)

// Options configures an Encoder.
type Options struct {
	Topics kafkaio.Topics
	// Outcome are the retry and redirect settings of outcome.Of, as
	// given (the adapter defaults them). Its InstanceID names this
	// fetcher on every record that says who wrote it: the fetch-log row,
	// the FetchedPage's header (published.FetcherHeader), host states and
	// robots.txt rows.
	Outcome outcome.Options
	Now     func() time.Time // default time.Now
}

// Encoder encodes the fetcher's records. Safe for concurrent use.
type Encoder struct {
	o Options
}

// New returns an Encoder.
func New(o Options) *Encoder {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Encoder{o: o}
}

// Outcome is one attempt's records, encoded, and what became of the parts
// the adapter counts and logs.
type Outcome struct {
	// Msgs are the next attempt, the redirect target, the host state and
	// the proxy feedback, those there are: produced before Page, so that a
	// published page proves its whole outcome was published.
	Msgs []kafka.Message
	// Page is the FetchedPage (recorder.Outcome.Last), with the fetcher
	// header; its value is pooled (kafkaio.NewPooledMessage).
	Page kafka.Message
	Row  rows.FetchLogRow // the fetch-log row
	// Kind is the attempt's final error kind (a redirect loop or a chain
	// too long turns a redirect into a failure).
	Kind failure.Kind

	// Redirect is what became of a redirect answer's Location
	// (outcome.RedirectNone: not a redirect answer), and RedirectErr why
	// an invalid target is not followed.
	Redirect    outcome.Redirect
	RedirectErr error
	// Target is the URL of a published redirect target. TargetKeyErr: it
	// has no politeness key, and TargetErr: it did not encode; either way
	// it is not in Msgs.
	Target       string
	TargetKeyErr error
	TargetErr    error
	// Exhausted: the failure was retryable but no attempt is left.
	Exhausted bool
	// Retried: the next attempt is in Msgs. RetryErr: it did not encode,
	// and the page says no retry follows.
	Retried  bool
	RetryErr error
	// Proxy is the proxy's outcome (outcome.ProxySuccess…) when the
	// request went through one, "" when direct.
	Proxy string
}

// Outcome returns the records of one attempt of t's request req, read
// from partition part of the fetch topic and answered by res
// (outcome.Of), encoded: the next attempt, redirect target, host state
// (t.HostState, which it clears: a state is published once) and proxy
// feedback; the FetchedPage, to be produced after them; the fetch-log
// row; and the attempt's final error kind. The page and the row carry
// where the answer is archived (t.WarcFile, t.WarcOffset). An error says
// the page did not encode: the Outcome holds no record then, only what
// became of the other parts.
func (e *Encoder) Outcome(part int, t *partition.Task, req *crawlv1.FetchRequest, res *httpfetch.Response) (Outcome, error) {
	o := e.o
	r := outcome.Of(o.Outcome, outcome.Attempt{Req: req, Host: t.Host, Partition: part, RetryAfter: t.RetryAfterTime()}, res, o.Now())
	// Where the answer is archived: on the page too, so that a row rebuilt
	// from it (read-back after a crash) points at the record as well.
	r.Page.WarcFile, r.Page.WarcOffset = t.WarcFile, uint64(t.WarcOffset)
	r.Row.WarcFile, r.Row.WarcOffset = t.WarcFile, uint64(t.WarcOffset)
	out := Outcome{Redirect: r.Redirect, RedirectErr: r.RedirectErr, Exhausted: r.Exhausted}
	key := []byte(t.Host)
	if len(key) == 0 {
		key = []byte(req.GetUrl()) // invalid URL: any stable key
	}
	if r.Retry != nil {
		m, err := kafkaio.NewMessage(o.Topics.Fetch, []byte(t.Host), r.Retry)
		if err != nil {
			out.RetryErr = err
			r.Page.WillRetry = false
		} else {
			out.Retried = true
			out.Msgs = append(out.Msgs, m)
		}
	}
	if r.Target != nil {
		out.Target = r.Target.GetUrl()
		// The DiscoveredURL of a redirect target goes back through the
		// scheduler's dedup to whichever partition owns its host.
		if tkey, err := kafkaio.Key(r.Target.GetUrl()); err != nil {
			out.TargetKeyErr = err
		} else if m, err := kafkaio.NewMessage(o.Topics.Discovered, tkey, r.Target); err != nil {
			out.TargetErr = err
		} else {
			out.Msgs = append(out.Msgs, m)
		}
	}
	page, err := kafkaio.NewPooledMessage(o.Topics.Fetched, key, r.Page)
	if err != nil {
		out.Msgs = nil
		return out, fmt.Errorf("encode fetched page: %w", err)
	}
	page.Headers = append(page.Headers, kafka.Header{Key: published.FetcherHeader, Value: []byte(o.Outcome.InstanceID)})
	if st := t.HostState; st != nil {
		if m, err := hoststate.Message(o.Topics.HostState, t.Host, o.Outcome.InstanceID, *st, o.Now()); err == nil {
			out.Msgs = append(out.Msgs, m)
		}
		t.HostState = nil
	}
	if r.Proxy != nil {
		out.Proxy = r.Proxy.GetOutcome()
		if m, err := kafkaio.NewMessage(o.Topics.ProxyFeedback, []byte(r.Proxy.GetProxyId()), r.Proxy); err == nil {
			out.Msgs = append(out.Msgs, m)
		}
	}
	out.Page, out.Row, out.Kind = page, r.Row, failure.Kind(r.Page.GetErrorKind())
	return out, nil
}

// HostStates returns the records that hand the politeness state of the
// hosts of states to the next owner of their partition
// (hoststate.Message), on the host-state topic; a state that does not
// encode is left out.
func (e *Encoder) HostStates(states map[string]politeness.HostState) []kafka.Message {
	now := e.o.Now()
	var msgs []kafka.Message
	for host, st := range states {
		if m, err := hoststate.Message(e.o.Topics.HostState, host, e.o.Outcome.InstanceID, st, now); err == nil {
			msgs = append(msgs, m)
		}
	}
	return msgs
}
