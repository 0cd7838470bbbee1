package simhash

import (
	"unicode"
	"unicode/utf8"
)

// sum64Reference is Sum64 as commit 5062aff left it, kept verbatim but for
// the names: the simhashes stored by earlier crawls were computed by it,
// so Sum64 must return what it returns for every input. The differential
// tests and FuzzSum64 compare the two.
func sum64Reference(text string) uint64 {
	var (
		ones   [64]int // per bit: shingles with the bit set
		total  int     // shingles
		lanes  [8]uint64
		inLane int                  // shingles in lanes, flushed before a byte lane overflows
		ring   [ShingleWords]uint64 // hashes of the last words
		words  int
		h      uint64 = referenceFNVOffset
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
		x = mixReference(x)
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
			add(shingleReference(ring, words))
		}
		h, inWord = referenceFNVOffset, false
	}
	for _, r := range text {
		if r < utf8.RuneSelf { // ASCII: the same tests without the tables
			c := byte(r)
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' {
				h = (h ^ uint64(c)) * referenceFNVPrime
				inWord = true
			} else if inWord {
				endWord()
			}
			continue
		}
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			r = unicode.ToLower(r)
			for ; r > 0; r >>= 8 { // the rune's bytes, low first
				h = (h ^ uint64(r&0xff)) * referenceFNVPrime
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
		add(shingleReference(ring, words))
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

// The reference's constants, its own so that it stays what it was.
const (
	referenceFNVOffset = 14695981039346656037
	referenceFNVPrime  = 1099511628211
)

// shingleReference is the former shingle helper.
func shingleReference(ring [ShingleWords]uint64, n int) uint64 {
	var x uint64 = referenceFNVOffset
	for i := max(0, n-ShingleWords); i < n; i++ {
		x = (x ^ ring[i%ShingleWords]) * referenceFNVPrime
		x ^= x >> 29
	}
	return x
}

// mixReference is the former mix helper (splitmix64 finalizer).
func mixReference(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
