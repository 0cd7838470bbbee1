// Package pool holds the state of the proxy pool: the latest verdict on every
// proxy, its recent success rate and latency (EWMAs over checks and the
// fetchers' feedback), bans, and what the compacted proxies topic must learn
// since the last publish (a live record or a tombstone per changed proxy).
package pool

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// ScoreStep is how far a live proxy's score must move before it is
// republished; smaller moves are latency noise.
const ScoreStep = 0.1

// Status is the latest known state of one proxy.
type Status struct {
	Entry     proxylist.Entry
	Alive     bool
	Checked   bool // false until the first verdict
	Outcome   string
	Error     string // why it is dead; credentials already removed
	Latency   time.Duration
	CheckedAt time.Time
	Score     float64 // 0..1, higher is better; 0 when dead

	Success      float64 // EWMA of successes (checks and feedback), 0..1
	Failures     int     // consecutive failed checks
	Banned       bool    // banned by feedback: never live again in this process
	BlockedHosts int     // distinct hosts that blocked it (feedback)
	Feedback     int     // feedback records received
	Anonymity    string  // check.Elite or check.Anonymous with leak checks
}

// Change is one record to publish: the proxy is live (Delete false, with its
// status) or must be removed (Delete true, a tombstone).
type Change struct {
	ID     string
	Delete bool
	Status Status
}

type published struct {
	live  bool
	url   string
	score float64
}

type proxy struct {
	status    Status
	published *published // nil: nothing published by this process yet
	latency   float64    // EWMA of check latencies, seconds; <0 before the first
	blocked   map[string]bool
	harvested bool   // added by Add: evictable (the operator's own list is not)
	version   uint64 // of the last State taken or applied (state.go)
}

// Config configures a pool.
type Config struct {
	CheckTimeout time.Duration // the latency that scores 0
	MaxSize      int           // most proxies tracked at once; 0 = unlimited
	EvictAfter   int           // consecutive failed checks that evict a proxy; 0 = never
	BanHosts     int           // distinct hosts blocking a proxy that ban it; 0 = never
	BanBelow     float64       // success EWMA below which feedback bans a proxy; 0 = never
}

// EWMA weights of a new observation.
const (
	checkAlpha    = 0.5 // a check is a deliberate test: weighs a lot
	feedbackAlpha = 0.1 // feedback is plentiful and noisy
)

// Outcomes set by the pool itself.
const (
	OutcomeBanned = "banned"
)

// Pool is the proxy pool state. Safe for concurrent use.
type Pool struct {
	cfg Config

	mu      sync.Mutex
	proxies map[string]*proxy
	banned  map[string]bool // ids banned and evicted: Add skips them

	// What the state topic must learn (state.go): ids changed since the
	// last TakeStates, and the records of proxies forgotten meanwhile.
	dirty map[string]bool
	gone  map[string]State
}

// maxBanned bounds the remembered bans; past it the list starts over.
const maxBanned = 100000

// New returns an empty, unbounded pool; checkTimeout scales latency into a
// score.
func New(checkTimeout time.Duration) *Pool {
	return NewWithConfig(Config{CheckTimeout: checkTimeout})
}

// NewWithConfig returns an empty pool.
func NewWithConfig(cfg Config) *Pool {
	return &Pool{cfg: cfg, proxies: make(map[string]*proxy), banned: make(map[string]bool),
		dirty: make(map[string]bool), gone: make(map[string]State)}
}

func newProxy(e proxylist.Entry) *proxy {
	return &proxy{status: Status{Entry: e, Success: 1}, latency: -1}
}

// Set makes entries the set of proxies the pool tracks: new ones are added
// unchecked, known ones keep their state (credentials are updated), and
// ones no longer listed are forgotten after a tombstone is queued if they
// were published live.
func (p *Pool) Set(entries []proxylist.Entry) (removed []Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := make(map[string]bool, len(entries))
	for _, e := range entries {
		id := e.ID()
		keep[id] = true
		if px, ok := p.proxies[id]; ok {
			if px.status.Entry != e {
				px.status.Entry = e
				p.dirty[id] = true
			}
			continue
		}
		p.proxies[id] = newProxy(e)
		p.dirty[id] = true
	}
	for id, px := range p.proxies {
		if keep[id] {
			continue
		}
		if px.published != nil && px.published.live {
			removed = append(removed, Change{ID: id, Delete: true, Status: px.status})
		}
		p.forget(id, px, false)
	}
	sortChanges(removed)
	return removed
}

// Record stores a verdict. Verdicts on proxies the pool does not track, and
// canceled checks, are ignored.
func (p *Pool) Record(r check.Result) {
	if r.Outcome == check.Canceled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	px, ok := p.proxies[r.Entry.ID()]
	if !ok {
		return
	}
	var msg string
	if r.Err != nil {
		msg = r.Err.Error()
	}
	ok01 := 0.0
	if r.Alive {
		ok01 = 1
		px.status.Failures = 0
		if px.latency < 0 {
			px.latency = r.Latency.Seconds()
		} else {
			px.latency = checkAlpha*r.Latency.Seconds() + (1-checkAlpha)*px.latency
		}
	} else {
		px.status.Failures++
	}
	st := px.status
	st.Entry = r.Entry
	st.Error = msg
	st.Alive = r.Alive && !st.Banned
	st.Checked = true
	st.Outcome = r.Outcome
	st.Latency = r.Latency
	st.CheckedAt = r.CheckedAt
	st.Anonymity = r.Anonymity
	st.Success = checkAlpha*ok01 + (1-checkAlpha)*st.Success
	if st.Banned {
		st.Outcome, st.Error = OutcomeBanned, "banned by fetcher feedback"
	}
	px.status = st
	px.status.Score = p.score(px)
	p.dirty[r.Entry.ID()] = true
}

