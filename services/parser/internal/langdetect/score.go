package langdetect

// The fast path answers when the best language's trigram score leads
// the second's by minGap (16 a nat: the second language is e^-25 as
// likely) and by minLead of itself; closer, whatlanggo decides. Set on
// testdata/corpus: the trigrams' best guess is wrong on a few short
// paragraphs there (man pages' command names, Slovene taken for
// Croatian), each with a gap under 260, where a 2 KiB window of
// running text has 1 400 or more; Danish and Norwegian, Dutch and
// Afrikaans stay within a tenth of each other, so minLead is low.
const (
	minGap  = 400
	minLead = 0.04
)

// score sums, over the sample's trigrams, the weight each language of
// script s gives them, and reports the best language's code and
// whether it leads the second by minGap and minLead.
func (m *model) score(sample string, s script) (string, bool) {
	code, s1, s2 := m.rank(sample, s)
	return code, s1-s2 >= minGap && float64(s1-s2) >= minLead*float64(s1)
}

// rank is the best language of script s for sample, its score and the
// second's.
func (m *model) rank(sample string, s script) (string, int32, int32) {
	var scores [256]int32
	mask := uint64(len(m.keys) - 1)
	var r1, r2 uint64 = ' ', ' '
	add := func(r3 uint64) {
		if r2 == ' ' && (r1 == ' ' || r3 == ' ') {
			return
		}
		k := r1<<42 | r2<<21 | r3
		for h := m.slot(k); ; h = (h + 1) & mask {
			kk := m.keys[h]
			if kk == k {
				v := m.vals[h]
				for _, p := range m.posts[v>>8 : v>>8+v&0xff] {
					scores[p.lang] += int32(p.weight)
				}
				break
			}
			if kk == 0 {
				break
			}
		}
	}
	for _, r := range sample {
		r3 := uint64(m.info(r).norm)
		add(r3)
		r1, r2 = r2, r3
	}
	add(' ')
	best, second := -1, -1
	for i := range profiles {
		if profiles[i].script != s {
			continue
		}
		switch {
		case best < 0 || scores[i] > scores[best]:
			best, second = i, best
		case second < 0 || scores[i] > scores[second]:
			second = i
		}
	}
	if best < 0 {
		return "", 0, 0
	}
	if second < 0 {
		return profiles[best].code, scores[best], 0
	}
	return profiles[best].code, scores[best], scores[second]
}
