// Package robots fetches, caches and applies robots.txt (RFC 9309) per
// origin, plus the Crawl-delay and Sitemap lines. Parsing and pattern
// matching are github.com/jimsmart/grobotstxt's (Google's matcher, ported);
// a robots.txt is compiled once into the rules that apply to our agent,
// their paths normalized as URL paths are (see compile), and URLs are
// matched in the same form.
//
// Several agents: a crawl may announce a User-Agent of its own, whose
// product token robots.txt groups are matched on. A robots.txt is still
// fetched once per origin and cache life: it is compiled, when fetched, for
// the cache's agent and for every other agent the cache has been asked for
// lately (at most MaxAgents), each agent's rules kept as a view of the
// same entry (Rules.For). An agent the entry was not compiled for (a crawl
// whose agent the cache had not seen when the origin was fetched) misses,
// and its turn fetches robots.txt again, compiled for it too. The body is
// not kept: it is up to 500 KiB, the compiled rules of an agent are
// usually a few lines.
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
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jimsmart/grobotstxt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/telemetry"
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
	// MaxAgents bounds the agents besides the cache's own that a fetched
	// robots.txt is compiled for: the crawls' own product tokens, most
	// recently asked for first.
	MaxAgents = 16
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

// Rules is the robots.txt of one origin as it applies to one agent: a
// cache entry, compiled for the cache's agent, or a view of one for
// another agent (For). Immutable once cached.
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
	// base is the entry a view is of (nil for an entry); views are an
	// entry's views for other agents, by lower-cased product token.
	base  *Rules
	views map[string]*Rules
}

// entry returns the cache entry r is or is a view of.
func (r *Rules) entry() *Rules {
	if r.base != nil {
		return r.base
	}
	return r
}

// Agent returns the product token r applies to.
func (r *Rules) Agent() string { return r.agent }

// For returns the rules of r's origin as they apply to agent (a product
// token; "" for the cache's own) and whether the entry was compiled for
// it. Rules that are not Parsed (allow all, unavailable) apply to every
// agent alike.
func (r *Rules) For(agent string) (*Rules, bool) {
	e := r.entry()
	if agent == "" || strings.EqualFold(agent, e.agent) || e.Outcome != Parsed {
		return e, true
	}
	v, ok := e.views[strings.ToLower(agent)]
	return v, ok
}

// view returns a view of entry r for agent: r's fields with agent's
// rules and Crawl-delay.
func (r *Rules) view(agent string, g group, delay time.Duration) *Rules {
	v := *r
	v.agent, v.group, v.CrawlDelay, v.base, v.views = agent, g, delay, r, nil
	return &v
}

// Verdict is the decision for one URL.
type Verdict int

// The verdicts.
const (
	Allowed Verdict = iota
	Denied
	TryLater // robots.txt unavailable: do not fetch now
)

// Allow reports whether verdict v lets a request be fetched: it allows
// it, or it denies it and the request is exempt (exempt is asked only
// then; decide.SERPExempt); exempted says it was by the exemption. A
// robots.txt that could not be read allows nothing, exemption or not:
// try later.
func (v Verdict) Allow(exempt func() bool) (allow, exempted bool) {
	switch v {
	case Allowed:
		return true, false
	case Denied:
		if exempt() {
			return true, true
		}
	}
	return false, false
}

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

// size is the memory entry r holds with its views, roughly, for the
// cache's bound.
func (r *Rules) size() int64 {
	n := r.group.size()
	for _, v := range r.views {
		n += v.group.size() + int64(len(v.agent)) + 64
	}
	return n
}

// Options configures a Cache.
type Options struct {
	UserAgent    string        // full User-Agent; its product token is matched
	TTL          time.Duration // life of a fetched robots.txt (default 24h)
	ErrorTTL     time.Duration // life of an Unavailable result (default 10m)
	MaxEntries   int           // origins cached (default 50000)
	MaxCacheSize int64         // bytes of compiled rules cached (default 256 MiB)
	// Metrics receives robots_total{outcome}, the fetches by outcome
	// (Outcomes; one cut short by its context is not counted); nil:
	// unexported.
	Metrics prometheus.Registerer
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
	// others are the agents besides agent that fetches were asked for,
	// most recent first, at most MaxAgents: what a fetched robots.txt is
	// compiled for besides agent.
	others []string
	// fetched counts the fetches by outcome (Options.Metrics).
	fetched *prometheus.CounterVec
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
	fetched := telemetry.Register(o.Metrics, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "robots_total",
		Help: "robots.txt fetches by outcome (parsed, allow_all, unavailable).",
	}, []string{"outcome"}))
	for _, out := range Outcomes {
		fetched.WithLabelValues(string(out))
	}
	return &Cache{
		fetched: fetched,
		opts:    o,
		agent:   identity.ProductToken(o.UserAgent),
		get:     get,
		now:     now,
		lru:     list.New(),
		byKey:   make(map[string]*list.Element),
	}
}

