// Package outcome decides what one fetch attempt leaves behind: the
// FetchedPage published to the parser, the fetch-log row, the next attempt
// of a transient failure (with its back-off), the target of a redirect
// handed back to the scheduler, the proxy's feedback. It is a pure
// function of the request, the response and the time: no Kafka, no
// ClickHouse, no clock of its own. The Kafka adapter (internal/consume)
// encodes what it returns, publishes it and acks the request once it is
// durable.
//
// A redirect is never followed inline: its target goes back through the
// scheduler like a link, so that every URL the fetcher requests has met the
// seen set and waits its own host's delay in its own partition.
package outcome

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// Defaults of Options (WithDefaults), which the configuration's flags
// start from.
const (
	DefaultMaxAttempts     = 3
	DefaultRetryBackoff    = 5 * time.Second
	DefaultMaxRetryBackoff = 10 * time.Minute
	DefaultMaxRedirects    = 5
)

// Options are the fetcher's retry and redirect settings
// (consume.Options.Outcome). Of is given them with their defaults
// (WithDefaults): it uses every field as given.
type Options struct {
	InstanceID string // written to the fetch-log row and its page's header
	// MaxAttempts bounds the attempts of one URL: a transient failure
	// (failure.IsRetryable) of attempt n < MaxAttempts-1 queues attempt
	// n+1 durably on the fetch topic (default 3; 1 disables retries).
	MaxAttempts int
	// RetryBackoff is the back-off before the second attempt, doubled per
	// attempt up to MaxRetryBackoff, jittered into [half, all] of it. A
	// server's Retry-After, when longer, wins.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// MaxRedirects: the target of a redirect answer to a URL reached
	// through MaxRedirects redirects already is not followed
	// (failure.TooManyRedirects). Default 5; negative: no target is
	// followed.
	MaxRedirects int
	// Jitter returns a uniform value in [0, n) (default math/rand/v2).
	Jitter func(n int64) int64
}

// WithDefaults returns o with its zero fields at their defaults.
func (o Options) WithDefaults() Options {
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.MaxRetryBackoff < o.RetryBackoff {
		o.MaxRetryBackoff = max(DefaultMaxRetryBackoff, o.RetryBackoff)
	}
	if o.MaxRedirects == 0 {
		o.MaxRedirects = DefaultMaxRedirects
	}
	if o.Jitter == nil {
		o.Jitter = rand.Int64N
	}
	return o
}

// Attempt is one request as the fetcher made it.
type Attempt struct {
	Req       *crawlv1.FetchRequest
	Host      string // politeness key of Req's URL; "" when the URL is invalid
	Partition int    // of the fetch topic it was read from
	// RetryAfter is the earliest useful retry (a server's Retry-After, a
	// robots.txt's next check); zero when none.
	RetryAfter time.Time
}

// Redirect is what became of a redirect answer's Location.
type Redirect string

// Redirect verdicts (the label of the fetcher's redirects metric).
const (
	RedirectNone      Redirect = ""          // not a redirect answer
	RedirectPublished Redirect = "published" // the target goes to the scheduler
	RedirectLoop      Redirect = "loop"      // the target is the requested resource
	RedirectTooMany   Redirect = "too_many"  // the chain reached MaxRedirects
	RedirectInvalid   Redirect = "invalid"   // the target is no crawlable URL
)

// Proxy outcomes of ProxyFeedback.
const (
	ProxySuccess = "success" // an answer came back (the origin's, whatever its status)
	ProxyTimeout = "timeout" // no answer in time, or too slow
	ProxyBlocked = "blocked" // 403, 407 or 429 through the proxy
	ProxyError   = "error"   // any other failure through the proxy
)

// Result is what one attempt publishes and records. The adapter publishes
// Retry, Target and Proxy (those not nil) before Page, so that a published
// page proves its whole outcome was published.
type Result struct {
	Page *crawlv1.FetchedPage
	Row  rows.FetchLogRow // derived from Page (FetchLogRow)
	// Retry is the next attempt (nil: none); keyed by the attempt's host
	// on the fetch topic. Page.WillRetry is set with it.
	Retry *crawlv1.FetchRequest
	// Exhausted: the failure was retryable but no attempt is left.
	Exhausted bool
	// Target is the redirect target for the scheduler (nil: none), keyed
	// by its own politeness key on the discovered topic.
	Target   *crawlv1.DiscoveredURL
	Redirect Redirect
	// RedirectErr says why an invalid target was not followed.
	RedirectErr error
	// Proxy is the proxy's feedback when the request went through one
	// (nil: direct); keyed by its ProxyId.
	Proxy *crawlv1.ProxyFeedback
}

