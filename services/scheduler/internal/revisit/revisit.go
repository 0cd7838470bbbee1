// Package revisit is the adaptive re-crawl policy (seeds 003 and 004): from
// a fetch outcome and the URL's previous revisit state it computes the next
// state and the change-history row. Pure; the clock comes with the page.
//
// A page is "changed" when its content fingerprint differs from the
// previous visit's. The fingerprint is fingerprint.String of the raw body
// as fetched (decoded to UTF-8 by the fetcher): cheap, available in the
// fetch outcome without waiting for the parser, but sensitive to markup
// noise (a rotating ad or timestamp counts as a change). A 304 answer to a
// conditional request is "unchanged" and keeps the stored fingerprint.
//
// Interval: the first visit sets Initial; an unchanged visit doubles it up
// to Max; a changed one halves it down to Min. The next visit is due one
// interval after the fetch.
package revisit

import (
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
)

// Default bounds when a crawl's Revisit policy leaves them unset.
const (
	DefaultMinInterval = time.Hour
	DefaultMaxInterval = 30 * 24 * time.Hour
)

// Policy is a crawl's revisit policy with its defaults applied.
type Policy struct {
	Min, Max, Initial time.Duration
}

// FromSpec returns the policy of a crawl's Revisit message and whether
// revisiting is enabled. Unset bounds take the defaults; Initial defaults
// to Min; Max below Min is raised to Min; Initial is clamped into
// [Min, Max].
func FromSpec(r *crawlv1.Revisit) (Policy, bool) {
	if !r.GetEnabled() {
		return Policy{}, false
	}
	p := Policy{Min: r.GetMinInterval().AsDuration(), Max: r.GetMaxInterval().AsDuration(), Initial: r.GetInitialInterval().AsDuration()}
	if p.Min < time.Second {
		p.Min = DefaultMinInterval
		if r.GetMinInterval() != nil && r.GetMinInterval().AsDuration() > 0 {
			p.Min = time.Second // DateTime resolution
		}
	}
	if p.Max <= 0 {
		p.Max = max(DefaultMaxInterval, p.Min)
	}
	p.Max = max(p.Max, p.Min)
	if p.Initial <= 0 {
		p.Initial = p.Min
	}
	p.Initial = p.clamp(p.Initial)
	return p, true
}

func (p Policy) clamp(d time.Duration) time.Duration { return min(max(d, p.Min), p.Max) }

// Counts reports whether a fetch outcome is a visit the policy learns
// from: a final 2xx answer or a 304 to a conditional request. Failures,
// redirects and attempts that will be retried are not (a revisit whose
// fetch failed stays due and is re-sent when its lease runs out).
func Counts(page *crawlv1.FetchedPage) bool {
	if page.GetWillRetry() {
		return false
	}
	if NotModified(page) {
		return true
	}
	return page.GetErrorKind() == "" && page.GetStatusCode() >= 200 && page.GetStatusCode() < 300
}

// NotModified reports a 304 answer to a conditional request.
func NotModified(page *crawlv1.FetchedPage) bool {
	return page.GetUnchanged() || page.GetStatusCode() == 304
}

// ContentFP is the content fingerprint of a fetched body (see the package
// doc for the choice).
func ContentFP(body []byte) uint64 { return fingerprint.String(string(body)) }

// Observe returns the URL's next revisit state and its change-history row
// after the visit page (which must Count). prev is the stored state, nil
// for the first visit; partition and host are the URL's.
func Observe(p Policy, prev *rows.RevisitRow, page *crawlv1.FetchedPage, partition int, host string, now time.Time) (rows.RevisitRow, rows.ChangeRow) {
	at := VisitedAt(page, now)
	next := rows.RevisitRow{
		LastVisit: at.Truncate(time.Second),
		CrawlID:   page.GetCrawlId(),
		Partition: uint16(partition),
		URL:       page.GetUrl(),
		URLFP:     page.GetUrlFp(),
		Host:      host,
		Depth:     uint16(min(page.GetDepth(), 65535)),
		UpdatedAt: now,
	}
	notModified := NotModified(page)
	changed := false
	interval := p.Initial
	if prev != nil {
		next.ETag, next.LastModified, next.ContentFP = prev.ETag, prev.LastModified, prev.ContentFP
		next.Changes, next.Visits = prev.Changes, prev.Visits
		next.Depth = min(next.Depth, prev.Depth)
	}
	if !notModified {
		fp := ContentFP(page.GetBody())
		changed = prev != nil && prev.ContentFP != fp
		next.ContentFP = fp
	}
	if v := header(page, "etag"); v != "" || !notModified {
		next.ETag = v
	}
	if v := header(page, "last-modified"); v != "" || !notModified {
		next.LastModified = v
	}
	if prev != nil {
		interval = time.Duration(prev.IntervalS) * time.Second
		if changed {
			interval /= 2
			next.Changes++
		} else {
			interval *= 2
		}
		interval = p.clamp(interval)
	}
	next.Visits++
	next.IntervalS = uint32(interval / time.Second)
	next.NextVisit = at.Add(interval)
	ch := rows.ChangeRow{
		CrawlID:   next.CrawlID,
		Host:      host,
		URLFP:     next.URLFP,
		URL:       next.URL,
		VisitedAt: at,
		Visit:     next.Visits,
		Status:    uint16(min(page.GetStatusCode(), 65535)),
		ContentFP: next.ContentFP,
		IntervalS: next.IntervalS,
	}
	if notModified {
		ch.NotModified = 1
	}
	if changed {
		ch.Changed = 1
	}
	return next, ch
}

// VisitedAt is when the page was fetched (now when it does not say).
func VisitedAt(page *crawlv1.FetchedPage, now time.Time) time.Time {
	if page.GetFetchedAt() != nil {
		return page.GetFetchedAt().AsTime()
	}
	return now
}

// Folded reports whether prev, a URL's state, has already learnt from a
// fetch made at or after the page's: the outcome is a redelivery (its
// batch read again after a crash or a rebalance), or older than the state,
// and folding it would count a visit twice or go back in time. Whole
// seconds, as ClickHouse keeps the time: two fetches of one URL are never
// within a second of each other under a policy (Min is at least 1s).
func Folded(prev *rows.RevisitRow, page *crawlv1.FetchedPage, now time.Time) bool {
	return prev != nil && !prev.LastVisit.IsZero() &&
		VisitedAt(page, now).Unix() <= prev.LastVisit.Unix()
}

// header returns a response header of the page (the fetcher stores names
// lower-case; other spellings are accepted).
func header(page *crawlv1.FetchedPage, name string) string {
	if v, ok := page.GetHeaders()[name]; ok {
		return v
	}
	for k, v := range page.GetHeaders() {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
