package dedup

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestSetBasics(t *testing.T) {
	tests := []struct {
		name    string
		adds    []uint64
		present []uint64
		absent  []uint64
		wantLen int
	}{
		{name: "empty", absent: []uint64{0, 1, ^uint64(0)}},
		{name: "zero fingerprint", adds: []uint64{0, 0}, present: []uint64{0}, absent: []uint64{1}, wantLen: 1},
		{name: "max fingerprint", adds: []uint64{^uint64(0)}, present: []uint64{^uint64(0)}, absent: []uint64{0}, wantLen: 1},
		{name: "duplicates", adds: []uint64{7, 7, 9, 7, 9}, present: []uint64{7, 9}, absent: []uint64{8}, wantLen: 2},
		{name: "zero and others", adds: []uint64{0, 1, 2, 3}, present: []uint64{0, 1, 2, 3}, absent: []uint64{4}, wantLen: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range []*Set{{}, New(0), New(100)} {
				for _, fp := range tt.adds {
					s.Add(fp)
				}
				for _, fp := range tt.present {
					if !s.Contains(fp) {
						t.Errorf("Contains(%d) = false, want true", fp)
					}
				}
				for _, fp := range tt.absent {
					if s.Contains(fp) {
						t.Errorf("Contains(%d) = true, want false", fp)
					}
				}
				if s.Len() != tt.wantLen {
					t.Errorf("Len() = %d, want %d", s.Len(), tt.wantLen)
				}
			}
		})
	}
}

func TestAddReportsNew(t *testing.T) {
	var s Set
	if !s.Add(42) {
		t.Fatal("first Add(42) = false, want true")
	}
	if s.Add(42) {
		t.Fatal("second Add(42) = true, want false")
	}
	if !s.Add(0) || s.Add(0) {
		t.Fatal("Add(0) twice did not report true then false")
	}
}

// TestAgainstMap compares the set with map[uint64]struct{} on random data,
// with a key space small enough that about half the adds are repeats.
func TestAgainstMap(t *testing.T) {
	tests := []struct {
		name  string
		hint  int
		n     int
		space uint64 // keys drawn from [0, space); 0 = full 64 bits
	}{
		{name: "full range no hint", n: 50_000},
		{name: "small space no hint", n: 50_000, space: 40_000},
		{name: "small space hinted", hint: 30_000, n: 50_000, space: 40_000},
		{name: "tiny space with zero", n: 2_000, space: 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.n)))
			draw := func() uint64 {
				if tt.space == 0 {
					return rng.Uint64()
				}
				return rng.Uint64N(tt.space)
			}
			s := New(tt.hint)
			m := make(map[uint64]struct{})
			for i := range tt.n {
				fp := draw()
				_, had := m[fp]
				m[fp] = struct{}{}
				if added := s.Add(fp); added == had {
					t.Fatalf("add %d (#%d): Add = %v, map had it = %v", fp, i, added, had)
				}
				if q := draw(); s.Contains(q) != contains(m, q) {
					t.Fatalf("Contains(%d) = %v, map says %v", q, s.Contains(q), contains(m, q))
				}
			}
			if s.Len() != len(m) {
				t.Fatalf("Len() = %d, map has %d", s.Len(), len(m))
			}
			for fp := range m {
				if !s.Contains(fp) {
					t.Fatalf("Contains(%d) = false after adding it", fp)
				}
			}
			if bpu := float64(s.Bytes()) / float64(s.Len()); s.Len() > 1000 && bpu > 16.01 {
				t.Errorf("bytes per fingerprint = %.2f, want <= 16", bpu)
			}
		})
	}
}

func contains(m map[uint64]struct{}, k uint64) bool {
	_, ok := m[k]
	return ok
}

func TestHintAvoidsGrowth(t *testing.T) {
	for _, n := range []int{1, 12, 13, 100, 1000, 12345} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := New(n)
			before := s.Bytes()
			for i := range n {
				s.Add(uint64(i) + 1)
			}
			if s.Bytes() != before {
				t.Fatalf("table grew from %d to %d bytes for %d adds", before, s.Bytes(), n)
			}
		})
	}
}

func TestReset(t *testing.T) {
	s := New(10)
	for i := range uint64(100) {
		s.Add(i)
	}
	s.Reset()
	if s.Len() != 0 {
		t.Fatalf("Len() after Reset = %d", s.Len())
	}
	for i := range uint64(100) {
		if s.Contains(i) {
			t.Fatalf("Contains(%d) after Reset", i)
		}
	}
	s.Add(5)
	if !s.Contains(5) || s.Len() != 1 {
		t.Fatal("set unusable after Reset")
	}
}

