package politeness

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/priority"
)

// pitem is a request with a priority, ranked as the fetcher ranks them
// (priority.Rank: the highest priority, then the lowest depth).
type pitem struct {
	name     string
	priority int32
	depth    uint32
}

func pitemRank(it *pitem) uint32 { return priority.Rank(it.priority, it.depth) }

// raiseTo is a Raise of the item named name to priority p, as the fetcher
// applies a reprioritize record.
func raiseTo(e *Engine[*pitem], host, name string, p int32) RaiseResult {
	return e.Raise(host, func(it *pitem) (uint32, bool) {
		if it.name != name {
			return 0, false
		}
		return priority.Rank(p, it.depth), true
	}, func(it *pitem) { it.priority = p })
}

// TestPriorityOrder: a host's queue takes the highest priority first,
// then the lowest depth, then push order; a raise moves an item up and
// never down, and a raise of an item the host does not hold changes
// nothing.
func TestPriorityOrder(t *testing.T) {
	type op struct {
		push  *pitem
		raise string // the item's name
		to    int32
		want  RaiseResult
	}
	tests := []struct {
		name string
		ops  []op
		want []string // the order the host's items start in
	}{
		{
			name: "priority beats depth",
			ops: []op{
				{push: &pitem{name: "shallow", depth: 0}},
				{push: &pitem{name: "deep-but-wanted", depth: 5, priority: 1}},
				{push: &pitem{name: "middle", depth: 2}},
				{push: &pitem{name: "unwanted", depth: 0, priority: -3}},
			},
			want: []string{"deep-but-wanted", "shallow", "middle", "unwanted"},
		},
		{
			name: "equal priority is breadth-first, then push order",
			ops: []op{
				{push: &pitem{name: "d2a", depth: 2, priority: 7}},
				{push: &pitem{name: "d1a", depth: 1, priority: 7}},
				{push: &pitem{name: "d2b", depth: 2, priority: 7}},
				{push: &pitem{name: "d1b", depth: 1, priority: 7}},
			},
			want: []string{"d1a", "d1b", "d2a", "d2b"},
		},
		{
			name: "a raise reorders",
			ops: []op{
				{push: &pitem{name: "a", depth: 1}},
				{push: &pitem{name: "b", depth: 1}},
				{push: &pitem{name: "c", depth: 3}},
				{raise: "c", to: 2, want: Raised},
				{raise: "b", to: 1, want: Raised},
			},
			want: []string{"c", "b", "a"},
		},
		{
			name: "a raise to an equal priority keeps push order",
			ops: []op{
				{push: &pitem{name: "first", depth: 1, priority: 4}},
				{push: &pitem{name: "second", depth: 1}},
				{raise: "second", to: 4, want: Raised},
			},
			want: []string{"first", "second"},
		},
		{
			name: "a raise never lowers",
			ops: []op{
				{push: &pitem{name: "high", depth: 4, priority: 9}},
				{push: &pitem{name: "low", depth: 0}},
				{raise: "high", to: 2, want: NotHigher},
				{raise: "high", to: 9, want: NotHigher},
			},
			want: []string{"high", "low"},
		},
		{
			name: "a raise of an unknown item is a no-op",
			ops: []op{
				{push: &pitem{name: "x", depth: 1}},
				{push: &pitem{name: "y", depth: 0}},
				{raise: "nobody", to: 100, want: NotQueued},
			},
			want: []string{"y", "x"},
		},
		{
			name: "a raised retry not yet due keeps its not_before, then goes first",
			ops: []op{
				{push: &pitem{name: "retry", depth: 5}}, // pushed due at 150 below
				{push: &pitem{name: "a", depth: 0}},
				{push: &pitem{name: "b", depth: 0}},
				{raise: "retry", to: 3, want: Raised},
			},
			want: []string{"a", "retry", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := t0
			e := NewRanked(func() time.Time { return clock }, Options{Delay: 100 * time.Millisecond}, pitemRank)
			for _, o := range tt.ops {
				if o.push != nil {
					var nb time.Time
					if o.push.name == "retry" {
						nb = at(150)
					}
					e.Push("h", o.push, nb)
					continue
				}
				if got := raiseTo(e, "h", o.raise, o.to); got != o.want {
					t.Fatalf("raise %s to %d: %v, want %v", o.raise, o.to, got, o.want)
				}
			}
			var got []string
			for i := range tt.want {
				clock = at(100 * (i + 1))
				h, it, ok := e.Next(clock)
				if !ok || h != "h" {
					t.Fatalf("Next at %v: %q %v, want host h; started %v", clock, h, ok, got)
				}
				got = append(got, it.name)
				e.Done(h, clock)
			}
			if e.Len() != 0 {
				t.Fatalf("%d items left", e.Len())
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("started %v, want %v", got, tt.want)
				}
			}
		})
	}
	clock := t0
	e := NewRanked(func() time.Time { return clock }, Options{}, pitemRank)
	if got := raiseTo(e, "unknown", "x", 5); got != NotQueued {
		t.Fatalf("raise on an unknown host: %v", got)
	}
	e.Push("h", &pitem{name: "x"}, time.Time{})
	clock = at(1000)
	if _, it, ok := e.Next(clock); !ok || it.name != "x" {
		t.Fatal("x did not start")
	}
	if got := raiseTo(e, "h", "x", 5); got != NotQueued {
		t.Fatalf("raise of an item in flight: %v, want not queued", got)
	}
}

