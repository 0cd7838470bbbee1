package pool

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/check"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

func entry(t *testing.T, line string) proxylist.Entry {
	t.Helper()
	e, ok, err := proxylist.ParseLine(line)
	if err != nil || !ok {
		t.Fatalf("parse %q: %v", line, err)
	}
	return e
}

func result(e proxylist.Entry, alive bool, latency time.Duration) check.Result {
	r := check.Result{Entry: e, Alive: alive, Latency: latency, Outcome: check.OK, CheckedAt: time.Unix(100, 0)}
	if !alive {
		r.Outcome = check.Connect
	}
	return r
}

// describe renders changes as "+host:port" (live) and "-host:port" (tombstone).
func describe(cs []Change) string {
	var parts []string
	for _, c := range cs {
		sign := "+"
		if c.Delete {
			sign = "-"
		}
		parts = append(parts, sign+c.Status.Entry.Addr())
	}
	return strings.Join(parts, " ")
}

func TestChangesAcrossRounds(t *testing.T) {
	a := entry(t, "127.0.0.1:1")
	b := entry(t, "127.0.0.2:2")
	aNewCreds := entry(t, "http://u:p@127.0.0.1:1")
	type round struct {
		results []check.Result
		want    []string // changes, any order within the round is sorted by id
	}
	tests := []struct {
		name   string
		rounds []round
	}{
		{
			name: "first round publishes live and tombstones dead",
			rounds: []round{
				{results: []check.Result{result(a, true, time.Second), result(b, false, 0)}, want: []string{"+127.0.0.1:1", "-127.0.0.2:2"}},
			},
		},
		{
			name: "unchanged state publishes nothing",
			rounds: []round{
				{results: []check.Result{result(a, true, time.Second), result(b, false, 0)}, want: []string{"+127.0.0.1:1", "-127.0.0.2:2"}},
				{results: []check.Result{result(a, true, time.Second+100*time.Millisecond), result(b, false, 0)}},
			},
		},
		{
			name: "death and resurrection",
			rounds: []round{
				{results: []check.Result{result(a, true, time.Second)}, want: []string{"+127.0.0.1:1"}},
				{results: []check.Result{result(a, false, 0)}, want: []string{"-127.0.0.1:1"}},
				{results: []check.Result{result(a, false, 0)}},
				{results: []check.Result{result(a, true, time.Second)}, want: []string{"+127.0.0.1:1"}},
			},
		},
		{
			name: "score move and credential change republish",
			rounds: []round{
				{results: []check.Result{result(a, true, time.Second)}, want: []string{"+127.0.0.1:1"}},
				{results: []check.Result{result(a, true, 4*time.Second)}, want: []string{"+127.0.0.1:1"}},
				{results: []check.Result{result(aNewCreds, true, 4*time.Second)}, want: []string{"+127.0.0.1:1"}},
			},
		},
		{
			name: "canceled checks are ignored",
			rounds: []round{
				{results: []check.Result{{Entry: a, Outcome: check.Canceled}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(5 * time.Second)
			p.Set([]proxylist.Entry{a, b})
			for i, r := range tt.rounds {
				for _, res := range r.results {
					p.Record(res)
				}
				cs := p.Changes()
				got := map[string]bool{}
				for _, s := range strings.Fields(describe(cs)) {
					got[s] = true
				}
				if len(got) != len(r.want) {
					t.Fatalf("round %d: changes %q, want %q", i, describe(cs), r.want)
				}
				for _, w := range r.want {
					if !got[w] {
						t.Fatalf("round %d: changes %q, want %q", i, describe(cs), r.want)
					}
				}
				p.MarkPublished(cs)
				if again := p.Changes(); len(again) != 0 {
					t.Fatalf("round %d: changes after publish: %s", i, describe(again))
				}
			}
		})
	}
}

func TestSetRemovesAndTombstones(t *testing.T) {
	a := entry(t, "127.0.0.1:1")
	b := entry(t, "127.0.0.2:2")
	p := New(5 * time.Second)
	p.Set([]proxylist.Entry{a, b})
	p.Record(result(a, true, time.Second))
	p.Record(result(b, false, 0))
	p.MarkPublished(p.Changes())
	removed := p.Set(nil)
	if got := describe(removed); got != "-127.0.0.1:1" {
		t.Errorf("removed = %q, want only the live one tombstoned", got)
	}
	if n := len(p.Snapshot()); n != 0 {
		t.Errorf("snapshot has %d proxies, want 0", n)
	}
}

func TestScoreAndCounts(t *testing.T) {
	p := New(4 * time.Second)
	var es []proxylist.Entry
	for i := 1; i <= 4; i++ {
		es = append(es, entry(t, fmt.Sprintf("127.0.0.%d:8080", i)))
	}
	p.Set(es)
	p.Record(result(es[0], true, 0))
	p.Record(result(es[1], true, time.Second))
	p.Record(result(es[2], false, time.Second))
	live, dead := p.Counts()
	if live != 2 || dead != 1 {
		t.Errorf("counts = %d live %d dead, want 2 and 1", live, dead)
	}
	scores := map[string]float64{}
	for _, s := range p.Snapshot() {
		scores[s.Entry.Addr()] = s.Score
	}
	want := map[string]float64{"127.0.0.1:8080": 1, "127.0.0.2:8080": 0.75, "127.0.0.3:8080": 0, "127.0.0.4:8080": 0}
	for k, v := range want {
		if scores[k] != v {
			t.Errorf("score[%s] = %v, want %v", k, scores[k], v)
		}
	}
}

func TestEWMAScore(t *testing.T) {
	a := entry(t, "127.0.0.1:1")
	p := New(4 * time.Second)
	p.Set([]proxylist.Entry{a})
	steps := []struct {
		alive   bool
		latency time.Duration
		want    float64 // score
		success float64
	}{
		{true, 0, 1, 1},
		{true, 2 * time.Second, 0.75, 1},    // latency EWMA 1s
		{false, 0, 0, 0.5},                  // dead scores 0; success halves
		{true, 1 * time.Second, 0.56, 0.75}, // 0.75 * (1 - 1s/4s)
	}
	for i, s := range steps {
		p.Record(result(a, s.alive, s.latency))
		st := p.Snapshot()[0]
		if st.Score != s.want || st.Success != s.success {
			t.Errorf("step %d: score %v success %v, want %v %v", i, st.Score, st.Success, s.want, s.success)
		}
	}
}

func TestFeedbackBansAndEvicts(t *testing.T) {
	a := entry(t, "127.0.0.1:1")
	b := entry(t, "127.0.0.2:2")
	c := entry(t, "127.0.0.3:3")
	own := entry(t, "127.0.0.4:4")
	p := NewWithConfig(Config{CheckTimeout: 4 * time.Second, MaxSize: 4, EvictAfter: 2, BanHosts: 2, BanBelow: 0.3})
	p.Set([]proxylist.Entry{own})
	if n := p.Add([]proxylist.Entry{a, b, c, entry(t, "127.0.0.5:5")}); n != 3 {
		t.Errorf("Add = %d, want 3 (max size 4)", n)
	}
	for _, e := range []proxylist.Entry{a, b, c, own} {
		p.Record(result(e, true, time.Second))
	}
	p.MarkPublished(p.Changes())

	// a: blocked by two hosts → banned. b: times out until its success rate
	// falls under 0.3 → banned. c: fails two checks → evicted. own: from
	// the operator's list, never evicted.
	p.Feedback(a.ID(), "h1", "blocked")
	p.Feedback(a.ID(), "h1", "blocked")
	if p.Snapshot()[0].Banned {
		t.Error("banned after one blocking host")
	}
	p.Feedback(a.ID(), "h2", "blocked")
	for range 12 { // 0.9^12 = 0.28
		p.Feedback(b.ID(), "h", "timeout")
	}
	p.Feedback(b.ID(), "h", "success") // too late
	if p.Feedback("unknown", "h", "success") {
		t.Error("feedback on an unknown proxy applied")
	}
	p.Record(result(c, false, 0))
	p.Record(result(c, false, 0))
	p.Record(result(own, false, 0))
	p.Record(result(own, false, 0))
	p.Record(result(a, true, time.Second)) // a ban survives a good check

	if got := describe(p.Changes()); got != "-127.0.0.1:1 -127.0.0.2:2 -127.0.0.3:3 -127.0.0.4:4" && !sameSet(got, "-127.0.0.1:1 -127.0.0.2:2 -127.0.0.3:3 -127.0.0.4:4") {
		t.Errorf("changes %q, want tombstones for all four", got)
	}
	p.MarkPublished(p.Changes())
	removed, evicted := p.Evict()
	if len(removed) != 0 || evicted != 3 {
		t.Errorf("Evict = %q, %d; want no further tombstones and 3 evicted", describe(removed), evicted)
	}
	snap := p.Snapshot()
	if len(snap) != 1 || snap[0].Entry.Addr() != own.Addr() || p.Usable() != 0 {
		t.Errorf("after eviction: %+v usable %d", snap, p.Usable())
	}
	// A banned proxy is not harvested again; a dead one may come back.
	if n := p.Add([]proxylist.Entry{a, b, c}); n != 1 || p.Usable() != 1 {
		t.Errorf("re-add after eviction = %d usable %d, want only c back", n, p.Usable())
	}
}

func sameSet(a, b string) bool {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != len(fb) {
		return false
	}
	m := map[string]bool{}
	for _, x := range fa {
		m[x] = true
	}
	for _, x := range fb {
		if !m[x] {
			return false
		}
	}
	return true
}
