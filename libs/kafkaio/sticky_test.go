package kafkaio_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// checkBalanced fails unless every partition has exactly one owner and the
// members' counts differ by at most one.
func checkBalanced(t *testing.T, got map[string][]int, partitions int) {
	t.Helper()
	if len(got) == 0 {
		return // no member, nothing to own
	}
	seen := make(map[int]string)
	lo, hi := partitions+1, -1
	for m, ps := range got {
		lo, hi = min(lo, len(ps)), max(hi, len(ps))
		for _, p := range ps {
			if o, dup := seen[p]; dup {
				t.Fatalf("partition %d owned by %s and %s: %v", p, o, m, got)
			}
			seen[p] = m
		}
	}
	if len(seen) != partitions {
		t.Fatalf("%d of %d partitions assigned: %v", len(seen), partitions, got)
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: counts from %d to %d: %v", lo, hi, got)
	}
}

func owners(a map[string][]int) map[int]string {
	out := make(map[int]string)
	for m, ps := range a {
		for _, p := range ps {
			out[p] = m
		}
	}
	return out
}

// moves counts partitions whose owner changed, and among them those taken
// from a member that is still in after.
func moves(before, after map[string][]int) (moved, fromSurvivors int) {
	ob, oa := owners(before), owners(after)
	for p, m := range oa {
		prev, had := ob[p]
		if !had || prev == m {
			continue
		}
		moved++
		if _, alive := after[prev]; alive {
			fromSurvivors++
		}
	}
	return moved, fromSurvivors
}

func claimsOf(a map[string][]int, gen int32) []kafkaio.StickyClaim {
	var out []kafkaio.StickyClaim
	for m, ps := range a {
		out = append(out, kafkaio.StickyClaim{Member: m, Generation: gen, Owned: ps})
	}
	return out
}

func TestAssignSticky(t *testing.T) {
	tests := []struct {
		name       string
		claims     []kafkaio.StickyClaim
		partitions int
		want       map[string][]int
	}{
		{"no members", nil, 4, map[string][]int{}},
		{"fresh group", []kafkaio.StickyClaim{{Member: "a"}, {Member: "b"}}, 5,
			map[string][]int{"a": {0, 1, 2}, "b": {3, 4}}},
		{"claims kept", []kafkaio.StickyClaim{{Member: "a", Owned: []int{3, 4}}, {Member: "b", Owned: []int{0, 1, 2}}}, 5,
			map[string][]int{"a": {3, 4}, "b": {0, 1, 2}}},
		{"newcomer takes the surplus", []kafkaio.StickyClaim{{Member: "a", Owned: []int{0, 1, 2}}, {Member: "b", Owned: []int{3, 4, 5}}, {Member: "c"}}, 6,
			map[string][]int{"a": {0, 1}, "b": {3, 4}, "c": {2, 5}}},
		{"leaver's share spreads", []kafkaio.StickyClaim{{Member: "a", Owned: []int{0, 1}}, {Member: "c", Owned: []int{4, 5}}}, 6,
			map[string][]int{"a": {0, 1, 2}, "c": {3, 4, 5}}},
		{"newer generation wins a conflict", []kafkaio.StickyClaim{{Member: "a", Generation: 3, Owned: []int{0, 1}}, {Member: "b", Generation: 5, Owned: []int{1, 2}}}, 4,
			map[string][]int{"a": {0, 3}, "b": {1, 2}}},
		{"unknown partitions ignored", []kafkaio.StickyClaim{{Member: "a", Owned: []int{7, 9, 0}}}, 2,
			map[string][]int{"a": {0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kafkaio.AssignSticky(tt.claims, seq(tt.partitions))
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("AssignSticky = %v, want %v", got, tt.want)
			}
			checkBalanced(t, got, tt.partitions)
		})
	}
}

// TestAssignStickyProperties runs random join/leave sequences and checks
// after every step: balanced, every partition owned once, a join moves at
// most ceil(P/(n+1)) partitions (all to the newcomer), a leave moves only
// the leaver's partitions.
func TestAssignStickyProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, p := range []int{1, 3, 7, 16, 32, 64, 100} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			cur := map[string][]int{}
			next := 0
			for step := range 200 {
				gen := int32(step + 1)
				join := len(cur) <= 1 || (len(cur) < 12 && rng.IntN(2) == 0)
				claims := claimsOf(cur, gen-1)
				var left string
				if join {
					claims = append(claims, kafkaio.StickyClaim{Member: fmt.Sprintf("m%03d", next)})
					next++
				} else {
					i := rng.IntN(len(claims))
					left = claims[i].Member
					claims = slices.Delete(claims, i, i+1)
				}
				rng.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
				got := kafkaio.AssignSticky(claims, seq(p))
				checkBalanced(t, got, p)
				moved, fromSurvivors := moves(cur, got)
				n := len(cur)
				switch {
				case join && moved > (p+n)/(n+1):
					t.Fatalf("step %d: join of member %d moved %d partitions, want <= ceil(%d/%d)", step, n+1, moved, p, n+1)
				case join && moved != fromSurvivors:
					t.Fatalf("step %d: join moved %d partitions, %d from survivors", step, moved, fromSurvivors)
				case !join && (fromSurvivors != 0 || moved != len(cur[left])):
					t.Fatalf("step %d: leave of %s (owned %d) moved %d, %d from survivors", step, left, len(cur[left]), moved, fromSurvivors)
				}
				cur = got
			}
		})
	}
}

