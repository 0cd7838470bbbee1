package fingerprint

import (
	"bytes"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// GF(2) polynomial arithmetic, written for clarity, used only to check the
// package. A uint64 is a polynomial of degree < 64, bit i the coefficient of
// x^i; the modulus x^64 + p is given by p alone.

// clmul returns the 128-bit carry-less product a·b as (hi, lo).
func clmul(a, b uint64) (hi, lo uint64) {
	for i := range 64 {
		if b>>i&1 == 1 {
			lo ^= a << i
			if i > 0 {
				hi ^= a >> (64 - i)
			}
		}
	}
	return hi, lo
}

// mod128 reduces the 128-bit polynomial (hi, lo) modulo x^64 + p.
func mod128(hi, lo, p uint64) uint64 {
	// Clear the bits of hi from the top: x^(64+i) ≡ x^i · p.
	for i := 63; i >= 0; i-- {
		if hi>>i&1 == 1 {
			hi ^= 1 << i
			// x^(64+i) -> x^i·p, which is (p >> (64-i), p << i).
			lo ^= p << i
			if i > 0 {
				hi ^= p >> (64 - i)
			}
		}
	}
	return lo
}

func mulmod(a, b, p uint64) uint64 {
	hi, lo := clmul(a, b)
	return mod128(hi, lo, p)
}

func degree(a uint64) int { return 63 - bits.LeadingZeros64(a) }

// polymod returns a mod m for polynomials of degree < 64, m != 0.
func polymod(a, m uint64) uint64 {
	dm := degree(m)
	for a != 0 && degree(a) >= dm {
		a ^= m << (degree(a) - dm)
	}
	return a
}

func polygcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, polymod(a, b)
	}
	return a
}

// irreducible runs Rabin's irreducibility test on P = x^64 + p: a polynomial
// of degree n is irreducible iff x^(2^n) ≡ x (mod P) and, for every prime q
// dividing n, gcd(x^(2^(n/q)) − x, P) = 1. For n = 64 the only prime is 2.
func irreducible(p uint64) bool {
	const x = 2 // the polynomial x
	s := uint64(x)
	var s32 uint64
	for i := 1; i <= 64; i++ {
		s = mulmod(s, s, p) // s = x^(2^i) mod P
		if i == 32 {
			s32 = s
		}
	}
	if s != x {
		return false
	}
	g := s32 ^ x // x^(2^32) − x mod P (minus is plus in GF(2))
	if g == 0 {
		return false // P divides x^(2^32) − x: gcd is P itself
	}
	// gcd(P, g) = gcd(g, P mod g); P mod g = (x^63 mod g)·x mod g + p mod g.
	pm := polymod(polymod(1<<63, g)<<1, g) ^ polymod(p, g)
	return polygcd(g, pm) == 1
}

func TestIrreducible(t *testing.T) {
	// x^64 + x^4 + x^3 + x + 1 is the well-known GF(2^64) modulus (CRC-64-ISO).
	// (x^32 + x^7 + x^3 + x^2 + 1)^2 = x^64 + x^14 + x^6 + x^4 + 1 (a
	// square) and x^64 + 1 = (x+1)^64 are reducible, as is
	// any p with p(0) = 0 (divisible by x) or an even number of terms
	// (divisible by x+1).
	tests := []struct {
		name string
		poly uint64
		want bool
	}{
		{"Poly", Poly, true},
		{"gf64 modulus", 0x1B, true},
		{"(x+1)^64", 1, false},
		{"square of degree 32", 1<<14 | 1<<6 | 1<<4 | 1, false},
		{"divisible by x", Poly &^ 1, false},
		{"divisible by x+1", Poly ^ 1<<1, false},
		{"pi start is reducible", 0x243F6A8885A308D3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := irreducible(tt.poly); got != tt.want {
				t.Errorf("irreducible(x^64 + %#x) = %v, want %v", tt.poly, got, tt.want)
			}
		})
	}
}

// TestPolyIsFirstIrreducibleAfterPi checks the documented derivation of Poly.
func TestPolyIsFirstIrreducibleAfterPi(t *testing.T) {
	const start = 0x243F6A8885A308D3
	for p := uint64(start); p < Poly; p += 2 {
		if irreducible(p) {
			t.Fatalf("x^64 + %#x is irreducible and precedes Poly", p)
		}
	}
	if !irreducible(Poly) {
		t.Fatal("Poly is reducible")
	}
}

func TestMulmod(t *testing.T) {
	// Check the test arithmetic itself: multiplication by x equals shifting
	// with reduction, and (a·b)·c == a·(b·c).
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		a, b, c := rng.Uint64(), rng.Uint64(), rng.Uint64()
		if got, want := mulmod(a, 2, Poly), mulx(a, Poly); got != want {
			t.Fatalf("mulmod(%#x, x) = %#x, want %#x", a, got, want)
		}
		if l, r := mulmod(mulmod(a, b, Poly), c, Poly), mulmod(a, mulmod(b, c, Poly), Poly); l != r {
			t.Fatalf("mulmod not associative for %#x %#x %#x", a, b, c)
		}
	}
}

