package pagebudget

import "testing"

// TestEstimate walks a crawl through charges, a global count that
// overlaps charges, and give-backs: nothing is counted twice and nothing
// charged here is forgotten.
func TestEstimate(t *testing.T) {
	var e Estimate
	e.Charge(3) // 3 here, unrecorded
	if e.Used() != 3 {
		t.Fatalf("used %d after 3 charges, want 3", e.Used())
	}
	started := e.CountStarts()
	e.Charge(2)            // during the count: not in it
	e.Counted(10, started) // the count: 10 everywhere, our 3 among them
	if got := e.Used(); got != 12 {
		t.Errorf("used %d, want 12 (10 counted + 2 since)", got)
	}
	e.Charge(-1) // one given back
	if got := e.Used(); got != 11 {
		t.Errorf("used %d after a give-back, want 11", got)
	}
	if !e.Exhausted(11) || e.Exhausted(12) || e.Exhausted(0) {
		t.Errorf("Exhausted(11, 12, 0) = %v %v %v, want true false false", e.Exhausted(11), e.Exhausted(12), e.Exhausted(0))
	}
	// A count that misses charges made here before it (not recorded
	// yet): the local count holds them.
	var f Estimate
	f.Charge(5)
	f.Counted(0, f.CountStarts())
	if f.Used() != 5 {
		t.Errorf("used %d with 5 unrecorded local charges and a count of 0, want 5", f.Used())
	}
}

// FuzzEstimate: with one process whose charges are recorded at once, the
// estimate is the exact count whatever the order of charges and counts.
func FuzzEstimate(f *testing.F) {
	f.Add([]byte{1, 2, 0, 3, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var e Estimate
		var recorded int64
		for _, op := range ops {
			if op == 0 {
				e.Counted(recorded, e.CountStarts())
				continue
			}
			n := int64(op % 5)
			e.Charge(n)
			recorded += n
			if e.Used() != recorded {
				t.Fatalf("used %d, want %d", e.Used(), recorded)
			}
		}
	})
}
