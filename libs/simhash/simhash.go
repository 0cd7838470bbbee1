// Package simhash computes 64-bit simhashes of text (Charikar 2002): texts
// that share most of their word shingles get fingerprints that differ in
// few bits, so near-duplicate pages are found by Hamming distance.
package simhash

import (
	"math/bits"
	"sync"
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
// are runs of letters and digits. The empty text hashes to 0. It is safe
// for concurrent use.
//
// The simhashes of earlier crawls are stored and compared with new ones,
// so every detail of the hashing is fixed (TestSum64MatchesReference): a
// word's hash is FNV-1a over its lower-cased runes, each rune as the bytes
// of its code point, low first, not its UTF-8 bytes (the same for ASCII);
// a shingle's hash chains its words' hashes (round) and is mixed; bit i is
// set when most shingles set it; invalid UTF-8 reads as utf8.RuneError,
// which is not a letter.
func Sum64(text string) uint64 {
	var (
		s     shingler
		runes *runeBitmaps // loaded at the first non-ASCII rune
	)
	for i := 0; i < len(text); {
		// Read the word that starts at i, if one does, then step over the
		// separator that ends it (width bytes; 0 at the end of the text).
		h, start, width := uint64(fnvOffset), i, 0
		for i < len(text) {
			c := text[i]
			if lc := wordByte[c]; lc != 0 { // an ASCII letter or digit: the common case
				h = (h ^ uint64(lc)) * fnvPrime
				i++
				continue
			}
			if c < utf8.RuneSelf {
				width = 1
				break
			}
			r, ok := decode3(text[i:])
			size := 3
			if !ok {
				r, size = utf8.DecodeRuneInString(text[i:]) // (RuneError, 1) if invalid
			}
			if runes == nil {
				runes = bmpRunes()
			}
			if r, ok = runes.wordRune(r); !ok {
				width = size
				break
			}
			for ; r > 0; r >>= 8 { // the code point's bytes, low first
				h = (h ^ uint64(r&0xff)) * fnvPrime
			}
			i += size
		}
		if i > start {
			s.endWord(h)
		}
		i += width
	}
	return s.sum()
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// wordByte maps each ASCII letter and digit to itself lower-cased and
// every other byte to 0: the other ASCII bytes separate words, and bytes
// from 0x80 start or continue multi-byte runes. One load and one branch
// per byte of the common case.
var wordByte = func() (t [256]byte) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			t[c] = byte(c)
		case 'A' <= c && c <= 'Z':
			t[c] = byte(c + 'a' - 'A')
		}
	}
	return t
}()

// decode3 decodes the rune at the start of s if it is one of the 3-byte
// UTF-8 sequences that are valid whatever their continuation bytes hold:
// lead byte E1-EC or EE-EF (E0 needs a check for overlong forms, ED for
// surrogates). They hold most of the BMP, CJK among it. For anything else
// it returns false, and the caller decodes with the utf8 package, whose
// slow path does not inline.
func decode3(s string) (rune, bool) {
	if len(s) < 3 {
		return 0, false
	}
	c0, c1, c2 := s[0], s[1], s[2]
	if c0 < 0xe1 || c0 > 0xef || c0 == 0xed || c1&0xc0 != 0x80 || c2&0xc0 != 0x80 {
		return 0, false
	}
	return rune(c0&0x0f)<<12 | rune(c1&0x3f)<<6 | rune(c2&0x3f), true
}

// runeBitmaps classify the runes of the Basic Multilingual Plane, which
// holds the letters of nearly all text, as unicode.IsLetter, IsNumber and
// ToLower do: one load per rune instead of two or three binary searches
// in the unicode package's range tables.
type runeBitmaps struct {
	word  [1 << 16 / 64]uint64 // bit r: r is a letter or a number
	upper [1 << 16 / 64]uint64 // bit r: r is one that unicode.ToLower changes
}