// reference is the bit-at-a-time definition: the residue of
// x^(8n) + B(x) modulo x^64 + poly, feeding the implicit leading 1 and then
// the message bits, most significant first.
func reference(poly uint64, b []byte) uint64 {
	var s uint64
	step := func(bit uint64) {
		carry := s >> 63
		s = s<<1 | bit
		if carry == 1 {
			s ^= poly
		}
	}
	step(1)
	for _, c := range b {
		for i := 7; i >= 0; i-- {
			step(uint64(c>>i) & 1)
		}
	}
	return s
}

func TestSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	polys := []uint64{Poly, 0x1B}
	for _, poly := range polys {
		r := New(poly)
		for n := 0; n <= 200; n++ {
			for range 5 {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				want := reference(poly, b)
				if got := r.Sum64(b); got != want {
					t.Fatalf("poly %#x len %d: Sum64 = %#x, reference %#x", poly, n, got, want)
				}
				if got := r.SumString(string(b)); got != want {
					t.Fatalf("poly %#x len %d: SumString = %#x, reference %#x", poly, n, got, want)
				}
			}
		}
	}
}

func TestKnownValues(t *testing.T) {
	// Values that follow from the convention alone, whatever the tables.
	tests := []struct {
		name string
		in   string
		want uint64
	}{
		{"empty is the leading 1", "", 1},
		{"one byte", "a", 1<<8 | 'a'},
		{"leading zero byte counts", "\x00a", 1<<16 | 'a'},
		{"seven bytes fit unreduced", "abcdefg", 1<<56 | 0x61626364656667},
		// x^64 mod P = Poly: eight zero bytes shift the leading 1 to x^64.
		{"eight zero bytes", "\x00\x00\x00\x00\x00\x00\x00\x00", Poly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %#x, want %#x", tt.in, got, tt.want)
			}
		})
	}
}

func TestDistinct(t *testing.T) {
	// Inputs that a pure residue would confuse.
	ins := []string{"", "\x00", "\x00\x00", "a", "\x00a", "a\x00", "\x00\x00a"}
	seen := make(map[uint64]string)
	for _, in := range ins {
		fp := String(in)
		if prev, ok := seen[fp]; ok {
			t.Errorf("String(%q) == String(%q) == %#x", in, prev, fp)
		}
		seen[fp] = in
	}
}

func TestAffine(t *testing.T) {
	// For equal lengths: fp(a⊕b) ⊕ fp(0ⁿ) == fp(a) ⊕ fp(b), the implicit
	// leading 1 making the map affine rather than linear.
	rng := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 100; n++ {
		a, b, x, z := make([]byte, n), make([]byte, n), make([]byte, n), make([]byte, n)
		for i := range n {
			a[i], b[i] = byte(rng.Uint32()), byte(rng.Uint32())
			x[i] = a[i] ^ b[i]
		}
		d := Default
		if got, want := d.Sum64(x)^d.Sum64(z), d.Sum64(a)^d.Sum64(b); got != want {
			t.Fatalf("len %d: fp(a^b)^fp(0) = %#x, fp(a)^fp(b) = %#x", n, got, want)
		}
	}
}

func TestUpdateContinues(t *testing.T) {
	msg := []byte("https://example.com/some/long/path/with/segments?and=query&more=1")
	want := Default.Sum64(msg)
	for i := 0; i <= len(msg); i++ {
		if got := Default.Update(Default.Sum64(msg[:i]), msg[i:]); got != want {
			t.Fatalf("split at %d: %#x, want %#x", i, got, want)
		}
		if got := Default.UpdateString(Default.SumString(string(msg[:i])), string(msg[i:])); got != want {
			t.Fatalf("string split at %d: %#x, want %#x", i, got, want)
		}
	}
}

func TestDigest(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 100)
	d := Default.Digest()
	for i := 0; i < len(msg); i += 37 {
		end := min(i+37, len(msg))
		if i%2 == 0 {
			_, _ = d.Write(msg[i:end])
		} else {
			_, _ = d.WriteString(string(msg[i:end]))
		}
	}
	want := reference(Poly, msg)
	if got := d.Sum64(); got != want {
		t.Fatalf("Digest.Sum64 = %#x, want %#x", got, want)
	}
	if got := d.Sum([]byte{0xff}); len(got) != 9 || got[0] != 0xff || got[1] != byte(want>>56) || got[8] != byte(want) {
		t.Fatalf("Digest.Sum = %x, want ff%016x", got, want)
	}
	d.Reset()
	if d.Sum64() != Empty || d.Size() != 8 || d.BlockSize() != 8 {
		t.Fatalf("after Reset: Sum64 %#x Size %d BlockSize %d", d.Sum64(), d.Size(), d.BlockSize())
	}
}

