// Package robots fetches, caches and applies robots.txt (RFC 9309) per
// origin, plus the Crawl-delay and Sitemap lines. Parsing and pattern
// matching are github.com/jimsmart/grobotstxt's (Google's matcher, ported);
// a robots.txt is compiled once into the rules that apply to our agent,
// their paths normalized as URL paths are (see compile), and URLs are
// matched in the same form.
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
	DefaultMaxCacheSize = 256 << 20 // bytes of compiled rules kept
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
	Requests   int // HTTP requests made to obtain it (redirect hops included); 0 when restored
	BodyBytes  int // size of the robots.txt received (at most MaxBodyBytes)
	agent      string
	group      group // Parsed: the rules that apply to agent
}

// Verdict is the decision for one URL.
type Verdict int

// The verdicts.
const (
	Allowed Verdict = iota
	Denied
	TryLater // robots.txt unavailable: do not fetch now
)

// Check returns the verdict for rawURL (of this origin) for the agent the
// rules were compiled for (the cache's). Rules and URL are compared in one
// form, urlcanon.NormalizePathQuery: however either side spells an
// unreserved character or a hex digit, the verdict is the same.
func (r *Rules) Check(rawURL string) Verdict {
	switch r.Outcome {
	case AllowAll:
		return Allowed
	case Unavailable:
		return TryLater
	}
	return r.group.verdict(matchPath(rawURL))
}

// Text returns the rules that apply to the agent in robots.txt syntax
// (normalized, other agents' groups, comments and unknown lines left out);
// "" unless Parsed.
func (r *Rules) Text() string {
	if r.Outcome != Parsed {
		return ""
	}
	return r.group.text(r.agent)
}

// size is the memory r holds, roughly, for the cache's bound.
func (r *Rules) size() int64 { return r.group.size() }

// Options configures a Cache.
type Options struct {
	UserAgent    string        // full User-Agent; its product token is matched
	TTL          time.Duration // life of a fetched robots.txt (default 24h)
	ErrorTTL     time.Duration // life of an Unavailable result (default 10m)
	MaxEntries   int           // origins cached (default 50000)
	MaxCacheSize int64         // bytes of compiled rules cached (default 256 MiB)
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

// MaxEntries returns the most origins the cache holds.
func (c *Cache) MaxEntries() int { return c.opts.MaxEntries }

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
	r := &Rules{Origin: origin, agent: c.agent}
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

// compile compiles a robots.txt body for the cache's agent. A body the
// parser cannot read (a parser panic; none is known) disallows everything:
// the conservative reading of rules we could not understand.
func (c *Cache) compile(body string) group {
	g, err := compile(body, c.agent)
	if err != nil {
		return group{rules: []rule{newRule(false, "/", false)}}
	}
	return g
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
		body := string(resp.Body)
		r.BodyBytes = len(body)
		r.group = c.compile(body)
		r.CrawlDelay = CrawlDelay(body, c.agent)
		r.Sitemaps = grobotstxt.Sitemaps(body)
	default:
		// 4xx (and 3xx without Location): no rules
		r.Outcome = AllowAll
	}
}

func (c *Cache) store(r *Rules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storeLocked(r)
}

func (c *Cache) storeLocked(r *Rules) {
	if el, ok := c.byKey[r.Origin]; ok {
		c.remove(el)
	}
	c.byKey[r.Origin] = c.lru.PushFront(r)
	c.size += r.size()
	for c.lru.Len() > c.opts.MaxEntries || (c.size > c.opts.MaxCacheSize && c.lru.Len() > 1) {
		c.remove(c.lru.Back())
	}
}

func (c *Cache) remove(el *list.Element) {
	r := c.lru.Remove(el).(*Rules)
	delete(c.byKey, r.Origin)
	c.size -= r.size()
}

// Record is the durable form of Rules: what a later owner of the origin
// (after a restart or a partition move) needs to apply them without asking
// the site again. Its size is bounded by MaxRulesBytes and the Sitemap
// lines of a MaxBodyBytes body.
type Record struct {
	Origin     string
	Agent      string  // product token the rules were selected for
	Outcome    Outcome // Parsed or AllowAll; Unavailable is never recorded
	Status     int
	Rules      string // Rules.Text: the rules that apply to Agent
	CrawlDelay time.Duration
	Sitemaps   []string
	BodyBytes  int
	FetchedAt  time.Time
	Expires    time.Time
}

// Record returns the durable form of r. ok is false when r is Unavailable:
// a failed fetch is no valid robots.txt and is only kept, briefly, in
// memory.
func (r *Rules) Record() (rec Record, ok bool) {
	if r.Outcome != Parsed && r.Outcome != AllowAll {
		return Record{}, false
	}
	return Record{
		Origin: r.Origin, Agent: r.agent, Outcome: r.Outcome, Status: r.Status, Rules: r.Text(),
		CrawlDelay: r.CrawlDelay, Sitemaps: r.Sitemaps, BodyBytes: r.BodyBytes,
		FetchedAt: r.FetchedAt, Expires: r.Expires,
	}, true
}

// Restore caches the rules of a record made by a Cache before (this
// process's or another's), so that its origin is not asked again before
// rec.Expires. It reports whether rec was cached: not when it is expired,
// Unavailable, for another agent than the cache's, or not newer than what
// the cache holds for the origin.
func (c *Cache) Restore(rec Record) bool {
	if rec.Outcome != Parsed && rec.Outcome != AllowAll || rec.Agent != c.agent || rec.Origin == "" ||
		!c.now().Before(rec.Expires) {
		return false
	}
	r := &Rules{
		Origin: rec.Origin, Outcome: rec.Outcome, Status: rec.Status, CrawlDelay: rec.CrawlDelay,
		Sitemaps: rec.Sitemaps, FetchedAt: rec.FetchedAt, Expires: rec.Expires, BodyBytes: rec.BodyBytes,
		agent: c.agent,
	}
	if r.Outcome == Parsed {
		r.group = c.compile(rec.Rules)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[rec.Origin]; ok && !el.Value.(*Rules).FetchedAt.Before(rec.FetchedAt) {
		return false
	}
	c.storeLocked(r)
	return true
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