func FuzzStickyUserData(f *testing.F) {
	b := kafkaio.NewStickyBalancer()
	b.SetOwned(7, "t", []int{1, 2, 3})
	seed, _ := b.UserData()
	f.Add(seed, []byte{})
	f.Add([]byte{1, 0, 0, 0, 1, 0, 1, 0, 1, 't', 0xff, 0xff, 0xff, 0xff}, seed)
	f.Fuzz(func(t *testing.T, a, c []byte) {
		parts := []kafka.Partition{{Topic: "t", ID: 0}, {Topic: "t", ID: 1}, {Topic: "t", ID: 2}, {Topic: "t", ID: 3}}
		members := []kafka.GroupMember{{ID: "a", Topics: []string{"t"}, UserData: a}, {ID: "c", Topics: []string{"t"}, UserData: c}}
		got := kafkaio.NewStickyBalancer().AssignGroups(members, parts)
		flat := map[string][]int{}
		for m, topics := range got {
			flat[m] = topics["t"]
		}
		checkBalanced(t, flat, len(parts))
	})
}

func TestStickyBalancerUserDataRoundTrip(t *testing.T) {
	a, b := kafkaio.NewStickyBalancer(), kafkaio.NewStickyBalancer()
	a.SetOwned(4, "t", []int{0, 1, 2, 3, 4, 5})
	b.SetOwned(4, "t", []int{6, 7, 8, 9, 10, 11})
	ua, _ := a.UserData()
	ub, _ := b.UserData()
	members := []kafka.GroupMember{
		{ID: "a", Topics: []string{"t"}, UserData: ua},
		{ID: "b", Topics: []string{"t"}, UserData: ub},
		{ID: "new", Topics: []string{"t"}},
	}
	var parts []kafka.Partition
	for i := range 12 {
		parts = append(parts, kafka.Partition{Topic: "t", ID: i})
	}
	got := a.AssignGroups(members, parts)
	want := "map[a:map[t:[0 1 2 3]] b:map[t:[6 7 8 9]] new:map[t:[4 5 10 11]]]"
	if fmt.Sprint(got) != want {
		t.Errorf("AssignGroups = %v, want %v", got, want)
	}
}

// TestStickyBalancerMovesAgainstRange runs the same join/leave sequence of
// consumer group members on the real broker with the sticky balancer and
// with kafka-go's range balancer, prints the partitions each step moved,
// and checks the sticky bounds.
func TestStickyBalancerMovesAgainstRange(t *testing.T) {
	if testing.Short() {
		t.Skip("rebalances on the real broker take seconds")
	}
	const partitions = 12
	type step struct {
		join   bool
		member string
	}
	steps := []step{{true, "a"}, {true, "b"}, {true, "c"}, {true, "d"}, {false, "b"}, {true, "e"}, {false, "a"}}
	c := kafkatest.Config(t, partitions)
	topic := c.Topics().Fetch

	run := func(name string, balancer func() kafka.GroupBalancer) []string {
		gc := groupConfig(c, topic)
		gc.GroupID = c.GroupFor("moves-" + name)
		groups := map[string]*kafkaio.Group{}
		stops := map[string]func() error{}
		defer func() {
			for _, stop := range stops {
				_ = stop()
			}
		}()
		assignment := func() map[string][]int {
			out := map[string][]int{}
			for m, g := range groups {
				out[m] = g.Assigned()
			}
			return out
		}
		stable := func() bool {
			a := assignment()
			total, lo, hi := 0, partitions, 0
			seen := map[int]bool{}
			for _, ps := range a {
				total += len(ps)
				lo, hi = min(lo, len(ps)), max(hi, len(ps))
				for _, p := range ps {
					if seen[p] {
						return false
					}
					seen[p] = true
				}
			}
			return total == partitions && hi-lo <= 1
		}
		var report []string
		prev := map[string][]int{}
		for _, s := range steps {
			if s.join {
				gc := gc
				gc.Balancers = []kafka.GroupBalancer{balancer()}
				g, err := kafkaio.NewGroup(c, gc, newRecorder(nil).assign, zaptest.NewLogger(t).Named(name+"-"+s.member), prometheus.NewRegistry())
				if err != nil {
					t.Fatal(err)
				}
				groups[s.member] = g
				stops[s.member] = runGroup(t, g)
			} else {
				if err := stops[s.member](); err != nil {
					t.Fatalf("stop %s: %v", s.member, err)
				}
				delete(stops, s.member)
				delete(groups, s.member)
			}
			// Balanced for 300ms: a second rebalance would show there.
			stableFor(t, 60*time.Second, 300*time.Millisecond, name+" balanced after "+s.member, stable)
			cur := assignment()
			moved, fromSurvivors := moves(prev, cur)
			n := len(prev)
			verb := "join"
			if !s.join {
				verb = "leave"
			}
			report = append(report, fmt.Sprintf("%s %s (n=%d): moved %d (%d from staying members)", verb, s.member, len(cur), moved, fromSurvivors))
			if name == "sticky" {
				switch {
				case s.join && n > 0 && moved > (partitions+n)/(n+1):
					t.Errorf("sticky: join of %s moved %d partitions, want <= ceil(%d/%d)", s.member, moved, partitions, n+1)
				case !s.join && (fromSurvivors != 0 || moved != len(prev[s.member])):
					t.Errorf("sticky: leave of %s (owned %d) moved %d, %d from staying members", s.member, len(prev[s.member]), moved, fromSurvivors)
				}
			}
			prev = cur
		}
		return report
	}
	sticky := run("sticky", func() kafka.GroupBalancer { return kafkaio.NewStickyBalancer() })
	rangeB := run("range", func() kafka.GroupBalancer { return kafka.RangeGroupBalancer{} })
	for i := range sticky {
		t.Logf("P=%d  sticky: %-45s range: %s", partitions, sticky[i], rangeB[i])
	}
}