// bmpRunes builds the bitmaps from the unicode package on first use (16
// KB, about 2 ms), so that programs that never hash text do not pay for
// them.
var bmpRunes = sync.OnceValue(func() *runeBitmaps {
	t := new(runeBitmaps)
	for r := range rune(1 << 16) {
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			t.word[r/64] |= 1 << (r % 64)
			if unicode.ToLower(r) != r {
				t.upper[r/64] |= 1 << (r % 64)
			}
		}
	}
	return t
})

// wordRune reports whether the non-ASCII rune r is part of a word (a
// letter or a number) and returns it lower-cased.
func (t *runeBitmaps) wordRune(r rune) (rune, bool) {
	if r >= 1<<16 { // other planes: rare, the unicode tables
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return unicode.ToLower(r), true
		}
		return r, false
	}
	i, bit := r/64, uint64(1)<<(r%64)
	if t.word[i]&bit == 0 {
		return r, false
	}
	if t.upper[i]&bit != 0 { // rare: capitals
		r = unicode.ToLower(r)
	}
	return r, true
}

// shingler turns the hashes of a text's words into shingle hashes and
// counts their bits.
type shingler struct {
	// one and two are the hashes of the last word and of the last two
	// words as shingles: the prefixes of the next shingles, and the only
	// shingle of a text of one or two words.
	one, two uint64
	words    int
	tally    tally
}

// endWord takes the hash of the next word: the shingle of the last
// ShingleWords words is two's prefix extended by it, and the prefixes
// move on by one word. Three rounds per word, as when each shingle is
// hashed from its words, but no word is read twice.
func (s *shingler) endWord(h uint64) {
	if s.words >= ShingleWords-1 {
		s.tally.add(mix(round(s.two, h)))
	}
	s.two, s.one = round(s.one, h), round(fnvOffset, h)
	s.words++
}

// sum returns the simhash of the words passed to endWord.
func (s *shingler) sum() uint64 {
	switch s.words {
	case 0:
		return 0
	case 1:
		s.tally.add(mix(s.one))
	case 2:
		s.tally.add(mix(s.two))
	}
	return s.tally.majority()
}

// round chains the hash of one more word into a shingle's hash, which
// starts at fnvOffset.
func round(x, word uint64) uint64 {
	x = (x ^ word) * fnvPrime
	return x ^ x>>29
}

// tally counts, for each of the 64 bits, the shingle hashes that set it.
type tally struct {
	// lanes count 8 bits each, SWAR: byte b of lanes[j] is the count of
	// bit 8b+j, so a shingle costs 8 additions instead of 64. A byte
	// holds 255, so the lanes move into ones every 255 shingles.
	lanes  [8]uint64
	inLane int
	ones   [64]int
	total  int
}

// add counts the bits of x, unrolled. It is a call of its own on purpose:
// inlined into Sum64's loop, with the lanes in locals, it measured slower,
// the lanes and x spilled to the stack.
func (t *tally) add(x uint64) {
	const m = 0x0101010101010101 // bit 0 of each byte
	t.lanes[0] += x & m
	t.lanes[1] += x >> 1 & m
	t.lanes[2] += x >> 2 & m
	t.lanes[3] += x >> 3 & m
	t.lanes[4] += x >> 4 & m
	t.lanes[5] += x >> 5 & m
	t.lanes[6] += x >> 6 & m
	t.lanes[7] += x >> 7 & m
	t.total++
	if t.inLane++; t.inLane == 255 {
		t.flush()
	}
}

func (t *tally) flush() {
	for j, l := range t.lanes {
		for b := range 8 {
			t.ones[b*8+j] += int(l >> (b * 8) & 0xff)
		}
	}
	t.lanes, t.inLane = [8]uint64{}, 0
}

// majority returns the simhash: bit i is set if more than half of the
// shingles set it.
func (t *tally) majority() uint64 {
	t.flush()
	var out uint64
	for i, c := range t.ones {
		if 2*c > t.total {
			out |= 1 << i
		}
	}
	return out
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
