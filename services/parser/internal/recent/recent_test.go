package recent

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/trawl-crawler/trawl/libs/fingerprint"
)

func TestPublished(t *testing.T) {
	l := New(1000)
	if l.Len() != 1024 {
		t.Fatalf("Len = %d, want 1024", l.Len())
	}
	const fp = 0x9e3779b97f4a7c15
	tests := []struct {
		name  string
		add   []uint32 // depths added, in order
		depth uint32
		want  bool
	}{
		{"never added", nil, 3, false},
		{"same depth", []uint32{3}, 3, true},
		{"deeper again", []uint32{3}, 4, true},
		{"shallower: publish again", []uint32{3}, 2, false},
		{"shallower added later wins", []uint32{5, 2}, 2, true},
		{"deeper added later keeps the shallower", []uint32{2, 5}, 3, true},
		{"depths beyond 255 share the last value", []uint32{300}, 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(16)
			for _, d := range tt.add {
				l.Add(fp, d)
			}
			if got := l.Published(fp, tt.depth); got != tt.want {
				t.Errorf("Published(depth %d) after %v = %v, want %v", tt.depth, tt.add, got, tt.want)
			}
		})
	}
}

// TestCollisionForgets: a third fingerprint of a full bucket replaces one
// of the two, which is then no longer published (lossy, never wrong).
func TestCollisionForgets(t *testing.T) {
	l := New(2) // one bucket: every fingerprint collides
	fps := []uint64{0x1111 << 48, 0x1112 << 48, 0x1113 << 48}
	for _, fp := range fps {
		l.Add(fp, 1)
	}
	kept := 0
	for _, fp := range fps[:2] {
		if l.Published(fp, 1) {
			kept++
		}
	}
	if kept != 1 || !l.Published(fps[2], 1) {
		t.Errorf("after a collision: %d of the first two kept, the third %v; want one, and the third kept", kept, l.Published(fps[2], 1))
	}
}

// TestBucketHoldsTwo: two fingerprints of one bucket are both kept, and a
// shallower depth of either replaces its own slot only.
func TestBucketHoldsTwo(t *testing.T) {
	l := New(2)
	a, b := uint64(0x1111)<<48, uint64(0x1112)<<48
	l.Add(a, 3)
	l.Add(b, 5)
	l.Add(b, 2)
	if !l.Published(a, 3) || l.Published(a, 2) || !l.Published(b, 2) {
		t.Errorf("a at 3: %v, a at 2: %v, b at 2: %v; want true, false, true", l.Published(a, 3), l.Published(a, 2), l.Published(b, 2))
	}
}

// TestURLsDifferingInTheLastByte: Rabin fingerprints of URLs that differ
// in their last byte differ in their low bits only; they are still told
// apart.
func TestURLsDifferingInTheLastByte(t *testing.T) {
	l := New(1 << 10)
	x := fingerprint.URL("c", "http://127.0.0.2/x")
	z := fingerprint.URL("c", "http://127.0.0.2/z")
	if x^z > 0xff {
		t.Fatalf("premise: fingerprints %x and %x differ beyond the low byte", x, z)
	}
	l.Add(x, 3)
	if l.Published(z, 3) {
		t.Errorf("/z reported published after /x (fingerprints %x, %x)", x, z)
	}
}

func TestNilRemembersNothing(t *testing.T) {
	l := New(0)
	l.Add(42, 1)
	if l.Published(42, 1) || l.Len() != 0 {
		t.Error("a disabled set remembered a link")
	}
}

// TestZeroFingerprint: the fingerprint whose entry would be the empty slot
// is still remembered.
func TestZeroFingerprint(t *testing.T) {
	l := New(8)
	l.Add(0, 0)
	if !l.Published(0, 0) {
		t.Error("fingerprint 0 at depth 0 not remembered")
	}
}

// TestFalsePositivesBounded adds 10 000 random fingerprints to 65 536
// slots: none that was not added is ever reported published, and most
// added ones are remembered.
func TestFalsePositivesBounded(t *testing.T) {
	l := New(1 << 16)
	rng := rand.New(rand.NewPCG(1, 2))
	added := make([]uint64, 10000)
	for i := range added {
		added[i] = rng.Uint64()
		l.Add(added[i], 2)
	}
	kept := 0
	for _, fp := range added {
		if l.Published(fp, 2) {
			kept++
		}
	}
	if kept < 9000 {
		t.Errorf("%d of 10000 remembered, want most", kept)
	}
	for range 100000 {
		if fp := rng.Uint64(); l.Published(fp, 200) {
			t.Fatalf("fingerprint %x never added is published", fp)
		}
	}
}

