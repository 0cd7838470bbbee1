package kafkaio

import (
	"math/rand/v2"
	"testing"
)

func TestOffsetTracker(t *testing.T) {
	type step struct {
		op     string // "add", "ack", "release"
		offset int64
		ok     bool
	}
	tests := []struct {
		name      string
		steps     []step
		want      int64
		wantOK    bool
		unacked   int
		released  int
		committed bool
	}{
		{name: "empty", wantOK: false},
		{name: "one unacked", steps: []step{{"add", 5, true}}, want: 5, wantOK: true, unacked: 1},
		{name: "one acked", steps: []step{{"add", 5, true}, {"ack", 5, true}}, want: 6, wantOK: true},
		{
			name:  "out of order acks stop at lowest unacked",
			steps: []step{{"add", 0, true}, {"add", 1, true}, {"add", 2, true}, {"add", 3, true}, {"ack", 3, true}, {"ack", 1, true}, {"ack", 0, true}},
			want:  2, wantOK: true, unacked: 1,
		},
		{
			name:  "gaps in offsets",
			steps: []step{{"add", 10, true}, {"add", 14, true}, {"add", 20, true}, {"ack", 10, true}, {"ack", 20, true}},
			want:  14, wantOK: true, unacked: 1,
		},
		{
			name:  "all acked after gaps",
			steps: []step{{"add", 10, true}, {"add", 14, true}, {"ack", 14, true}, {"ack", 10, true}},
			want:  15, wantOK: true,
		},
		{
			name:  "duplicate and stale adds rejected",
			steps: []step{{"add", 3, true}, {"add", 3, false}, {"add", 2, false}, {"add", -1, false}},
			want:  3, wantOK: true, unacked: 1,
		},
		{
			name:  "unknown and double acks rejected",
			steps: []step{{"add", 3, true}, {"ack", 4, false}, {"ack", 3, true}, {"ack", 3, false}, {"ack", 2, false}},
			want:  4, wantOK: true,
		},
		{
			name:  "add after everything acked",
			steps: []step{{"add", 0, true}, {"ack", 0, true}, {"add", 1, true}},
			want:  1, wantOK: true, unacked: 1,
		},
		{
			name:  "a released record holds the commit until acked",
			steps: []step{{"add", 0, true}, {"add", 1, true}, {"add", 2, true}, {"release", 0, true}, {"ack", 1, true}},
			want:  0, wantOK: true, unacked: 2, released: 1,
		},
		{
			name:  "acking a released record ends its release",
			steps: []step{{"add", 0, true}, {"add", 1, true}, {"release", 0, true}, {"release", 1, true}, {"ack", 0, true}},
			want:  1, wantOK: true, unacked: 1, released: 1,
		},
		{
			name: "unknown, acked and repeated releases rejected",
			steps: []step{{"add", 0, true}, {"add", 1, true}, {"release", 5, false}, {"ack", 0, true},
				{"release", 0, false}, {"release", 1, true}, {"release", 1, false}},
			want: 1, wantOK: true, unacked: 1, released: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newOffsetTracker()
			for _, s := range tt.steps {
				var ok bool
				switch s.op {
				case "add":
					ok = tr.Add(s.offset)
				case "release":
					ok = tr.Release(s.offset)
				default:
					ok = tr.Ack(s.offset)
				}
				if ok != s.ok {
					t.Fatalf("%s(%d) = %v, want %v", s.op, s.offset, ok, s.ok)
				}
			}
			got, ok := tr.Committable()
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("Committable() = %d, %v, want %d, %v", got, ok, tt.want, tt.wantOK)
			}
			if n := tr.Unacked(); n != tt.unacked {
				t.Errorf("Unacked() = %d, want %d", n, tt.unacked)
			}
			if n := tr.Released(); n != tt.released {
				t.Errorf("Released() = %d, want %d", n, tt.released)
			}
			if n := tr.Held(); n != tt.unacked-tt.released {
				t.Errorf("Held() = %d, want %d", n, tt.unacked-tt.released)
			}
		})
	}
}

// checkTracker replays adds and acks against a reference model (a set of
// unacked offsets) and checks Committable and Unacked after every step.
func checkTracker(t *testing.T, r *rand.Rand, n int) {
	t.Helper()
	tr := newOffsetTracker()
	var added []int64
	unacked := map[int64]bool{}
	next := int64(r.IntN(3))
	for range n {
		if len(unacked) == 0 || r.IntN(2) == 0 {
			if !tr.Add(next) {
				t.Fatalf("Add(%d) rejected", next)
			}
			added = append(added, next)
			unacked[next] = true
			next += 1 + int64(r.IntN(3)) // gaps happen
		} else {
			// Ack a random unacked record (maps iterate randomly, but
			// pick via the added slice to use r).
			var off int64
			for {
				off = added[r.IntN(len(added))]
				if unacked[off] {
					break
				}
			}
			if !tr.Ack(off) {
				t.Fatalf("Ack(%d) rejected", off)
			}
			delete(unacked, off)
			if tr.Ack(off) {
				t.Fatalf("second Ack(%d) accepted", off)
			}
		}
		// Model: lowest unacked, else last added + 1.
		want := int64(-1)
		for off := range unacked {
			if want == -1 || off < want {
				want = off
			}
		}
		if want == -1 {
			want = added[len(added)-1] + 1
		}
		got, ok := tr.Committable()
		if !ok || got != want {
			t.Fatalf("Committable() = %d, %v, want %d (unacked %v)", got, ok, want, unacked)
		}
		if tr.Unacked() != len(unacked) {
			t.Fatalf("Unacked() = %d, want %d", tr.Unacked(), len(unacked))
		}
		if live := len(tr.window) - tr.head; live > 0 && tr.window[tr.head].acked {
			t.Fatalf("window front is acked")
		}
	}
}

func TestOffsetTrackerRandom(t *testing.T) {
	for seed := range uint64(50) {
		checkTracker(t, rand.New(rand.NewPCG(seed, 1)), 2000)
	}
}

// FuzzOffsetTracker checks, for any interleaving of adds and acks, that
// Committable is the lowest unacked offset (or the last offset + 1 when all
// are acked) and Unacked counts the unacked records; it never panics.
func FuzzOffsetTracker(f *testing.F) {
	f.Add(uint64(1), uint16(100))
	f.Add(uint64(42), uint16(3000))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16) {
		checkTracker(t, rand.New(rand.NewPCG(seed, 7)), int(n)%5000)
	})
}

func TestOffsetTrackerBoundedWindow(t *testing.T) {
	// Everything acked in order: the window never holds more than one
	// record.
	tr := newOffsetTracker()
	for off := range int64(100000) {
		tr.Add(off)
		tr.Ack(off)
	}
	if len(tr.window) != 0 || cap(tr.window) > 16 {
		t.Errorf("window len %d cap %d after in-order acks, want empty and small", len(tr.window), cap(tr.window))
	}
}
