package simhash

import (
	"math/rand/v2"
	"testing"
)

// TestBandsFindEveryNearPair: any two simhashes at most MaxNearDistance
// bits apart share a band, and the bands of one simhash are distinct keys.
func TestBandsFindEveryNearPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a := rng.Uint64()
		b := a
		for range rng.IntN(MaxNearDistance + 1) {
			b ^= 1 << rng.IntN(64)
		}
		if !shareBand(a, b) {
			t.Fatalf("%016x and %016x (distance %d) share no band", a, b, Distance(a, b))
		}
	}
	// Flipping every bit of one block pair and one more bit: four bits
	// apart in three blocks of five, two left equal, still found.
	a := rng.Uint64()
	if b := a ^ 1 ^ 1<<13 ^ 1<<26; !shareBand(a, b) {
		t.Errorf("three blocks changed: no shared band")
	}
	seen := map[uint64]bool{}
	for _, bd := range Bands(a) {
		if seen[bd.Packed()] {
			t.Errorf("band %v twice", bd)
		}
		seen[bd.Packed()] = true
		if Unpack(bd.Packed()) != bd {
			t.Errorf("Unpack(Packed(%v)) = %v", bd, Unpack(bd.Packed()))
		}
	}
}

// TestBandsRarelyMatchUnrelated: random simhashes share a band about as
// rarely as the layout promises (BandCount / 2^25 at most).
func TestBandsRarelyMatchUnrelated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const pairs = 200000
	shared := 0
	for range pairs {
		if shareBand(rng.Uint64(), rng.Uint64()) {
			shared++
		}
	}
	if limit := pairs * BandCount >> 25; shared > limit+2 {
		t.Errorf("%d of %d random pairs share a band, want at most about %d", shared, pairs, limit)
	}
	total := uint(0)
	for _, w := range blockBits {
		total += w
	}
	if total != 64 {
		t.Errorf("blocks cover %d bits, want 64", total)
	}
}

func shareBand(a, b uint64) bool {
	ba, bb := Bands(a), Bands(b)
	for i := range ba {
		if ba[i] == bb[i] {
			return true
		}
	}
	return false
}