// score is the recent success rate times the latency score (the EWMA
// latency mapped to 0..1: instant is 1, the check timeout is 0), rounded to
// hundredths, at least 0.01 while alive; 0 when dead.
func (p *Pool) score(px *proxy) float64 {
	if !px.status.Alive {
		return 0
	}
	ls := 1.0
	if p.cfg.CheckTimeout > 0 && px.latency > 0 {
		ls = 1 - px.latency/p.cfg.CheckTimeout.Seconds()
	}
	s := px.status.Success * ls
	return math.Round(math.Max(0.01, math.Min(1, s))*100) / 100
}

// Feedback applies a fetcher's report on a request through a proxy:
// success raises its success rate, timeout and error lower it, blocked
// also counts the host as blocking it. A proxy blocked by BanHosts
// distinct hosts, or whose success rate falls below BanBelow, is banned:
// dead from now on (a tombstone at the next publish, eviction after).
// Feedback on unknown proxies is ignored; it reports whether it was applied.
func (p *Pool) Feedback(proxyID, host, outcome string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	px, ok := p.proxies[proxyID]
	if !ok {
		return false
	}
	st := &px.status
	st.Feedback++
	ok01 := 0.0
	switch outcome {
	case "success":
		ok01 = 1
	case "blocked":
		if px.blocked == nil {
			px.blocked = make(map[string]bool)
		}
		if host != "" && len(px.blocked) < 1000 {
			px.blocked[host] = true
		}
		st.BlockedHosts = len(px.blocked)
	}
	st.Success = feedbackAlpha*ok01 + (1-feedbackAlpha)*st.Success
	if !st.Banned && ((p.cfg.BanHosts > 0 && st.BlockedHosts >= p.cfg.BanHosts) || (p.cfg.BanBelow > 0 && st.Success < p.cfg.BanBelow)) {
		st.Banned = true
		st.Alive = false
		st.Outcome, st.Error = OutcomeBanned, "banned by fetcher feedback"
	}
	st.Score = p.score(px)
	p.dirty[proxyID] = true
	return true
}

// Add starts tracking new harvested proxies (unchecked) up to MaxSize
// tracked in all; known and banned ones are left alone. It returns how
// many were added.
func (p *Pool) Add(entries []proxylist.Entry) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	added := 0
	for _, e := range entries {
		if p.cfg.MaxSize > 0 && len(p.proxies) >= p.cfg.MaxSize {
			break
		}
		id := e.ID()
		if _, ok := p.proxies[id]; ok || p.banned[id] {
			continue
		}
		px := newProxy(e)
		px.harvested = true
		p.proxies[id] = px
		p.dirty[id] = true
		added++
	}
	return added
}

// Evict forgets harvested proxies that are banned or failed EvictAfter
// checks in a row, returning tombstones for those still published live
// and how many were evicted.
// Proxies of the operator's list (Set) are never evicted: they stay,
// dead, and are checked again every round.
func (p *Pool) Evict() (removed []Change, evicted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, px := range p.proxies {
		st := px.status
		if !px.harvested || !st.Banned && (p.cfg.EvictAfter <= 0 || st.Failures < p.cfg.EvictAfter) {
			continue
		}
		if px.published != nil && px.published.live {
			removed = append(removed, Change{ID: id, Delete: true, Status: st})
		}
		p.forget(id, px, st.Banned)
		evicted++
	}
	sortChanges(removed)
	return removed, evicted
}

// Usable returns how many proxies are live or not yet checked (candidates
// that may become live), for deciding whether to harvest more.
func (p *Pool) Usable() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, px := range p.proxies {
		if !px.status.Checked || px.status.Alive {
			n++
		}
	}
	return n
}

// Changes returns the records to publish since the last MarkPublished, in id
// order: a live record for a proxy that became live, changed credentials or
// moved its score by ScoreStep; a tombstone for a checked dead proxy that
// was live or whose state this process never published (a previous run may
// have left it live in the compacted topic).
func (p *Pool) Changes() []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Change
	for id, px := range p.proxies {
		st, pub := px.status, px.published
		switch {
		case !st.Checked:
		case st.Alive:
			if pub == nil || !pub.live || pub.url != st.Entry.URL() || math.Abs(pub.score-st.Score) >= ScoreStep-1e-9 {
				out = append(out, Change{ID: id, Status: st})
			}
		default:
			if pub == nil || pub.live {
				out = append(out, Change{ID: id, Delete: true, Status: st})
			}
		}
	}
	sortChanges(out)
	return out
}

// MarkPublished records that changes reached the topic.
func (p *Pool) MarkPublished(changes []Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range changes {
		px, ok := p.proxies[c.ID]
		if !ok {
			continue
		}
		px.published = &published{live: !c.Delete, url: c.Status.Entry.URL(), score: c.Status.Score}
	}
}

// Snapshot returns every tracked proxy, in id order.
func (p *Pool) Snapshot() []Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Status, 0, len(p.proxies))
	for _, px := range p.proxies {
		out = append(out, px.status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Entry.ID() < out[j].Entry.ID() })
	return out
}

// Counts returns how many checked proxies are live and dead.
func (p *Pool) Counts() (live, dead int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.proxies {
		switch {
		case !px.status.Checked:
		case px.status.Alive:
			live++
		default:
			dead++
		}
	}
	return live, dead
}

func sortChanges(cs []Change) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
}
