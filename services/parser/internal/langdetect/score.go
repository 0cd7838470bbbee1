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
// whether it leads the second by minGap and minLead. It reads the first
// firstBytes of the sample, and the rest only when that is not yet
// sure: on running text the first KiB alone leads by more than minGap
// (the corpus's 2 KiB windows lead by 1 400 and more), so most pages
// cost half the lookups, and the answer is the same.
func (m *model) score(sample string, s script) (string, bool) {
	t := newTally()
	first := cut(sample, firstBytes)
	t.feed(m, first)
	if len(first) < len(sample) {
		if code, s1, s2 := t.rank(m, s); s1-s2 >= firstGap && sure(s1, s2) {
			return code, true
		}
		t.feed(m, sample[len(first):])
	}
	code, s1, s2 := t.rank(m, s)
	return code, sure(s1, s2)
}

// firstBytes is what score reads before it asks whether it is sure;
// a lead of firstGap there answers.
const (
	firstBytes = 1 << 10
	firstGap   = 2 * minGap
)

func sure(s1, s2 int32) bool {
	return s1-s2 >= minGap && float64(s1-s2) >= minLead*float64(s1)
}

// rank is the best language of script s for sample, its score and the
// second's.
func (m *model) rank(sample string, s script) (string, int32, int32) {
	t := newTally()
	t.feed(m, sample)
	return t.rank(m, s)
}

// tally is the languages' trigram scores of the text fed so far, and
// the last two letters, which begin the next piece's first trigrams.
type tally struct {
	scores [256]int32
	r1, r2 uint64
}

// newTally is the tally of no text: the first letters follow a space.
func newTally() *tally { return &tally{r1: ' ', r2: ' '} }

// feed adds the trigrams of text, which continues what was fed before.
func (t *tally) feed(m *model, text string) {
	r1, r2 := t.r1, t.r2
	for _, r := range text {
		r3 := uint64(m.info(r).norm)
		t.add(m, r1, r2, r3)
		r1, r2 = r2, r3
	}
	t.r1, t.r2 = r1, r2
}

// add scores the trigram r1 r2 r3.
func (t *tally) add(m *model, r1, r2, r3 uint64) {
	if r2 == ' ' && (r1 == ' ' || r3 == ' ') {
		return
	}
	mask := uint64(len(m.keys) - 1)
	k := r1<<42 | r2<<21 | r3
	for h := m.slot(k); ; h = (h + 1) & mask {
		kk := m.keys[h]
		if kk == k {
			v := m.vals[h]
			for _, p := range m.posts[v>>8 : v>>8+v&0xff] {
				t.scores[p.lang] += int32(p.weight)
			}
			return
		}
		if kk == 0 {
			return
		}
	}
}

// rank ends the text (its last trigram) and returns the best language
// of script s, its score and the second's. It may be called again after
// more is fed: the end is scored on a copy.
func (t *tally) rank(m *model, s script) (string, int32, int32) {
	end := tally{scores: t.scores}
	end.add(m, t.r1, t.r2, ' ') // the trigram of the last two letters and the end
	scores := &end.scores
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
