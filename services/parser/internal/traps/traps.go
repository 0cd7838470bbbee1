// Package traps finds crawler traps as the parser reads a host's pages.
//
// A trap is a URL family (a URL with every run of digits read as one
// number: /cal/2026/11 and /cal/2027/1 are one family) whose pages repeat
// one another's text and bring nothing new but the next URL of the
// family, counting on: a calendar whose months link the next month
// forever, a list whose ?page=N goes on past its last item. The depth limit ends such a walk only after it has cost the
// site and the crawl as many requests as the limit allows.
//
// A page is a candidate when its only new links (those the parser has
// not published before) count one step on from its own URL (Step: the
// next month, the next page) and a repeat when its text, digits left
// out, is the text of its family's previous candidate. When a family's
// repeats follow one another Allowance times, the new links of its next
// repeats are suspected: the parser marks them
// (DiscoveredURL.trap_family) and the scheduler ends them as
// trap_suspected. A page of the family that brings anything new outside
// it, or links into it other than one step on, ends the run, so a list
// whose pages link new items keeps its place however alike the pages
// look, and so does a site whose templated pages link one another all
// over their range (the demo site's tree: page 24 links pages 50 and 51).
//
// The first two hops into a family are never cut: its first page is no
// repeat of anything, and the pages it links are fetched before any of
// them can be judged.
//
// The state is a bounded table of families, lossy by design: forgetting
// a family (the table is full, the parser restarted, the host's partition
// moved) only costs the requests it would have saved.
package traps

import (
	"strings"
	"sync"
)

// DefaultAllowance is the number of repeats of a family in a row
// after which its new URLs are suspected: the first repeat. The entry of
// a calendar and its two neighbours are fetched; their neighbours are not.
const DefaultAllowance = 1

// DefaultFamilies is how many families a Detector remembers: about 3 MiB.
const DefaultFamilies = 1 << 16

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// authority returns the length of u's scheme and host (up to the path,
// the query or the end).
func authority(u string) int {
	start := strings.Index(u, "://")
	if start < 0 {
		return 0
	}
	start += len("://")
	if end := strings.IndexAny(u[start:], "/?#"); end >= 0 {
		return start + end
	}
	return len(u)
}

// SameFamily reports whether URLs a and b are on one host and differ only
// in the numbers of their path and query: read with every maximal run of
// ASCII digits as one symbol, they are equal. /cal/2026/12 and
// /cal/2027/1 are; /news/1 and /news/1a are not.
func SameFamily(a, b string) bool {
	i, j := authority(a), authority(b)
	if a[:i] != b[:j] {
		return false
	}
	for i < len(a) && j < len(b) {
		switch da, db := isDigit(a[i]), isDigit(b[j]); {
		case da && db:
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
		case da || db || a[i] != b[j]:
			return false
		default:
			i++
			j++
		}
	}
	return i == len(a) && j == len(b)
}

// number reads the run of digits of s at i: its value and the index
// after it, or false when it has more than 18 digits.
func number(s string, i int) (uint64, int, bool) {
	start := i
	var n uint64
	for ; i < len(s) && isDigit(s[i]); i++ {
		n = n*10 + uint64(s[i]-'0')
	}
	return n, i, i-start <= 18
}

// Step reports whether to counts one step from from: one family, and the
// first number that differs differs by one, the numbers after it equal or
// wrapped round (either side at most 1). /cal/2026/11 → /cal/2026/12,
// /cal/2026/12 → /cal/2027/1, /cal/2027/1 → /cal/2026/12, /list?page=4 →
// /list?page=5 are steps; /sec0/page24 → /sec2/page50 (a tree's child)
// is not, nor is a URL to itself. A trap counts: each page links the
// next number, for ever; a site's pages link pages all over its range.
// It reads both URLs once, in step, and allocates nothing: the parser
// asks it of every new link.
func Step(from, to string) bool {
	i, j := authority(from), authority(to)
	if from[:i] != to[:j] {
		return false
	}
	stepped := false
	for i < len(from) && j < len(to) {
		switch da, db := isDigit(from[i]), isDigit(to[j]); {
		case da && db:
			var (
				a, b     uint64
				okA, okB bool
			)
			a, i, okA = number(from, i)
			b, j, okB = number(to, j)
			switch {
			case !okA || !okB:
				return false
			case stepped:
				if a != b && a > 1 && b > 1 {
					return false
				}
			case a+1 == b || b+1 == a:
				stepped = true
			case a != b:
				return false
			}
		case da || db || from[i] != to[j]:
			return false
		default:
			i++
			j++
		}
	}
	return stepped && i == len(from) && j == len(to)
}

