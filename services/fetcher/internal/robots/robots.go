// Package robots fetches, caches and applies robots.txt (RFC 9309) per
// origin: matching by github.com/jimsmart/grobotstxt (Google's matcher),
// plus the Crawl-delay and Sitemap lines.
//
// Rules by answer: 2xx → parsed (first 500 KiB); 4xx → allow all; 429, 5xx
// or a network failure → disallow all for now and fetch again after the
// error TTL (never "allow all on error"); redirects are followed up to five
// hops, beyond that robots.txt counts as unavailable in the 4xx sense (allow
// all), as RFC 9309 permits.
package robots

import (
	"container/list"
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jimsmart/grobotstxt"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// Defaults of Options.
const (
	DefaultTTL          = 24 * time.Hour
	DefaultErrorTTL     = 10 * time.Minute
	DefaultMaxEntries   = 50000
	DefaultMaxCacheSize = 256 << 20 // bytes of robots.txt bodies kept
	MaxBodyBytes        = 500 << 10 // RFC 9309: parse at least 500 KiB
	MaxRedirects        = 5
)

// Outcome is how the robots.txt of an origin was obtained (metric label).
type Outcome string

// The outcomes.
const (
	Parsed      Outcome = "parsed"      // 2xx: rules apply
	AllowAll    Outcome = "allow_all"   // 4xx or too many redirects
	Unavailable Outcome = "unavailable" // 429, 5xx or network failure: disallow all for now
)

// Outcomes lists every outcome, for pre-initializing metrics.
var Outcomes = []Outcome{Parsed, AllowAll, Unavailable}

// Getter performs one HTTP request (httpfetch.Fetcher). Safe for
// concurrent use.
type Getter interface {
	Fetch(ctx context.Context, r httpfetch.Request) *httpfetch.Response
}

// Rules is the robots.txt of one origin. Immutable once cached.
type Rules struct {
	Origin     string
	Outcome    Outcome
	Status     int           // status of the last answer, 0 for none
	Kind       failure.Kind  // failure kind when Unavailable through a network failure
	Err        error         // the failure when Unavailable
	CrawlDelay time.Duration // for our agent (or *), 0 when absent
	Sitemaps   []string
	FetchedAt  time.Time
	Expires    time.Time
	Requests   int // HTTP requests made to obtain it (redirect hops included)
	body       string
}

// Verdict is the decision for one URL.
type Verdict int

// The verdicts.
const (
	Allowed Verdict = iota
	Denied
	TryLater // robots.txt unavailable: do not fetch now
)

// Check returns the verdict for rawURL (of this origin) for agent, the
// product token of the user agent (e.g. "trawl").
func (r *Rules) Check(agent, rawURL string) (v Verdict) {
	switch r.Outcome {
	case AllowAll:
		return Allowed
	case Unavailable:
		return TryLater
	}
	defer func() {
		// grobotstxt panics on a path not starting with '/'; the URL is
		// canonical so this should not happen, but a panic must not take
		// the fetcher down: refuse the URL.
		if recover() != nil {
			v = Denied
		}
	}()
	if grobotstxt.AgentAllowed(r.body, agent, rawURL) {
		return Allowed
	}
	return Denied
}

// Options configures a Cache.
type Options struct {
	UserAgent    string        // full User-Agent; its product token is matched
	TTL          time.Duration // life of a fetched robots.txt (default 24h)
	ErrorTTL     time.Duration // life of an Unavailable result (default 10m)
	MaxEntries   int           // origins cached (default 50000)
	MaxCacheSize int64         // bytes of bodies cached (default 256 MiB)
}

// Cache is a bounded LRU cache of Rules by origin. Safe for concurrent
// use. It does not deduplicate concurrent fetches of one origin: the
// politeness engine already lets one request per host run at a time.
type Cache struct {
	opts  Options
	agent string
	get   Getter
	now   func() time.Time
	mu    sync.Mutex
	lru   *list.List // front = most recent; values *Rules
	byKey map[string]*list.Element
	size  int64
}

// NewCache returns an empty cache fetching through get.
func NewCache(get Getter, now func() time.Time, o Options) *Cache {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.ErrorTTL <= 0 {
		o.ErrorTTL = DefaultErrorTTL
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxCacheSize <= 0 {
		o.MaxCacheSize = DefaultMaxCacheSize
	}
	return &Cache{
		opts:  o,
		agent: ProductToken(o.UserAgent),
		get:   get,
		now:   now,
		lru:   list.New(),
		byKey: make(map[string]*list.Element),
	}
}

// Agent returns the product token matched against User-agent lines.
func (c *Cache) Agent() string { return c.agent }

// ProductToken returns the robots.txt product token of a User-Agent: its
// leading run of letters, '-' and '_' ("trawl/0.1 (+…)" → "trawl").
func ProductToken(ua string) string {
	i := 0
	for i < len(ua) {
		ch := ua[i]
		if ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch == '-' || ch == '_' {
			i++
			continue
		}
		break
	}
	return ua[:i]
}

// Origin returns scheme://host[:port] of rawURL, the key of its robots.txt
// (RFC 9309 applies to http, https and ftp).
func Origin(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ftp") {
		return "", fmt.Errorf("origin of %q: %w", rawURL, failure.ErrInvalidURL)
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), nil
}

// Lookup returns the cached, unexpired rules of origin.
func (c *Cache) Lookup(origin string) (*Rules, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[origin]
	if !ok {
		return nil, false
	}
	r := el.Value.(*Rules)
	if !c.now().Before(r.Expires) {
		c.remove(el)
		return nil, false
	}
	c.lru.MoveToFront(el)
	return r, true
}

// Fetch requests origin's robots.txt (following up to MaxRedirects
// redirects), caches and returns the rules. When ctx ends first the result
// is Unavailable and not cached. host is the politeness key,
// used for the proxy choice. It blocks for the request(s).
func (c *Cache) Fetch(ctx context.Context, origin, host string) *Rules {
	target := origin + "/robots.txt"
	r := &Rules{Origin: origin}
	for hop := 0; ; hop++ {
		resp := c.get.Fetch(ctx, httpfetch.Request{URL: target, Host: host, MaxBodyBytes: MaxBodyBytes, Raw: true})
		r.Requests++
		r.Status = resp.Status
		if resp.Kind == failure.Redirect {
			if hop >= MaxRedirects {
				r.Outcome = AllowAll
				break
			}
			target = resp.RedirectLocation
			continue
		}
		c.classify(r, resp)
		break
	}
	r.FetchedAt = c.now()
	if ctx.Err() != nil {
		// our own cancellation, not the site's answer: do not cache it
		r.Outcome, r.Kind, r.Err = Unavailable, failure.Other, fmt.Errorf("fetch robots.txt: %w", ctx.Err())
		return r
	}
	ttl := c.opts.TTL
	if r.Outcome == Unavailable {
		ttl = c.opts.ErrorTTL
	}
	r.Expires = r.FetchedAt.Add(ttl)
	c.store(r)
	return r
}

func (c *Cache) classify(r *Rules, resp *httpfetch.Response) {
	switch s := resp.Status; {
	case s == 0 || (resp.Err != nil && resp.Kind != failure.BodyTooLarge && resp.Kind != failure.None):
		// no answer (network failure, timeout) or a broken body
		r.Outcome = Unavailable
		r.Kind = resp.Kind
		r.Err = fmt.Errorf("fetch robots.txt: %w", resp.Err)
	case s == 429 || s >= 500:
		r.Outcome = Unavailable
		r.Kind = failure.RobotsUnavailable
		r.Err = fmt.Errorf("fetch robots.txt: %w", resp.Err)
	case s >= 200 && s < 300:
		// an oversize body was cut at MaxBodyBytes: parse what we have
		r.Outcome = Parsed
		r.body = string(resp.Body)
		r.CrawlDelay = CrawlDelay(r.body, c.agent)
		r.Sitemaps = grobotstxt.Sitemaps(r.body)
	default:
		// 4xx (and 3xx without Location): no rules
		r.Outcome = AllowAll
	}
}

func (c *Cache) store(r *Rules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[r.Origin]; ok {
		c.remove(el)
	}
	c.byKey[r.Origin] = c.lru.PushFront(r)
	c.size += int64(len(r.body))
	for c.lru.Len() > c.opts.MaxEntries || (c.size > c.opts.MaxCacheSize && c.lru.Len() > 1) {
		c.remove(c.lru.Back())
	}
}

func (c *Cache) remove(el *list.Element) {
	r := c.lru.Remove(el).(*Rules)
	delete(c.byKey, r.Origin)
	c.size -= int64(len(r.body))
}

// Len returns the number of cached origins.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// CrawlDelay returns the Crawl-delay of the group that applies to agent:
// a group naming agent (case-insensitive) wins over "*". Fractional
// seconds are accepted; invalid or negative values are ignored.
func CrawlDelay(body, agent string) time.Duration {
	h := &delayHandler{agent: strings.ToLower(agent), specific: -1, global: -1}
	grobotstxt.Parse(body, h)
	switch {
	case h.specific >= 0:
		return h.specific
	case h.global >= 0:
		return h.global
	}
	return 0
}

// delayHandler collects Crawl-delay per user-agent group.
type delayHandler struct {
	agent            string
	inGroupAgents    bool // the previous line was a user-agent line
	groupIsSpecific  bool
	groupIsGlobal    bool
	specific, global time.Duration
}

func (h *delayHandler) HandleRobotsStart() {}
func (h *delayHandler) HandleRobotsEnd()   {}
func (h *delayHandler) HandleUserAgent(_ int, v string) {
	if !h.inGroupAgents {
		h.groupIsSpecific, h.groupIsGlobal = false, false
	}
	h.inGroupAgents = true
	v = strings.TrimSpace(v)
	switch {
	case v == "*" || strings.HasPrefix(v, "* "):
		h.groupIsGlobal = true
	case strings.EqualFold(ProductToken(v), h.agent) && h.agent != "":
		h.groupIsSpecific = true
	}
}
func (h *delayHandler) HandleAllow(int, string)    { h.inGroupAgents = false }
func (h *delayHandler) HandleDisallow(int, string) { h.inGroupAgents = false }
func (h *delayHandler) HandleSitemap(int, string)  {}
func (h *delayHandler) HandleUnknownAction(_ int, action, value string) {
	h.inGroupAgents = false
	if !strings.EqualFold(strings.TrimSpace(action), "crawl-delay") {
		return
	}
	secs, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	if err != nil || secs < 0 || secs > 86400 {
		return
	}
	d := time.Duration(secs * float64(time.Second))
	if h.groupIsSpecific && h.specific < 0 {
		h.specific = d
	}
	if h.groupIsGlobal && h.global < 0 {
		h.global = d
	}
}
