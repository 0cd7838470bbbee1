// Package langdetect guesses the language a page is written in from its
// visible text, to sit next to the language the page declares.
//
// It is a pure function over a bounded sample of the text. The script
// decides first: Han, kana, Hangul, Greek, Thai and the other scripts of
// one language name it. Text in a script several languages share
// (Latin, Cyrillic, Arabic, Devanagari, Hebrew, Ethiopic) is scored
// against whatlanggo's trigram profiles of those languages, every
// trigram looked up once in one hash of all profiles, without
// allocating; when the best two languages score too close, the sample
// goes to github.com/abadojack/whatlanggo itself (the fallback: its
// rank-distance measure and reliability test, 0.6-1 ms). The
// services/parser README has the figures.
package langdetect

import (
	"unicode/utf8"

	"github.com/abadojack/whatlanggo"
)

const (
	// SampleBytes is how much of the text is read: its first 2 KiB, cut
	// on a UTF-8 boundary. 2 KiB is a few hundred words of running text,
	// past most navigation.
	SampleBytes = 2 << 10

	// MinLetters is the fewest letters the sample must have for a guess:
	// below it (a login form, an image gallery, a redirect page) the
	// trigram statistics say little and Detect reports "".
	MinLetters = 40
)

// Detect reports the ISO 639-1 code (two lower-case letters) of the
// language text is written in, or "" when the text is too short (fewer
// than MinLetters letters in its first SampleBytes), when the detector is
// not confident, or when the language has no two-letter code. Chinese in
// Han script is "zh", whatever its variety; Han with kana is "ja". Safe
// for concurrent use; only the fallback allocates.
func Detect(text string) string {
	code, _ := detect(text)
	return code
}

// path says which part of the detector answered.
type path uint8

const (
	pathNone     path = iota // too few letters
	pathScript               // the script alone
	pathTrigrams             // the trigram scores, sure enough
	pathFallback             // whatlanggo
)

// detect is Detect, telling which path answered.
func detect(text string) (string, path) {
	m := loadModel()
	sample := cut(text, SampleBytes)
	var counts [numScripts]int
	letters := 0
	for _, r := range sample {
		info := m.info(r)
		if info.letter {
			letters++
			counts[info.script]++
		}
	}
	if letters < MinLetters {
		return "", pathNone
	}
	top := majority(&counts)
	switch {
	case top == scriptNone:
		return "", pathScript
	case top == scriptHan || top == scriptKana:
		// Japanese writes kana among the kanji: a tenth of the CJK
		// letters (running Japanese has a third or more; Chinese text
		// may quote a katakana name).
		if counts[scriptKana]*10 >= counts[scriptHan]+counts[scriptKana] {
			return "ja", pathScript
		}
		return "zh", pathScript
	case top > scriptSingle:
		return singleLang[top], pathScript
	}
	if code, sure := m.score(sample, top); sure {
		return code, pathTrigrams
	}
	return fallback(sample), pathFallback
}

// majority is the script of most letters, a Han, kana or Hangul letter
// counting as three: each stands for a syllable or a word, so a
// Chinese or Japanese paragraph naming a few commands in Latin letters
// is still Chinese or Japanese.
func majority(counts *[numScripts]int) script {
	counts[scriptHan] *= 3
	counts[scriptKana] *= 3
	counts[scriptHangul] *= 3
	top := scriptNone
	for s := scriptLatin; s < numScripts; s++ {
		if counts[s] > counts[top] {
			top = s
		}
	}
	return top
}

// fallback asks whatlanggo, and answers only when it calls its guess
// reliable (confidence above 0.8).
func fallback(sample string) string {
	info := whatlanggo.Detect(sample)
	if !info.IsReliable() {
		return ""
	}
	code := info.Lang.Iso6391()
	if len(code) != 2 || !lower(code[0]) || !lower(code[1]) {
		return ""
	}
	return code
}

// cut is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func lower(c byte) bool { return c >= 'a' && c <= 'z' }
