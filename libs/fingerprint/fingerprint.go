// Package fingerprint computes 64-bit Rabin fingerprints (seed 003): the
// residue of the message, read as a polynomial over GF(2), modulo an
// irreducible polynomial of degree 64. Table-driven, eight bytes per step
// (slicing-by-8), a byte per step for the tail.
//
// # Convention
//
// A message b of n bytes is read as the polynomial
//
//	M(x) = x^(8n) + B(x)
//
// where B(x) has the bits of b as coefficients, most significant bit of b[0]
// first (b[0]'s top bit is the coefficient of x^(8n-1), b[n-1]'s lowest bit
// that of x^0). The leading x^(8n) is an implicit 1 bit in front of the
// message, so that the map from byte strings to polynomials is injective:
// "" and "\x00" and "\x00a" and "a" all have different polynomials (a pure
// residue would give fp("") = 0 and ignore leading zero bytes). The
// fingerprint is M(x) mod P(x), P = x^64 + Poly, as a uint64 whose bit i is
// the coefficient of x^i.
//
// Consequences of the convention, relied upon by callers and tests:
//
//   - Sum64(nil) == 1.
//   - Fingerprints continue: Update(Sum64(a), b) == Sum64(a || b), so a
//     stream can be fingerprinted in pieces (see Digest).
//   - The map is affine for equal lengths: for len(a) == len(b) == n,
//     Sum64(a XOR b) == Sum64(a) ^ Sum64(b) ^ Sum64(zeros(n)).
//   - Two distinct messages of total length at most L bits collide for at
//     most about L/64 of the irreducible polynomials of degree 64 (Rabin
//     1981); for a fixed polynomial and non-adversarial input, collisions
//     among N URLs are about N²/2^65.
package fingerprint