// Of returns the outcome of attempt a answered by res, decided at now. It
// does not modify res.
func Of(o Options, a Attempt, res *httpfetch.Response, now time.Time) Result {
	req := a.Req
	url := req.GetUrl()
	kind, resErr := res.Kind, res.Err
	var r Result
	var target string
	target, r.Redirect, r.RedirectErr = redirect(o, req, res)
	switch r.Redirect {
	case RedirectLoop:
		kind, resErr = failure.RedirectLoop, fmt.Errorf("redirect from %s to itself (%s)", url, target)
	case RedirectTooMany:
		kind, resErr = failure.TooManyRedirects, fmt.Errorf("redirect to %s after %d redirects", target, req.GetRedirectHops())
	}
	errMsg := ""
	if resErr != nil {
		errMsg = truncate(resErr.Error(), 1000)
	}
	parent := req.GetParentUrl()
	redirectedFrom := ""
	if req.GetRedirectHops() > 0 {
		redirectedFrom = parent
	}
	r.Page = &crawlv1.FetchedPage{
		CrawlId:          req.GetCrawlId(),
		Url:              url,
		UrlFp:            req.GetUrlFp(),
		Depth:            req.GetDepth(),
		ParentUrl:        parent,
		FetchedAt:        timestamppb.New(res.Start),
		StatusCode:       uint32(res.Status),
		ErrorKind:        string(kind),
		ErrorMessage:     errMsg,
		ContentType:      res.ContentType,
		Charset:          res.Charset,
		Headers:          res.Header,
		FetchDurationUs:  res.Duration.Microseconds(),
		TtfbUs:           res.TTFB.Microseconds(),
		Body:             res.Body,
		Truncated:        res.Truncated,
		BodyBytes:        res.BodyBytes,
		RedirectLocation: res.RedirectLocation,
		AnchorText:       req.GetAnchorText(),
		Partition:        uint32(a.Partition),
		SerpEngine:       req.GetSerpEngine(),
		Attempt:          req.GetAttempt(),
		Unchanged:        res.Status == 304,
		RedirectedFrom:   redirectedFrom,
		DocumentCrawlId:  req.GetDocumentCrawlId(),
		Rendered:         res.Rendered != "",
		RenderOutcome:    res.Rendered,
	}
	if res.Status == 304 {
		r.Page.Headers = validatorsInForce(res.Header, req)
	}
	r.Retry, r.Exhausted = retry(o, a, kind, resErr, now)
	r.Page.WillRetry = r.Retry != nil
	if r.Redirect == RedirectPublished {
		r.Target = &crawlv1.DiscoveredURL{
			CrawlId:      req.GetCrawlId(),
			Url:          target,
			Depth:        req.GetDepth(),
			ParentUrl:    url,
			DiscoveredAt: timestamppb.New(now),
			Source:       crawlv1.Source_SOURCE_REDIRECT,
			AnchorText:   req.GetAnchorText(),
			SerpEngine:   req.GetSerpEngine(),
			RedirectHops: req.GetRedirectHops() + 1,
		}
	}
	if res.ProxyID != "" {
		r.Proxy = &crawlv1.ProxyFeedback{
			ProxyId:   res.ProxyID,
			Host:      res.Host,
			Outcome:   ProxyOutcome(res),
			LatencyUs: res.Duration.Microseconds(),
			At:        timestamppb.New(res.Start),
		}
	}
	r.Row = FetchLogRow(r.Page, a.Host, o.InstanceID)
	r.Row.Priority, r.Row.PriorityReason = req.GetPriority(), req.GetPriorityReason()
	return r
}

// validatorsInForce returns the headers of a 304 answer to req with the
// validators the request sent where the answer gave none of its own: they
// still hold (the page did not change), and the fetch log keeps them for
// the next crawl's conditional request (FetchLogRow). header is not
// modified.
func validatorsInForce(header map[string]string, req *crawlv1.FetchRequest) map[string]string {
	etag, lm := req.GetEtag(), req.GetLastModified()
	if (etag == "" || header["etag"] != "") && (lm == "" || header["last-modified"] != "") {
		return header
	}
	out := make(map[string]string, len(header)+2)
	maps.Copy(out, header)
	if etag != "" && out["etag"] == "" {
		out["etag"] = etag
	}
	if lm != "" && out["last-modified"] == "" {
		out["last-modified"] = lm
	}
	return out
}