// MaxEntries returns the most origins the cache holds.
func (c *Cache) MaxEntries() int { return c.opts.MaxEntries }

// Agent returns the product token matched against User-agent lines.
func (c *Cache) Agent() string { return c.agent }

// Origin returns scheme://host[:port] of rawURL, the key of its robots.txt
// (RFC 9309 applies to http, https and ftp).
func Origin(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ftp") {
		return "", fmt.Errorf("origin of %q: %w", rawURL, failure.ErrInvalidURL)
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), nil
}

// LookupAs returns the cached, unexpired rules of origin as they apply to
// agent (a product token; "" for the cache's own): a miss when the entry
// was not compiled for agent (see For).
func (c *Cache) LookupAs(origin, agent string) (*Rules, bool) {
	r, ok := c.Lookup(origin)
	if !ok {
		return nil, false
	}
	return r.For(agent)
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

// As is who asks for a robots.txt: the User-Agent and the extra headers
// of a crawl's requests (its identity; the caller checked them with
// libs/identity). Zero: the fetcher's User-Agent, whose product token is
// the cache's agent.
type As struct {
	UserAgent string
	Header    []identity.Header
}

// Fetch is FetchAs for the cache's own agent.
func (c *Cache) Fetch(ctx context.Context, origin, host string) *Rules {
	return c.FetchAs(ctx, origin, host, As{})
}

// FetchAs requests origin's robots.txt as as (following up to
// MaxRedirects redirects), caches the rules, compiled for the cache's
// agent, as's product token and the other agents asked for lately, and
// returns them as they apply to as's agent. When ctx ends first the result
// is Unavailable and not cached. host is the politeness key, used for the
// proxy choice. It blocks for the request(s).
func (c *Cache) FetchAs(ctx context.Context, origin, host string, as As) *Rules {
	agent := identity.ProductToken(as.UserAgent)
	others := c.noteAgent(agent)
	target := origin + "/robots.txt"
	r := &Rules{Origin: origin, agent: c.agent}
	var body string
	for hop := 0; ; hop++ {
		resp := c.get.Fetch(ctx, httpfetch.Request{URL: target, Host: host, MaxBodyBytes: MaxBodyBytes, Raw: true,
			UserAgent: as.UserAgent, Header: as.Header})
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
		body = c.classify(r, resp)
		break
	}
	r.FetchedAt = c.now()
	if ctx.Err() != nil {
		// our own cancellation, not the site's answer: do not cache it
		r.Outcome, r.Kind, r.Err = Unavailable, failure.Other, fmt.Errorf("fetch robots.txt: %w", ctx.Err())
		return r
	}
	c.fetched.WithLabelValues(string(r.Outcome)).Inc()
	ttl := c.opts.TTL
	if r.Outcome == Unavailable {
		ttl = c.opts.ErrorTTL
	}
	r.Expires = r.FetchedAt.Add(ttl)
	if r.Outcome == Parsed {
		for _, a := range others {
			if _, ok := r.views[strings.ToLower(a)]; ok || strings.EqualFold(a, c.agent) {
				continue
			}
			if r.views == nil {
				r.views = make(map[string]*Rules, len(others))
			}
			r.views[strings.ToLower(a)] = r.view(a, c.compileFor(body, a), CrawlDelay(body, a))
		}
	}
	c.store(r)
	v, _ := r.For(agent)
	return v
}

// NoteAgent records that agent (a product token) will ask for robots.txt,
// so that the robots.txt fetched from now on are compiled for it too: a
// fetcher notes the agents of the crawls whose requests it reads, so that
// the first turn on a host, whichever crawl's, fetches robots.txt for all
// of them. Safe for concurrent use; cheap for an agent noted last.
func (c *Cache) NoteAgent(agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLocked(agent)
}

// noteAgent is NoteAgent returning the agents besides the cache's own
// that a robots.txt fetched now is compiled for.
func (c *Cache) noteAgent(agent string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteLocked(agent)
	return slices.Clone(c.others)
}

func (c *Cache) noteLocked(agent string) {
	if len(c.others) > 0 && c.others[0] == agent {
		return
	}
	if agent != "" && !strings.EqualFold(agent, c.agent) {
		if i := slices.IndexFunc(c.others, func(a string) bool { return strings.EqualFold(a, agent) }); i >= 0 {
			c.others = slices.Delete(c.others, i, i+1)
		}
		c.others = slices.Insert(c.others, 0, agent)
		if len(c.others) > MaxAgents {
			c.others = c.others[:MaxAgents]
		}
	}
}

// compile compiles a robots.txt body for the cache's agent. A body the
// parser cannot read (a parser panic; none is known) disallows everything:
// the conservative reading of rules we could not understand.
func (c *Cache) compile(body string) group { return c.compileFor(body, c.agent) }

// compileFor is compile for agent.
func (c *Cache) compileFor(body, agent string) group {
	g, err := compile(body, agent)
	if err != nil {
		return group{rules: []rule{newRule(false, "/", false)}}
	}
	return g
}

// classify sets r's outcome and, for a parsed body, its rules for the
// cache's agent; it returns the body (empty unless parsed).
func (c *Cache) classify(r *Rules, resp *httpfetch.Response) string {
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
		return body
	default:
		// 4xx (and 3xx without Location): no rules
		r.Outcome = AllowAll
	}
	return ""
}

