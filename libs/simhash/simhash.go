// Package simhash computes 64-bit simhashes of text (Charikar 2002): texts
// that share most of their word shingles get fingerprints that differ in
// few bits, so near-duplicate pages are found by Hamming distance.
package simhash

import (
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// ShingleWords is the number of consecutive words hashed together.
const ShingleWords = 3

// NearDistance is a common threshold: two 64-bit simhashes at most this
// many bits apart are near duplicates.
const NearDistance = 3

// Sum64 returns the simhash of text's lower-cased word shingles
// (ShingleWords words each; a text with fewer words is one shingle). Words
// are runs of letters and digits. The empty text hashes to 0.
func Sum64(text string) uint64 {
	var (
		ones   [64]int // per bit: shingles with the bit set
		total  int     // shingles
		lanes  [8]uint64
		inLane int                  // shingles in lanes, flushed before a byte lane overflows
		ring   [ShingleWords]uint64 // hashes of the last words
		words  int
		h      uint64 = fnvOffset
		inWord bool
	)
	flush := func() {
		for j, l := range lanes {
			for b := 0; b < 8; b++ {
				ones[b*8+j] += int(l >> uint(b*8) & 0xff)
			}
		}
		lanes, inLane = [8]uint64{}, 0
	}
	// add counts the bits of one shingle hash: lane j holds, in byte b,
	// the count of bit 8b+j (SWAR, 8 additions instead of 64).
	add := func(x uint64) {
		x = mix(x)
		for j := range lanes {
			lanes[j] += x >> uint(j) & 0x0101010101010101
		}
		total++
		if inLane++; inLane == 255 {
			flush()
		}
	}
	endWord := func() {
		ring[words%ShingleWords] = h
		words++
		if words >= ShingleWords {
			add(shingle(ring, words))
		}
		h, inWord = fnvOffset, false
	}
	for _, r := range text {
		if r < utf8.RuneSelf { // ASCII: the same tests without the tables
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
				h = (h ^ uint64(c)) * fnvPrime
				inWord = true
			} else if inWord {
				endWord()
			}
			continue
		}
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			r = unicode.ToLower(r)
			for ; r > 0; r >>= 8 { // the rune's bytes, low first
				h = (h ^ uint64(r&0xff)) * fnvPrime
			}
			inWord = true
			continue
		}
		if inWord {
			endWord()
		}
	}
	if inWord {
		endWord()
	}
	switch {
	case words == 0:
		return 0
	case words < ShingleWords:
		add(shingle(ring, words))
	}
	flush()
	var out uint64
	for i, c := range ones {
		if 2*c > total {
			out |= 1 << uint(i)
		}
	}
	return out
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// shingle combines the hashes of the last min(n, ShingleWords) words, in
// order (ring holds word i at i%ShingleWords).
func shingle(ring [ShingleWords]uint64, n int) uint64 {
	var x uint64 = fnvOffset
	for i := max(0, n-ShingleWords); i < n; i++ {
		x = (x ^ ring[i%ShingleWords]) * fnvPrime
		x ^= x >> 29
	}
	return x
}

// Distance is the Hamming distance between two simhashes.
func Distance(a, b uint64) int { return bits.OnesCount64(a ^ b) }

// mix spreads FNV's weak high bits (splitmix64 finalizer).
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
