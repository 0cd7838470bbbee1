// Package fingerprint computes 64-bit Rabin fingerprints (seed 003): the
// residue of the message, read as a polynomial over GF(2), modulo an
// irreducible polynomial of degree 64. Table-driven, a byte per step.
package fingerprint

// Poly is the irreducible degree-64 polynomial used by default, without its
// x^64 term (bit i is the coefficient of x^i). Its irreducibility is checked
// by a test.
const Poly uint64 = 0 // set by implementation

// Rabin is a precomputed fingerprinting table for one polynomial. It is
// immutable and safe for concurrent use.
type Rabin struct{}

// New returns the table for the given polynomial (degree 64, x^64 implied).
func New(poly uint64) *Rabin { panic("unimplemented") }

// Sum64 returns the fingerprint of b.
func (r *Rabin) Sum64(b []byte) uint64 { panic("unimplemented") }

// SumString returns the fingerprint of s without allocating.
func (r *Rabin) SumString(s string) uint64 { panic("unimplemented") }

// Default is the table for Poly.
var Default = New(Poly)

// URL returns the fingerprint of a canonical URL within a crawl: dedup is per
// crawl, so the same URL in two crawls has two fingerprints.
func URL(crawlID, canonicalURL string) uint64 { panic("unimplemented") }

// String is Default.SumString(s).
func String(s string) uint64 { return Default.SumString(s) }