// FuzzRaise runs one host's queue through random pushes (some due later),
// raises and takes against a model: of the items that may start at a
// take, the engine always starts the best-ranked, then the first pushed;
// a raise reports what the model expects, and nothing is lost or doubled.
func FuzzRaise(f *testing.F) {
	f.Add([]byte{0, 3, 0, 5, 1, 0, 9, 2, 2, 1, 1, 7, 2, 2, 2})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 2, 2, 2})
	f.Add([]byte{0, 200, 0, 17, 3, 1, 0, 250, 1, 2, 60, 2, 0, 9, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 300 {
			ops = ops[:300]
		}
		const delay = 10 * time.Millisecond
		clock := t0
		e := NewRanked(func() time.Time { return clock }, Options{Delay: delay, MaxCrawlDelay: time.Second}, pitemRank)
		type queued struct {
			it        *pitem
			rank      uint32
			seq       int
			notBefore time.Time
		}
		var model []queued
		seq, started := 0, 0
		arg := func(i *int) byte {
			*i++
			if *i < len(ops) {
				return ops[*i]
			}
			return 0
		}
		for i := 0; i < len(ops); i++ {
			switch ops[i] % 3 {
			case 0: // push: priority -4..3, depth 0..7, due now or up to 3 delays later
				b := arg(&i)
				it := &pitem{name: string(rune('A' + seq)), priority: int32(b&7) - 4, depth: uint32(b>>3) & 7}
				var nb time.Time
				if later := b >> 6; later > 0 {
					nb = clock.Add(time.Duration(later) * delay)
				}
				e.Push("h", it, nb)
				model = append(model, queued{it: it, rank: pitemRank(it), seq: seq, notBefore: nb})
				seq++
			case 1: // raise an item (or one that is not queued) to a priority -4..11
				name := string(rune('A' + int(arg(&i))%(seq+1)))
				p := int32(arg(&i)&15) - 4
				want := NotQueued
				for j := range model {
					if model[j].it.name != name {
						continue
					}
					want = NotHigher
					if r := priority.Rank(p, model[j].it.depth); r < model[j].rank {
						want = Raised
						model[j].rank = r
					}
				}
				if got := raiseTo(e, "h", name, p); got != want {
					t.Fatalf("op %d: raise %s to %d: %v, want %v", i, name, p, got, want)
				}
			case 2: // take the next item once the host may start
				at, ok := e.NextWakeup()
				if !ok {
					if len(model) != 0 {
						t.Fatalf("op %d: no wakeup with %d items queued", i, len(model))
					}
					continue
				}
				if at.After(clock) {
					clock = at
				}
				h, it, ok := e.Next(clock)
				if !ok || h != "h" {
					t.Fatalf("op %d: Next at its wakeup %v: %q %v", i, at, h, ok)
				}
				best := -1
				for j, q := range model {
					if q.notBefore.After(clock) {
						continue
					}
					if best < 0 || q.rank < model[best].rank || (q.rank == model[best].rank && q.seq < model[best].seq) {
						best = j
					}
				}
				if best < 0 {
					t.Fatalf("op %d: started %s with nothing due at %v", i, it.name, clock)
				}
				if want := model[best].it; it != want {
					t.Fatalf("op %d: started %s (rank %d), want %s (rank %d)", i, it.name, pitemRank(it), want.name, model[best].rank)
				}
				if pitemRank(it) != model[best].rank {
					t.Fatalf("op %d: %s carries rank %d, raised to %d", i, it.name, pitemRank(it), model[best].rank)
				}
				model = append(model[:best], model[best+1:]...)
				started++
				e.Done(h, clock)
			}
		}
		if e.Len() != len(model) || started+len(model) != seq {
			t.Fatalf("engine holds %d, model %d; %d started of %d pushed", e.Len(), len(model), started, seq)
		}
	})
}
