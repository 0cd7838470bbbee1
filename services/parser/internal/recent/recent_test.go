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

// TestCollisionForgets: a fingerprint of the same slot replaces the older
// one, which is then no longer published (lossy, never wrong).
func TestCollisionForgets(t *testing.T) {
	l := New(1) // one slot: every fingerprint collides
	a, b := uint64(0x1111)<<48, uint64(0x1112)<<48
	l.Add(a, 1)
	l.Add(b, 1)
	if l.Published(a, 1) || !l.Published(b, 1) {
		t.Errorf("after a collision: a %v b %v, want a forgotten and b kept", l.Published(a, 1), l.Published(b, 1))
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