// Family names u's family: u with every run of digits of its path and
// query replaced by '#'.
func Family(u string) string {
	host := authority(u)
	out := make([]byte, 0, len(u))
	out = append(out, u[:host]...)
	for i := host; i < len(u); i++ {
		if !isDigit(u[i]) {
			out = append(out, u[i])
			continue
		}
		out = append(out, '#')
		for i+1 < len(u) && isDigit(u[i+1]) {
			i++
		}
	}
	return string(out)
}

// FNV-1a, 64 bits.
const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// familyHash hashes u's family without building its name.
func familyHash(u string) uint64 {
	h := uint64(offset64)
	host := authority(u)
	for i := 0; i < len(u); i++ {
		c := u[i]
		if i >= host && isDigit(c) {
			c = '#'
			for i+1 < len(u) && isDigit(u[i+1]) {
				i++
			}
		}
		h = (h ^ uint64(c)) * prime64
	}
	return h
}

// Shape hashes a page's title and text with their digits left out: the
// months of an empty calendar have one shape, two articles do not.
func Shape(title, text string) uint64 {
	h := uint64(offset64)
	for _, s := range [2]string{title, text} {
		for i := 0; i < len(s); i++ {
			if !isDigit(s[i]) {
				h = (h ^ uint64(s[i])) * prime64
			}
		}
		h = (h ^ 0xff) * prime64 // keeps "ab"+"c" apart from "a"+"bc"
	}
	return h
}

// key is one family of one crawl.
type key struct {
	crawl  string
	family uint64
}

// family is what a Detector remembers of one.
type family struct {
	shape   uint64 // of its last candidate
	repeats int    // repeats in a row
}

// Detector remembers the families of the pages it is shown. Safe for
// concurrent use.
type Detector struct {
	mu       sync.Mutex
	max      int
	families map[key]family
}

// NewDetector returns a Detector that remembers up to size families
// (DefaultFamilies when size <= 0).
func NewDetector(size int) *Detector {
	if size <= 0 {
		size = DefaultFamilies
	}
	return &Detector{max: size, families: make(map[key]family)}
}

// Candidate records a page of crawl at pageURL whose new links all count
// one step on from it (Step), with its text's Shape, and returns how many
// repeats of the family came in a row with it (0: it is no repeat) and
// whether its new links are suspected: that run reached allowance (never
// when allowance <= 0).
func (d *Detector) Candidate(crawl, pageURL string, shape uint64, allowance int) (run int, suspect bool) {
	k := key{crawl, familyHash(pageURL)}
	d.mu.Lock()
	defer d.mu.Unlock()
	f, ok := d.families[k]
	switch {
	case ok && f.shape == shape:
		f.repeats++
	default:
		f = family{shape: shape}
	}
	if !ok && len(d.families) >= d.max {
		d.evictOne()
	}
	d.families[k] = f
	return f.repeats, allowance > 0 && f.repeats >= allowance
}

// Productive records that a page of crawl at pageURL brought a new link
// that is no step on from it: the family's run of repeats ends.
func (d *Detector) Productive(crawl, pageURL string) {
	k := key{crawl, familyHash(pageURL)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.families[k]; ok && f.repeats > 0 {
		f.repeats = 0
		d.families[k] = f
	}
}

// Len is the number of families remembered.
func (d *Detector) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.families)
}

// evictOne forgets a family, the first the map's iteration yields (its
// order is unspecified, so none is kept for ever). Called with mu held.
func (d *Detector) evictOne() {
	for k := range d.families {
		delete(d.families, k)
		return
	}
}