// redirect decides whether the target of a redirect answer is followed:
// not when it is the requested resource itself (RedirectLoop), not when
// the URL was reached through MaxRedirects redirects already
// (RedirectTooMany), not when it is no crawlable URL (RedirectInvalid). A
// longer loop (a → b → a) ends at the scheduler, which drops the second a
// as a duplicate.
func redirect(o Options, req *crawlv1.FetchRequest, res *httpfetch.Response) (string, Redirect, error) {
	if res.RedirectLocation == "" {
		return "", RedirectNone, nil
	}
	target, err := urlcanon.Canonicalize(res.RedirectLocation)
	switch {
	case err != nil:
		return "", RedirectInvalid, err
	case urlcanon.Key(target) == urlcanon.Key(req.GetUrl()):
		return target, RedirectLoop, nil
	case int(req.GetRedirectHops()) >= o.MaxRedirects:
		return target, RedirectTooMany, nil
	default:
		return target, RedirectPublished, nil
	}
}

// retry returns the next attempt of a's request when its failure is
// transient and attempts remain: the same request with attempt+1 and a
// not_before after an exponential back-off with jitter (or a.RetryAfter,
// when later). exhausted: transient, but no attempt is left.
func retry(o Options, a Attempt, kind failure.Kind, err error, now time.Time) (next *crawlv1.FetchRequest, exhausted bool) {
	if kind != failure.RobotsUnavailable && !failure.IsRetryable(&failure.Error{Kind: kind, Err: err}) {
		return nil, false
	}
	attempt := a.Req.GetAttempt()
	if int(attempt)+1 >= o.MaxAttempts {
		return nil, true
	}
	notBefore := now.Add(Backoff(o, attempt))
	if a.RetryAfter.After(notBefore) {
		notBefore = a.RetryAfter
	}
	next = proto.CloneOf(a.Req)
	next.Attempt = attempt + 1
	next.NotBefore = timestamppb.New(notBefore)
	return next, false
}

// Backoff is RetryBackoff * 2^attempt capped at MaxRetryBackoff, then
// jittered uniformly into [half, all] of it.
func Backoff(o Options, attempt uint32) time.Duration {
	d := o.RetryBackoff
	for i := uint32(0); i < attempt && d < o.MaxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, o.MaxRetryBackoff)
	half := d / 2
	return half + time.Duration(o.Jitter(int64(d-half)+1))
}

// ProxyOutcome classifies a fetch made through a proxy.
func ProxyOutcome(res *httpfetch.Response) string {
	switch {
	case res.Status == 403 || res.Status == 407 || res.Status == 429:
		return ProxyBlocked
	case res.Kind == failure.Timeout || res.Kind == failure.TooSlow:
		return ProxyTimeout
	case res.Status > 0:
		return ProxySuccess
	default:
		return ProxyError
	}
}

// FetchLogRow returns the fetch-log row of the attempt page reports, made
// by fetcher; host is the politeness key of its URL. The row is derived
// from the page alone, so the one written with the page and the one
// rebuilt from it after its fetcher died are equal; the page carries no
// priority, so its Priority and PriorityReason are left to the caller,
// which has the request (Of sets the request's as fetched).
func FetchLogRow(page *crawlv1.FetchedPage, host, fetcher string) rows.FetchLogRow {
	at := page.GetFetchedAt().AsTime()
	return rows.FetchLogRow{
		CrawlID:          page.GetCrawlId(),
		URL:              page.GetUrl(),
		URLFP:            page.GetUrlFp(),
		Host:             host,
		Partition:        uint16(page.GetPartition()),
		Attempt:          uint16(min(page.GetAttempt(), 65535)),
		FetchedAt:        at,
		FetchedAtMs:      uint16(at.Nanosecond() / int(time.Millisecond)),
		Status:           uint16(page.GetStatusCode()),
		ErrorKind:        page.GetErrorKind(),
		ErrorMessage:     page.GetErrorMessage(),
		Bytes:            uint64(max(page.GetBodyBytes(), 0)),
		ContentType:      page.GetContentType(),
		WarcFile:         page.GetWarcFile(),
		WarcOffset:       page.GetWarcOffset(),
		DurationMs:       uint32(page.GetFetchDurationUs() / 1000),
		RedirectLocation: page.GetRedirectLocation(),
		Depth:            uint16(min(page.GetDepth(), 65535)),
		Fetcher:          fetcher,
		Final:            !page.GetWillRetry(),
		ETag:             page.GetHeaders()["etag"],
		LastModified:     page.GetHeaders()["last-modified"],
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
