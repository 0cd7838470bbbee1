package langdetect

import (
	"math"
	"sync"
)

//go:generate go run gen_profiles.go

// profile is one language's trigrams in whatlanggo's profile (most
// frequent first) and the script it is written in.
type profile struct {
	script   script
	name     string // ISO 639-3, as whatlanggo names it
	code     string // ISO 639-1, "" when the language has none
	trigrams []string
}

// posting is one language's weight for a trigram of its profile.
type posting struct {
	lang   uint8 // index in profiles
	weight uint8
}

// model is the fast path's tables, built once from profiles: the
// trigrams of every profile in one open-addressing hash (keys and
// values in parallel arrays; a value is the offset and count of the
// trigram's postings), and the rune table of the scripts.
type model struct {
	low   *[lowRunes]runeInfo
	keys  []uint64
	vals  []uint32
	posts []posting
	shift uint
}

var loadModel = sync.OnceValue(buildModel)

// rankWeight is how much a text trigram found at rank r of a profile
// adds to that language's score: the log of the trigram's frequency
// (taken as Zipf's, 1/(r+20)) over that of a trigram just past the
// profile, which is what a trigram missing from it is worth. Summed
// over a text's trigrams it ranks languages as a naive Bayes model
// would.
func rankWeight(r int) uint8 {
	return uint8(math.Round(16 * math.Log(620/float64(r+20))))
}

func buildModel() *model {
	m := &model{low: buildLowTable()}
	byKey := map[uint64][]posting{}
	var order []uint64
	for li, p := range profiles {
		for r, tg := range p.trigrams {
			k, ok := m.trigramKey(tg)
			if !ok {
				continue
			}
			if _, seen := byKey[k]; !seen {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], posting{lang: uint8(li), weight: rankWeight(r)})
		}
	}
	bits := uint(1)
	for 1<<bits < 2*len(order) {
		bits++
	}
	m.shift = 64 - bits
	m.keys = make([]uint64, 1<<bits)
	m.vals = make([]uint32, 1<<bits)
	mask := uint64(1)<<bits - 1
	for _, k := range order {
		ps := byKey[k]
		h := m.slot(k)
		for m.keys[h] != 0 {
			h = (h + 1) & mask
		}
		m.keys[h] = k
		m.vals[h] = uint32(len(m.posts))<<8 | uint32(len(ps))
		m.posts = append(m.posts, ps...)
	}
	return m
}

// trigramKey packs a profile's trigram as the detector normalizes text.
func (m *model) trigramKey(tg string) (uint64, bool) {
	var k uint64
	n := 0
	for _, r := range tg {
		k = k<<21 | uint64(m.info(r).norm)
		n++
	}
	return k, n == 3
}

func (m *model) slot(k uint64) uint64 {
	return (k * 0x9E3779B97F4A7C15) >> m.shift
}
