package recent

import (
	"math/bits"
	"math/rand/v2"
	"slices"
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
// is still remembered, at every depth.
func TestZeroFingerprint(t *testing.T) {
	l := New(8)
	l.Add(0, 0)
	if !l.Published(0, 0) || !l.Published(0, 3) {
		t.Errorf("fingerprint 0 added at depth 0: published at depth 0 %v, at depth 3 %v; want both", l.Published(0, 0), l.Published(0, 3))
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
	counted := make(map[int]uint32) // link -> its in-link count
	for _, i := range held[:200] {
		for page := range uint64(i % 40) {
			l.Sighted(added[i], page, 7)
		}
		counted[i] = l.InLinks(added[i])
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
			if n, ok := counted[i]; ok && l.InLinks(added[i]) != n {
				t.Fatalf("link %d after doubling to %d: %d in-links, want %d", i, want, l.InLinks(added[i]), n)
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

// TestSighted: a sighting of a link published at a depth as small counts
// an in-link (the first repeat always steps the counter: 2); one of a
// link not published, or published deeper only, counts nothing and
// reports it unpublished.
func TestSighted(t *testing.T) {
	const fp, page = 0x9e3779b97f4a7c15, 0x1234
	tests := []struct {
		name      string
		add       []uint32 // depths added, in order
		depth     uint32
		published bool
		inLinks   uint32
	}{
		{"never added", nil, 3, false, 0},
		{"same depth: the first repeat", []uint32{3}, 3, true, 2},
		{"deeper: counted", []uint32{3}, 5, true, 2},
		{"shallower: published again, not counted", []uint32{3}, 2, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := New(16)
			for _, d := range tt.add {
				l.Add(fp, d)
			}
			published, in := l.Sighted(fp, page, tt.depth)
			if published != tt.published || in != tt.inLinks {
				t.Errorf("Sighted(depth %d) after %v = %v, %d; want %v, %d", tt.depth, tt.add, published, in, tt.published, tt.inLinks)
			}
		})
	}
	t.Run("a smaller depth keeps the count", func(t *testing.T) {
		l := New(16)
		l.Add(fp, 5)
		l.Sighted(fp, page, 5)
		l.Add(fp, 2)
		if !l.Published(fp, 2) || l.InLinks(fp) != 2 {
			t.Errorf("after Add at a smaller depth: published %v, %d in-links; want true, 2", l.Published(fp, 2), l.InLinks(fp))
		}
	})
	t.Run("a redelivered page draws the same", func(t *testing.T) {
		a, b := New(16), New(16)
		for _, l := range []*Links{a, b} {
			l.Add(fp, 1)
			for p := range uint64(50) {
				l.Sighted(fp, p, 1)
			}
		}
		for p := uint64(100); p < 300; p++ {
			_, x := a.Sighted(fp, p, 1)
			_, y := b.Sighted(fp, p, 1)
			if x != y {
				t.Fatalf("page %d: %d and %d in-links from equal tables", p, x, y)
			}
		}
	})
	t.Run("nil", func(t *testing.T) {
		var l *Links
		if published, in := l.Sighted(fp, page, 1); published || in != 0 || l.InLinks(fp) != 0 {
			t.Error("a disabled set counted a link")
		}
	})
}

// sightings publishes link fp and sights it from n-1 more pages (page
// fingerprints from rng), returning what each sighting reported.
func sightings(l *Links, fp uint64, n int, rng *rand.Rand) []uint32 {
	l.Add(fp, 2)
	var got []uint32
	for range n - 1 {
		published, in := l.Sighted(fp, rng.Uint64(), 2)
		if !published {
			panic("a published link reported unpublished")
		}
		if in != 0 {
			got = append(got, in)
		}
	}
	return got
}

// checkSteps reports what is wrong with the in-link counts reported for a
// link n pages link: they must be 2, 4, 8, … in turn, each once, no more
// than n-1 of them and none above MaxInLinks, the last the count kept.
func checkSteps(steps []uint32, n int, kept uint32) string {
	for i, in := range steps {
		if in != 2<<i {
			return "not 2, 4, 8, … in turn"
		}
	}
	switch {
	case len(steps) > n-1:
		return "more steps than sightings"
	case len(steps) > 0 && steps[len(steps)-1] > MaxInLinks:
		return "a count above MaxInLinks"
	case n > 1 && (len(steps) == 0 || steps[0] != 2):
		return "the first repeat did not report 2"
	case kept != 1<<len(steps):
		return "the count kept is not the last reported"
	}
	return ""
}

// TestInLinksEstimate: for links that n pages link, the counts reported
// average n (the counter's estimate is unbiased), most are within a
// factor of two (about three in four: a Morris counter's spread), and the republishes a link costs are about log2 n: more
// than ⌈log2 n⌉+1 for few links (a Morris counter's upper tail: about 2 %
// of them, 0.1 % more than ⌈log2 n⌉+2), never more than ⌈log2 n⌉+3 here.
// The draws are hashes, so the test is reproducible.
func TestInLinksEstimate(t *testing.T) {
	const links = 500
	for _, n := range []int{2, 3, 10, 64, 100, 1000, 1024, 4000} {
		l := New(1 << 12)
		rng := rand.New(rand.NewPCG(uint64(n), 11))
		var sum float64
		within, beyond := 0, 0
		bound := bits.Len(uint(n - 1)) // ⌈log2 n⌉
		for range links {
			fp := rng.Uint64()
			steps := sightings(l, fp, n, rng)
			if msg := checkSteps(steps, n, l.InLinks(fp)); msg != "" {
				t.Fatalf("n %d: counts %v: %s", n, steps, msg)
			}
			est := float64(l.InLinks(fp))
			sum += est
			if est >= float64(n)/2 && est <= 2*float64(n) {
				within++
			}
			switch {
			case len(steps) > bound+3:
				t.Fatalf("n %d: %d republishes (%v), want at most %d", n, len(steps), steps, bound+3)
			case len(steps) > bound+1:
				beyond++
			}
		}
		mean := sum / links
		t.Logf("n %d: mean count %.1f, %d of %d within a factor of 2, %d with more than ⌈log2 n⌉+1 = %d republishes", n, mean, within, links, beyond, bound+1)
		if mean < 0.8*float64(n) || mean > 1.25*float64(n) {
			t.Errorf("n %d: mean count %.1f, want within a quarter of n", n, mean)
		}
		if within < links*2/3 {
			t.Errorf("n %d: %d of %d counts within a factor of 2 of n, want two in three", n, within, links)
		}
		if beyond > links/20 {
			t.Errorf("n %d: %d of %d links republished more than %d times, want at most one in twenty", n, beyond, links, bound+1)
		}
	}
}

// FuzzSighted: whatever the pages, a link n pages link is reported 2, 4,
// 8, … in turn, each at most once, never more often than n-1 times nor
// above MaxInLinks, the first repeat always as 2; it stays published; and
// the same pages in the same order report the same counts.
func FuzzSighted(f *testing.F) {
	f.Add(uint64(0x9e3779b97f4a7c15), uint64(1), uint16(2))
	f.Add(uint64(0), uint64(0), uint16(1000))
	f.Add(uint64(42), uint64(7), uint16(40000))
	f.Fuzz(func(t *testing.T, fp, seed uint64, n uint16) {
		n = max(n, 1)
		steps := sightings(New(8), fp, int(n), rand.New(rand.NewPCG(seed, 1)))
		again := New(8)
		if msg := checkSteps(steps, int(n), 1<<len(steps)); msg != "" {
			t.Fatalf("counts %v of %d pages: %s", steps, n, msg)
		}
		if other := sightings(again, fp, int(n), rand.New(rand.NewPCG(seed, 1))); !slices.Equal(steps, other) || again.InLinks(fp) != 1<<len(steps) {
			t.Fatalf("counts %v, then %v from the same pages (count kept %d)", steps, other, again.InLinks(fp))
		}
		if !again.Published(fp, 2) {
			t.Fatal("a counted link is no longer published")
		}
	})
}

// TestConcurrentSighted: pages sighting one link at once step its counter
// one at a time: each count is reported once.
func TestConcurrentSighted(t *testing.T) {
	l := New(16)
	const fp = 0x9e3779b97f4a7c15
	l.Add(fp, 1)
	var (
		mu  sync.Mutex
		got []uint32
		wg  sync.WaitGroup
	)
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				if _, in := l.Sighted(fp, uint64(g<<32|i), 1); in != 0 {
					mu.Lock()
					got = append(got, in)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	if msg := checkSteps(got, 40001, l.InLinks(fp)); msg != "" || len(got) < 8 {
		t.Errorf("counts %v from 40000 concurrent sightings: %s (want about 15)", got, msg)
	}
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

// BenchmarkSighted is BenchmarkPublished counting in-links, each sighting
// from another page: the counters climb as in a crawl, most sightings
// drawing and few stepping.
func BenchmarkSighted(b *testing.B) {
	l := New(1 << 20)
	fps := make([]uint64, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range fps {
		fps[i] = rng.Uint64()
		l.Add(fps[i], 3)
	}
	i, steps := 0, 0
	for b.Loop() {
		if _, in := l.Sighted(fps[i&4095], uint64(i), 3); in != 0 {
			steps++
		}
		i++
	}
	b.ReportMetric(float64(steps)/float64(i), "steps/op")
}

// TestFetched: once a link's page is fetched its in-links are no longer
// counted (never published again for them), at every depth it is
// remembered at; another link is counted as before, and Fetched of a
// link not remembered changes nothing.
func TestFetched(t *testing.T) {
	l := New(1 << 10)
	const a, b, page = 0x9e3779b97f4a7c15, 0x7f4a7c159e3779b9, 0x1234
	l.Add(a, 3)
	l.Add(b, 3)
	l.Fetched(0x5555) // not remembered
	if published, in := l.Sighted(a, page, 3); !published || in != 2 {
		t.Fatalf("before Fetched: Sighted = %v, %d; want published, 2 in-links", published, in)
	}
	l.Fetched(a)
	for from := uint64(0); from < 1000; from++ {
		if published, in := l.Sighted(a, from, 3); !published || in != 0 {
			t.Fatalf("after Fetched: Sighted from %d = %v, %d; want published, no count", from, published, in)
		}
	}
	if !l.Published(a, 3) {
		t.Fatal("after Fetched: no longer published")
	}
	if published, in := l.Sighted(b, page, 3); !published || in != 2 {
		t.Fatalf("another link: Sighted = %v, %d; want published, 2 in-links", published, in)
	}
	var none *Links
	none.Fetched(a) // a nil set remembers nothing
}
