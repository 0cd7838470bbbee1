package pool

import (
	"sort"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// State is the whole state of one proxy as the proxy-state topic carries
// it (internal/state encodes it): what another pool instance needs to hold
// the same view, and what a restarted one reloads so that no score is lost.
// Version increases with every State of the id the pool hands out; a pool
// applies a State only when it is not older than what it holds.
type State struct {
	ID      string
	Version uint64
	// Gone: the proxy is forgotten (removed from the list, or evicted);
	// with Banned it was banned and is never harvested again. Only ID,
	// Version and Banned are set.
	Gone      bool
	Banned    bool
	Harvested bool
	Status    Status
	// LatencyEWMA is the EWMA of check latencies in seconds, < 0 before
	// the first successful check.
	LatencyEWMA  float64
	BlockedHosts []string // sorted
}

// forget removes a proxy and queues its Gone state; banned remembers the
// ban (Add skips the id). Callers hold p.mu.
func (p *Pool) forget(id string, px *proxy, banned bool) {
	delete(p.proxies, id)
	delete(p.dirty, id)
	p.gone[id] = State{ID: id, Version: px.version + 1, Gone: true, Banned: banned}
	if banned {
		p.ban(id)
	}
}

func (p *Pool) ban(id string) {
	if len(p.banned) >= maxBanned {
		clear(p.banned)
	}
	p.banned[id] = true
}

// TakeStates returns, in id order, the State of every proxy changed since
// the last call (a new version each) and of every proxy forgotten
// meanwhile, and starts over: the caller writes them to the state topic in
// this order. Writers must not take states concurrently (a later version
// overtaken by an earlier one would be what compaction keeps).
func (p *Pool) TakeStates() []State {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]State, 0, len(p.dirty)+len(p.gone))
	for id := range p.dirty {
		px, ok := p.proxies[id]
		if !ok {
			continue
		}
		px.version++
		out = append(out, stateOf(id, px))
	}
	for id, st := range p.gone {
		if _, back := p.proxies[id]; back {
			continue // forgotten and tracked again since: its dirty state says so
		}
		out = append(out, st)
	}
	clear(p.dirty)
	clear(p.gone)
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func stateOf(id string, px *proxy) State {
	st := State{ID: id, Version: px.version, Harvested: px.harvested, Status: px.status, LatencyEWMA: px.latency}
	if len(px.blocked) > 0 {
		st.BlockedHosts = make([]string, 0, len(px.blocked))
		for h := range px.blocked {
			st.BlockedHosts = append(st.BlockedHosts, h)
		}
		sort.Strings(st.BlockedHosts)
	}
	return st
}

// ApplyState folds a State written by another pool instance (or a previous
// run) into the pool: ignored when the pool holds a newer version of the
// proxy, otherwise it replaces the proxy's state (a Gone state forgets the
// proxy, remembering a ban). What this pool published to the proxies
// topic is kept. It reports whether the pool changed.
func (p *Pool) ApplyState(st State) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	px, ok := p.proxies[st.ID]
	if ok && st.Version < px.version {
		return false
	}
	if st.Gone {
		if st.Banned {
			p.ban(st.ID)
		}
		if !ok {
			return false
		}
		delete(p.proxies, st.ID)
		delete(p.dirty, st.ID)
		return true
	}
	if st.Status.Entry.ID() != st.ID {
		return false // a record that does not describe its key
	}
	if !ok {
		px = &proxy{}
		p.proxies[st.ID] = px
	}
	delete(p.banned, st.ID)
	px.status, px.latency, px.harvested, px.version = st.Status, st.LatencyEWMA, st.Harvested, st.Version
	px.blocked = nil
	if len(st.BlockedHosts) > 0 {
		px.blocked = make(map[string]bool, len(st.BlockedHosts))
		for _, h := range st.BlockedHosts {
			px.blocked[h] = true
		}
	}
	delete(p.dirty, st.ID)
	return true
}

// KeepListed forgets the proxies of the operator's list that entries no
// longer lists (harvested proxies stay) and adds the listed ones the pool
// does not track: what a pool instance does when it starts leading with a
// state loaded from the topic (a line removed from the file while another
// instance led). It returns tombstones for the removed ones this pool
// published live.
func (p *Pool) KeepListed(entries []proxylist.Entry) (removed []Change) {
	p.mu.Lock()
	defer p.mu.Unlock()
	keep := make(map[string]bool, len(entries))
	for _, e := range entries {
		id := e.ID()
		keep[id] = true
		if px, ok := p.proxies[id]; ok {
			if px.harvested || px.status.Entry != e {
				px.harvested = false // the operator's now: never evicted
				px.status.Entry = e
				p.dirty[id] = true
			}
			continue
		}
		p.proxies[id] = newProxy(e)
		p.dirty[id] = true
	}
	for id, px := range p.proxies {
		if keep[id] || px.harvested {
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

// ForgetPublished forgets what this pool published to the proxies topic,
// so that the next Changes republishes every checked proxy: another
// instance may have published since (a pool that starts leading again).
func (p *Pool) ForgetPublished() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.proxies {
		px.published = nil
	}
}
