// Package pool holds the state of the proxy pool: the latest verdict on every
// proxy, and what the compacted proxies topic must learn since the last
// publish (a live record or a tombstone per changed proxy).
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
}

// Pool is the proxy pool state. Safe for concurrent use.
type Pool struct {
	timeout time.Duration // check timeout: the latency that scores 0

	mu      sync.Mutex
	proxies map[string]*proxy
}

// New returns an empty pool; checkTimeout scales latency into a score.
func New(checkTimeout time.Duration) *Pool {
	return &Pool{timeout: checkTimeout, proxies: make(map[string]*proxy)}
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
			px.status.Entry = e
			continue
		}
		p.proxies[id] = &proxy{status: Status{Entry: e}}
	}
	for id, px := range p.proxies {
		if keep[id] {
			continue
		}
		if px.published != nil && px.published.live {
			removed = append(removed, Change{ID: id, Delete: true, Status: px.status})
		}
		delete(p.proxies, id)
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
	px.status = Status{
		Entry:     r.Entry,
		Error:     msg,
		Alive:     r.Alive,
		Checked:   true,
		Outcome:   r.Outcome,
		Latency:   r.Latency,
		CheckedAt: r.CheckedAt,
		Score:     p.score(r),
	}
}

// score maps latency to 0..1: instant is 1, the check timeout is 0.
func (p *Pool) score(r check.Result) float64 {
	if !r.Alive {
		return 0
	}
	if p.timeout <= 0 {
		return 1
	}
	s := 1 - float64(r.Latency)/float64(p.timeout)
	return math.Round(math.Max(0.01, math.Min(1, s))*100) / 100
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
