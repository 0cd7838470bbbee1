package pool

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// TestStatesMirrorPool: the states a pool hands out, applied to another
// pool, give that pool the same view (snapshot, scores, bans, evictions),
// and the second pool's later changes continue the versions.
func TestStatesMirrorPool(t *testing.T) {
	cfg := Config{CheckTimeout: 4 * time.Second, EvictAfter: 1, BanHosts: 2}
	a := entry(t, "127.0.0.1:1")
	b := entry(t, "http://u:p@127.0.0.2:2")
	h := entry(t, "127.0.0.3:3")
	leader, follower := NewWithConfig(cfg), NewWithConfig(cfg)
	leader.Set([]proxylist.Entry{a, b})
	follower.Set([]proxylist.Entry{a, b})
	leader.Add([]proxylist.Entry{h})
	leader.Record(result(a, true, time.Second))
	leader.Record(result(b, true, 2*time.Second))
	leader.Record(result(h, true, time.Second))
	leader.Feedback(b.ID(), "x.example", "blocked")
	leader.Feedback(a.ID(), "", "success")
	leader.Feedback(h.ID(), "x.example", "blocked")
	leader.Feedback(h.ID(), "y.example", "blocked") // banned
	if _, n := leader.Evict(); n != 1 {
		t.Fatalf("evicted %d, want the banned harvested proxy", n)
	}
	states := leader.TakeStates()
	if len(states) != 3 {
		t.Fatalf("%d states, want 3 (two live, one gone)", len(states))
	}
	if again := leader.TakeStates(); len(again) != 0 {
		t.Errorf("second TakeStates = %d states, want none", len(again))
	}
	for _, st := range states {
		follower.ApplyState(st)
	}
	if got, want := follower.Snapshot(), leader.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("follower view\n%+v\nwant\n%+v", got, want)
	}
	if follower.Add([]proxylist.Entry{h}) != 0 {
		t.Error("follower harvested a proxy the leader banned")
	}

	// An older version is ignored; a newer one replaces.
	old := states[0]
	leader.Feedback(old.ID, "", "timeout")
	newer := leader.TakeStates()
	if len(newer) != 1 || newer[0].Version <= old.Version {
		t.Fatalf("states after feedback = %+v, want one newer than %d", newer, old.Version)
	}
	follower.ApplyState(newer[0])
	if follower.ApplyState(old) {
		t.Error("an older state was applied")
	}
	if got, want := follower.Snapshot(), leader.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("after an older state: follower view %+v, want %+v", got, want)
	}

	// The follower leads next: its versions go on from the leader's.
	follower.Feedback(old.ID, "", "success")
	next := follower.TakeStates()
	if len(next) != 1 || next[0].Version != newer[0].Version+1 {
		t.Errorf("new leader's state = %+v, want version %d", next, newer[0].Version+1)
	}
}

// TestKeepListed: a new leader keeps harvested proxies, forgets the listed
// ones no longer in its list (a Gone state) and adds the new lines.
func TestKeepListed(t *testing.T) {
	a := entry(t, "127.0.0.1:1")
	b := entry(t, "127.0.0.2:2")
	h := entry(t, "127.0.0.3:3")
	p := New(time.Second)
	p.Set([]proxylist.Entry{a})
	p.Add([]proxylist.Entry{h})
	p.TakeStates()
	p.KeepListed([]proxylist.Entry{b})
	var ids []string
	for _, st := range p.Snapshot() {
		ids = append(ids, st.Entry.Addr())
	}
	slices.Sort(ids)
	if want := []string{b.Addr(), h.Addr()}; !reflect.DeepEqual(ids, want) {
		t.Errorf("tracked %v, want %v", ids, want)
	}
	var gone []string
	for _, st := range p.TakeStates() {
		if st.Gone {
			gone = append(gone, st.ID)
		}
	}
	if len(gone) != 1 || gone[0] != a.ID() {
		t.Errorf("gone %v, want [%s]", gone, a.ID())
	}
}