func TestURL(t *testing.T) {
	tests := []struct {
		crawl, url string
	}{
		{"", ""},
		{"c1", "http://example.com/"},
		{"crawl-2026-01", "https://xn--bcher-kva.de/a?b=c"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s|%s", tt.crawl, tt.url), func(t *testing.T) {
			want := reference(Poly, []byte(tt.crawl+"\x00"+tt.url))
			if got := URL(tt.crawl, tt.url); got != want {
				t.Errorf("URL = %#x, want %#x", got, want)
			}
		})
	}
	if URL("a", "http://x/") == URL("b", "http://x/") {
		t.Error("same URL in two crawls has one fingerprint")
	}
	// One resource, one fingerprint: the dedup key is fingerprinted.
	for _, u := range []string{"http://x/p?", "http://x/p?&", "http://x/p;jsessionid=A1B2"} {
		if URL("a", u) != URL("a", "http://x/p") {
			t.Errorf("URL(%q) differs from URL of http://x/p", u)
		}
	}
}

func TestURLDoesNotAllocate(t *testing.T) {
	crawl, u := "crawl-1", "https://www.example.com/path/to/page.html?id=12345&x=y"
	var sink uint64
	if n := testing.AllocsPerRun(100, func() { sink ^= URL(crawl, u) ^ String(u) }); n != 0 {
		t.Errorf("URL and String allocate %v times per call", n)
	}
	_ = sink
}

// FuzzSum checks, for any input, that Sum64 and SumString never panic, agree
// with the bit-at-a-time reference, and continue across any split point.
func FuzzSum(f *testing.F) {
	f.Add([]byte(""), 0)
	f.Add([]byte("http://example.com/"), 7)
	f.Add(bytes.Repeat([]byte{0xff}, 70), 33)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		want := reference(Poly, b)
		if got := Default.Sum64(b); got != want {
			t.Fatalf("Sum64 = %#x, reference %#x", got, want)
		}
		if got := Default.SumString(string(b)); got != want {
			t.Fatalf("SumString = %#x, reference %#x", got, want)
		}
		if split < 0 {
			split = -split
		}
		if len(b) > 0 {
			split %= len(b) + 1
		} else {
			split = 0
		}
		if got := Default.Update(Default.Sum64(b[:split]), b[split:]); got != want {
			t.Fatalf("Update split at %d = %#x, reference %#x", split, got, want)
		}
	})
}

// url60 returns n distinct 60-byte URLs.
func url60(n int) []string {
	us := make([]string, n)
	for i := range us {
		us[i] = fmt.Sprintf("https://www.example-host.com/section/item?page=%010d&x=1", i)[:60]
	}
	return us
}

func BenchmarkURL60(b *testing.B) {
	us := url60(1024)
	b.SetBytes(60)
	b.ReportAllocs()
	var sink uint64
	i := 0
	for b.Loop() {
		sink ^= URL("crawl-1", us[i&1023])
		i++
	}
	_ = sink
	perURL := float64(b.Elapsed().Nanoseconds()) / float64(i)
	b.ReportMetric(perURL, "ns/url")
	b.ReportMetric(1e9/perURL, "urls/s")
	// Seed 003: 23.7 M URLs in about 1 800 s of CPU.
	b.ReportMetric(23.7e6*perURL/1e9, "s/23.7M-urls")
}

func BenchmarkSum64(b *testing.B) {
	for _, n := range []int{8, 60, 1024, 64 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			b.SetBytes(int64(n))
			var sink uint64
			for b.Loop() {
				sink ^= Default.Sum64(buf)
			}
			_ = sink
		})
	}
}

func BenchmarkReference60(b *testing.B) {
	buf := []byte(url60(1)[0])
	b.SetBytes(60)
	var sink uint64
	for b.Loop() {
		sink ^= reference(Poly, buf)
	}
	_ = sink
}

// TestURLSetProperties fingerprints many similar URLs (they differ in a few
// digits, the hard case for a linear hash): no collisions, and the low and
// high bytes, which callers may use to pick buckets, are spread evenly
// (chi-square over 256 buckets within five standard deviations).
func TestURLSetProperties(t *testing.T) {
	const n = 200_000
	seen := make(map[uint64]int, n)
	var low, high [256]int
	for i := range n {
		u := fmt.Sprintf("https://www.example.com/item?id=%d&page=%d", i, i%97)
		fp := URL("crawl-1", u)
		if j, ok := seen[fp]; ok {
			t.Fatalf("collision: urls %d and %d: %#x", j, i, fp)
		}
		seen[fp] = i
		low[fp&0xff]++
		high[fp>>56]++
	}
	for name, buckets := range map[string]*[256]int{"low byte": &low, "high byte": &high} {
		const expect = float64(n) / 256
		var chi2 float64
		for _, c := range buckets {
			d := float64(c) - expect
			chi2 += d * d / expect
		}
		// df = 255: mean 255, standard deviation sqrt(510) ≈ 22.6.
		if chi2 > 255+5*22.6 {
			t.Errorf("%s: chi-square %.1f, buckets uneven", name, chi2)
		}
		t.Logf("%s: chi-square %.1f (df 255)", name, chi2)
	}
}