// TestGrows: a set starts small and doubles once over a quarter of its
// slots are taken, up to its size, so a small crawl never touches the
// full table.
func TestGrows(t *testing.T) {
	l := New(1 << 18)
	if l.Len() != firstSlots || l.Cap() != 1<<18 {
		t.Fatalf("new set: Len %d Cap %d, want %d and %d", l.Len(), l.Cap(), firstSlots, 1<<18)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range firstSlots / 5 {
		l.Add(rng.Uint64(), 1)
	}
	if l.Len() != firstSlots {
		t.Fatalf("%d links in %d slots: Len %d, want no growth yet", firstSlots/5, firstSlots, l.Len())
	}
	for l.Len() == firstSlots {
		l.Add(rng.Uint64(), 1)
	}
	if used := l.table.Load().used.Load(); l.Len() != 2*firstSlots || used <= firstSlots/4 {
		t.Fatalf("after the first doubling: Len %d with %d used, want %d slots and over %d used",
			l.Len(), used, 2*firstSlots, firstSlots/4)
	}
	for range 100000 {
		l.Add(rng.Uint64(), 1)
	}
	if l.Len() != 1<<18 {
		t.Fatalf("over 100000 links: Len %d, want the cap %d", l.Len(), 1<<18)
	}
}

// TestDoublingKeepsEntries: every link a table holds is in the table
// twice its size, at the same depth.
func TestDoublingKeepsEntries(t *testing.T) {
	l := New(1 << 20)
	rng := rand.New(rand.NewPCG(7, 8))
	added := make([]uint64, 3000)
	for i := range added {
		added[i] = rng.Uint64()
		l.Add(added[i], uint32(1+i%7))
	}
	var held []int
	for i, fp := range added {
		if l.Published(fp, uint32(1+i%7)) {
			held = append(held, i)
		}
	}
	if len(held) < 2000 {
		t.Fatalf("premise: %d of 3000 links held in %d slots", len(held), l.Len())
	}
	for want := 2 * firstSlots; want <= 8*firstSlots; want *= 2 {
		l.double(l.table.Load())
		if l.Len() != want {
			t.Fatalf("Len %d after doubling, want %d", l.Len(), want)
		}
		for _, i := range held {
			d := uint32(1 + i%7)
			if !l.Published(added[i], d) || l.Published(added[i], d-1) {
				t.Fatalf("link %d (depth %d) after doubling to %d: published at %d %v, at %d %v",
					i, d, want, d, l.Published(added[i], d), d-1, l.Published(added[i], d-1))
			}
		}
		if used := l.table.Load().used.Load(); used != int64(len(held)) {
			t.Fatalf("%d slots used after doubling, want %d", used, len(held))
		}
	}
	for range 10000 {
		if fp := rng.Uint64(); l.Published(fp, 200) {
			t.Fatalf("fingerprint %x never added is published", fp)
		}
	}
}

func TestConcurrentGrowth(t *testing.T) {
	l := New(1 << 16)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				fp := uint64(g*5000+i+1) * 0x9e3779b97f4a7c15
				l.Add(fp, 3)
				_ = l.Published(fp, 3)
			}
		})
	}
	wg.Wait()
	if l.Len() != 1<<16 {
		t.Errorf("40000 links: Len %d, want %d", l.Len(), 1<<16)
	}
}

func TestConcurrent(_ *testing.T) {
	l := New(1 << 10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				fp := uint64(g*1000+i) * 0x9e3779b97f4a7c15
				l.Add(fp, uint32(i%5))
				_ = l.Published(fp, 4)
			}
		})
	}
	wg.Wait()
}

func BenchmarkPublished(b *testing.B) {
	l := New(1 << 20)
	fps := make([]uint64, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range fps {
		fps[i] = rng.Uint64()
		l.Add(fps[i], 3)
	}
	i := 0
	for b.Loop() {
		_ = l.Published(fps[i&4095], 3)
		i++
	}
}
