package langdetect

// DetectPath is detect for the tests: the code and the path that
// answered ("none", "script", "trigrams" or "fallback").
func DetectPath(text string) (string, string) {
	code, p := detect(text)
	return code, [...]string{"none", "script", "trigrams", "fallback"}[p]
}

// Cut is cut.
func Cut(s string, n int) string { return cut(s, n) }

// Fallback is whatlanggo's answer alone (today's detector), to compare.
func Fallback(text string) string {
	sample := cut(text, SampleBytes)
	if letters := countLetters(sample); letters < MinLetters {
		return ""
	}
	return fallback(sample)
}

func countLetters(s string) int {
	m := loadModel()
	n := 0
	for _, r := range s {
		if m.info(r).letter {
			n++
		}
	}
	return n
}

// Rank is the trigram scorer's best language for text's sample and
// its lead (for the script the sample is mostly written in).
func Rank(text string) (string, int32, int32) {
	m := loadModel()
	sample := cut(text, SampleBytes)
	var counts [numScripts]int
	for _, r := range sample {
		if info := m.info(r); info.letter {
			counts[info.script]++
		}
	}
	return m.rank(sample, majority(&counts))
}
