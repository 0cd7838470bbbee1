package langdetect

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestTallyPieces: a text fed in two pieces, cut anywhere between runes,
// scores as the text fed at once (the trigrams across the cut are
// counted once), so score's first KiB continues into the rest exactly.
func TestTallyPieces(t *testing.T) {
	m := loadModel()
	text := "Der schnelle braune Fuchs springt über den faulen Hund, und die Katze schläft im Garten. "
	whole := newTally()
	whole.feed(m, text)
	_, w1, w2 := whole.rank(m, scriptLatin)
	for cut := range len(text) + 1 {
		if cut < len(text) && !utf8.RuneStart(text[cut]) {
			continue
		}
		parts := newTally()
		parts.feed(m, text[:cut])
		if cut > 0 {
			_, _, _ = parts.rank(m, scriptLatin) // rank may be asked midway without changing the tally
		}
		parts.feed(m, text[cut:])
		if parts.scores != whole.scores {
			t.Fatalf("cut at %d: scores differ from the text fed at once", cut)
		}
		if _, p1, p2 := parts.rank(m, scriptLatin); p1 != w1 || p2 != w2 {
			t.Fatalf("cut at %d: rank %d/%d, want %d/%d", cut, p1, p2, w1, w2)
		}
	}
}

// TestScoreFirstKiB: score answers from the first KiB only when that
// is sure by firstGap, and its answer is then the whole sample's.
func TestScoreFirstKiB(t *testing.T) {
	m := loadModel()
	para := "The quick brown fox jumps over the lazy dog while the children play in the garden and the old man reads his newspaper on the bench. "
	sample := cut(strings.Repeat(para, 20), SampleBytes)
	code, sure := m.score(sample, scriptLatin)
	full, s1, s2 := m.rank(sample, scriptLatin)
	if code != "en" || !sure || full != "en" || s1-s2 < minGap {
		t.Fatalf("score %q sure %v; rank of the whole %q lead %d", code, sure, full, s1-s2)
	}
	if _, f1, f2 := m.rank(cut(sample, firstBytes), scriptLatin); f1-f2 < firstGap {
		t.Fatalf("the first KiB leads by %d, under firstGap %d: the test text no longer shows the early answer", f1-f2, firstGap)
	}
}