// FuzzSet checks the set against a map for any sequence of operations.
// Invariants: never panics; Add reports true exactly when the map did not
// hold the key; Contains agrees with the map; Len equals the map's size.
func FuzzSet(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x01"))
	f.Add([]byte("abcdefgh\x01abcdefgh\x00abcdefgh"))
	f.Fuzz(func(t *testing.T, ops []byte) {
		var s Set
		m := make(map[uint64]struct{})
		for len(ops) >= 9 {
			op, fp := ops[0], binary.LittleEndian.Uint64(ops[1:9])
			ops = ops[9:]
			if op&1 == 0 {
				_, had := m[fp]
				m[fp] = struct{}{}
				if s.Add(fp) == had {
					t.Fatalf("Add(%d) disagrees with map (had=%v)", fp, had)
				}
			}
			if s.Contains(fp) != contains(m, fp) {
				t.Fatalf("Contains(%d) disagrees with map", fp)
			}
			// Small keys collide in the table often: probe a neighbour too.
			if s.Contains(fp+1) != contains(m, fp+1) {
				t.Fatalf("Contains(%d) disagrees with map", fp+1)
			}
		}
		if s.Len() != len(m) {
			t.Fatalf("Len() = %d, map has %d", s.Len(), len(m))
		}
	})
}

var benchSizes = []int{10_000, 1_000_000, 4_000_000}

func filled(n int, rng *rand.Rand) (*Set, []uint64) {
	s := &Set{}
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = rng.Uint64()
		s.Add(keys[i])
	}
	return s, keys
}

// BenchmarkSeenSetContains measures lookups in a grown (not pre-sized) set,
// half hits and half misses, and reports lookups/s and bytes/URL.
func BenchmarkSeenSetContains(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			s, keys := filled(n, rng)
			probes := make([]uint64, 1<<16)
			for i := range probes {
				if i%2 == 0 {
					probes[i] = keys[rng.IntN(n)]
				} else {
					probes[i] = rng.Uint64()
				}
			}
			hits := 0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if s.Contains(probes[i&(len(probes)-1)]) {
					hits++
				}
			}
			b.StopTimer()
			if hits == 0 {
				b.Fatal("no hits")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
			b.ReportMetric(float64(s.Bytes())/float64(s.Len()), "bytes/URL")
		})
	}
}

// BenchmarkSeenSetAdd measures inserting n random fingerprints into an
// empty set (growth included), and reports adds/s and bytes/URL.
func BenchmarkSeenSetAdd(b *testing.B) {
	for _, n := range benchSizes[:2] {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(3, 4))
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = rng.Uint64()
			}
			var s *Set
			for b.Loop() {
				s = &Set{}
				for _, k := range keys {
					s.Add(k)
				}
			}
			b.ReportMetric(float64(b.N)*float64(n)/b.Elapsed().Seconds(), "adds/s")
			b.ReportMetric(float64(s.Bytes())/float64(s.Len()), "bytes/URL")
		})
	}
}

// BenchmarkMapContains is the baseline: the same lookups in a Go map.
func BenchmarkMapContains(b *testing.B) {
	n := 1_000_000
	rng := rand.New(rand.NewPCG(1, 2))
	m := make(map[uint64]struct{}, n)
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = rng.Uint64()
		m[keys[i]] = struct{}{}
	}
	probes := make([]uint64, 1<<16)
	for i := range probes {
		probes[i] = keys[rng.IntN(n)]
	}
	hits := 0
	for i := 0; b.Loop(); i++ {
		if _, ok := m[probes[i&(len(probes)-1)]]; ok {
			hits++
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// TestMarkAgainstMap: Mark reports a fingerprint's first mark once, marks
// survive the table's growth and Reset clears them; a fingerprint not in
// the set is never marked.
func TestMarkAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	s := New(0)
	in := map[uint64]bool{}
	marked := map[uint64]bool{}
	for i := range 60_000 {
		fp := rng.Uint64N(30_000) // zero included
		switch rng.IntN(3) {
		case 0, 1:
			s.Add(fp)
			in[fp] = true
		default:
			gotIn, first := s.Mark(fp)
			if gotIn != in[fp] || first != (in[fp] && !marked[fp]) {
				t.Fatalf("Mark(%d) #%d = %v, %v; want in %v, first %v", fp, i, gotIn, first, in[fp], in[fp] && !marked[fp])
			}
			if in[fp] {
				marked[fp] = true
			}
		}
	}
	for fp := range in {
		if _, first := s.Mark(fp); first == marked[fp] {
			t.Fatalf("after growth Mark(%d) first = %v, but marked before = %v", fp, first, marked[fp])
		}
	}
	s.Reset()
	s.Add(5)
	if in, first := s.Mark(5); !in || !first {
		t.Errorf("after Reset Mark(5) = %v, %v; want a first mark", in, first)
	}
	if bpu := float64(s.Bytes()) / 8 / float64(len(s.slots)); bpu > 1+1.0/64+0.001 {
		t.Errorf("with marks the table takes %.4f words per slot, want 1 + 1/64", bpu)
	}
}