func (c *Cache) store(r *Rules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storeLocked(r)
}

func (c *Cache) storeLocked(r *Rules) {
	r = r.entry()
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
	// Others are the rules of the same robots.txt for other agents (a
	// parsed one's views), by agent.
	Others []AgentRules
}

// AgentRules are the rules of a robots.txt for one agent besides the
// cache's own.
type AgentRules struct {
	Agent      string // product token
	Rules      string // Rules.Text of the agent's view
	CrawlDelay time.Duration
}

// Record returns the durable form of r. ok is false when r is Unavailable:
// a failed fetch is no valid robots.txt and is only kept, briefly, in
// memory.
func (r *Rules) Record() (rec Record, ok bool) {
	r = r.entry()
	if r.Outcome != Parsed && r.Outcome != AllowAll {
		return Record{}, false
	}
	rec = Record{
		Origin: r.Origin, Agent: r.agent, Outcome: r.Outcome, Status: r.Status, Rules: r.Text(),
		CrawlDelay: r.CrawlDelay, Sitemaps: r.Sitemaps, BodyBytes: r.BodyBytes,
		FetchedAt: r.FetchedAt, Expires: r.Expires,
	}
	for _, key := range slices.Sorted(maps.Keys(r.views)) {
		v := r.views[key]
		rec.Others = append(rec.Others, AgentRules{Agent: v.agent, Rules: v.Text(), CrawlDelay: v.CrawlDelay})
	}
	return rec, true
}

// agentLine starts, in a stored rules column, the rules of another agent
// than the row's first: "# agent: examplebot crawl-delay: 2.5s". Rules
// text never holds a '#' (robots.txt comments are cut from every value).
const agentLine = "# agent: "

// Columns returns the agent and rules columns of rec's robots_txt row.
// Without other agents they are rec.Agent and rec.Rules, as before several
// agents. With them, the agent column lists every agent, rec.Agent first
// ("trawl,examplebot"), so that a fetcher that reads one agent per row
// skips it, and the rules column holds each other agent's rules after an
// agentLine.
func (rec Record) Columns() (agent, rules string) {
	if len(rec.Others) == 0 {
		return rec.Agent, rec.Rules
	}
	var a, b strings.Builder
	a.WriteString(rec.Agent)
	b.WriteString(rec.Rules)
	for _, o := range rec.Others {
		a.WriteString("," + o.Agent)
		fmt.Fprintf(&b, "%s%s crawl-delay: %s\n%s", agentLine, o.Agent, o.CrawlDelay, o.Rules)
	}
	return a.String(), b.String()
}

// SetColumns sets rec's Agent, Rules and Others from the agent and rules
// columns of a robots_txt row (Columns' inverse). A block of another agent
// that does not read back is left out: that agent fetches robots.txt
// again.
func (rec *Record) SetColumns(agent, rules string) {
	agents := strings.Split(agent, ",")
	rec.Agent, rec.Others = agents[0], nil
	blocks := strings.Split(rules, "\n"+agentLine)
	rec.Rules = blocks[0]
	if len(blocks) > 1 {
		rec.Rules += "\n"
	}
	for i, b := range blocks[1:] {
		head, text, _ := strings.Cut(b, "\n")
		if i < len(blocks)-2 {
			text += "\n" // the next block's split took it
		}
		var o AgentRules
		name, delay, ok := strings.Cut(head, " crawl-delay: ")
		d, err := time.ParseDuration(delay)
		if !ok || err != nil || !slices.Contains(agents[1:], name) {
			continue
		}
		o.Agent, o.CrawlDelay, o.Rules = name, d, text
		rec.Others = append(rec.Others, o)
	}
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
		for _, o := range rec.Others {
			if o.Agent == "" || strings.EqualFold(o.Agent, c.agent) {
				continue
			}
			if r.views == nil {
				r.views = make(map[string]*Rules, len(rec.Others))
			}
			r.views[strings.ToLower(o.Agent)] = r.view(o.Agent, c.compileFor(o.Rules, o.Agent), o.CrawlDelay)
		}
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
	case strings.EqualFold(identity.ProductToken(v), h.agent) && h.agent != "":
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