import (
	"encoding/binary"
	"unsafe"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Poly is the irreducible degree-64 polynomial used by default, without its
// x^64 term (bit i is the coefficient of x^i). Its irreducibility is checked
// by a test.
//
// It is the first odd p >= 0x243F6A8885A308D3 (the first 64 bits of the
// fractional part of pi, a nothing-up-my-sleeve start) for which x^64 + p is
// irreducible, found by Rabin's irreducibility test; it is dense, so even
// short messages are mixed by the reduction.
const Poly uint64 = 0x243F6A8885A30907

// Rabin is a precomputed fingerprinting table for one polynomial. It is
// immutable and safe for concurrent use.
type Rabin struct {
	poly uint64
	// t[k][v] = v(x) * x^(64+8k) mod P: the contribution of byte k (counted
	// from the least significant) of the state when eight bytes are shifted
	// in. t[0] alone is the byte-at-a-time table.
	t [8][256]uint64
}

// New returns the table for the given polynomial (degree 64, x^64 implied).
// The caller is responsible for poly being irreducible; a reducible one
// still yields a deterministic hash, without Rabin's collision bound.
func New(poly uint64) *Rabin {
	r := &Rabin{poly: poly}
	for v := range 256 {
		// v(x) * x^64 mod P, shifting one bit at a time.
		h := uint64(v)
		for range 64 {
			h = mulx(h, poly)
		}
		r.t[0][v] = h
		for k := 1; k < 8; k++ {
			for range 8 {
				h = mulx(h, poly)
			}
			r.t[k][v] = h
		}
	}
	return r
}

// mulx returns h(x) * x mod (x^64 + poly).
func mulx(h, poly uint64) uint64 {
	carry := h >> 63
	h <<= 1
	return h ^ (-carry & poly)
}

// Poly returns the polynomial of r, without its x^64 term.
func (r *Rabin) Poly() uint64 { return r.poly }

// Empty is the fingerprint of the empty message, the initial state of an
// incremental computation: Update(Empty, b) == Sum64(b).
const Empty uint64 = 1

// Sum64 returns the fingerprint of b.
func (r *Rabin) Sum64(b []byte) uint64 { return update(r, Empty, b) }

// SumString returns the fingerprint of s without allocating.
func (r *Rabin) SumString(s string) uint64 { return updateString(r, Empty, s) }

// Update returns the fingerprint of m || b given fp, the fingerprint of m.
func (r *Rabin) Update(fp uint64, b []byte) uint64 { return update(r, fp, b) }

// UpdateString is Update for a string, without allocating.
func (r *Rabin) UpdateString(fp uint64, s string) uint64 { return updateString(r, fp, s) }

// update shifts b into the state s: s·x^(8·len(b)) + B(x) mod P.
func update(r *Rabin, s uint64, b []byte) uint64 {
	t := &r.t
	for len(b) >= 8 {
		// s·x^64 + w: every byte of s overflows and is reduced by its table.
		s = binary.BigEndian.Uint64(b) ^
			t[7][s>>56] ^ t[6][s>>48&0xff] ^ t[5][s>>40&0xff] ^ t[4][s>>32&0xff] ^
			t[3][s>>24&0xff] ^ t[2][s>>16&0xff] ^ t[1][s>>8&0xff] ^ t[0][s&0xff]
		b = b[8:]
	}
	if n := len(b); n > 0 {
		// The last n < 8 bytes in one step: s·x^(8n) + w, where only the top
		// n bytes of s overflow; byte k of s lands on x^(64+8(k+n-8)).
		var w uint64
		for _, c := range b {
			w = w<<8 | uint64(c)
		}
		h := s
		s = s<<(8*n) ^ w
		for j := range n {
			s ^= t[j&7][byte(h>>(8*(8-n+j)))]
		}
	}
	return s
}

// updateString is update on the bytes of str, without copying them.
func updateString(r *Rabin, s uint64, str string) uint64 {
	return update(r, s, unsafe.Slice(unsafe.StringData(str), len(str)))
}

// Default is the table for Poly.
var Default = New(Poly)

// URL returns the fingerprint of a canonical URL (urlcanon.Canonicalize)
// within a crawl: the identity of the resource in the crawl's seen set.
// Dedup is per crawl, so the same URL in two crawls has two fingerprints, and
// per resource: the fingerprint is that of the URL's dedup key
// (urlcanon.Key), so "/p?" and "/p" have one fingerprint.
//
// It is String(crawlID + "\x00" + urlcanon.Key(canonicalURL)), computed
// without allocating when the key is the URL itself. A crawl ID must not
// contain a NUL byte, or ("a\x00", "b") and ("a", "\x00b") would collide;
// canonical URLs never contain one.
func URL(crawlID, canonicalURL string) uint64 {
	s := updateString(Default, Empty, crawlID)
	s = (s << 8) ^ Default.t[0][s>>56] // the 0x00 separator
	return updateString(Default, s, urlcanon.Key(canonicalURL))
}

// String is Default.SumString(s).
func String(s string) uint64 { return Default.SumString(s) }

// Digest computes a fingerprint incrementally; it implements hash.Hash64
// with big-endian Sum. The zero value is not usable: get one from
// (*Rabin).Digest. Not safe for concurrent use.
type Digest struct {
	r *Rabin
	s uint64
}

// Digest returns a new incremental fingerprint of the empty message.
func (r *Rabin) Digest() *Digest { return &Digest{r: r, s: Empty} }

// Write adds p to the message. It never returns an error.
func (d *Digest) Write(p []byte) (int, error) {
	d.s = update(d.r, d.s, p)
	return len(p), nil
}

// WriteString adds s to the message without allocating. It never returns an
// error.
func (d *Digest) WriteString(s string) (int, error) {
	d.s = updateString(d.r, d.s, s)
	return len(s), nil
}

// Sum64 returns the fingerprint of the message written so far.
func (d *Digest) Sum64() uint64 { return d.s }

// Sum appends the big-endian fingerprint to b.
func (d *Digest) Sum(b []byte) []byte { return binary.BigEndian.AppendUint64(b, d.s) }

// Reset restarts with the empty message.
func (d *Digest) Reset() { d.s = Empty }

// Size is 8.
func (d *Digest) Size() int { return 8 }

// BlockSize is 8, the bytes consumed per table step.
func (d *Digest) BlockSize() int { return 8 }
