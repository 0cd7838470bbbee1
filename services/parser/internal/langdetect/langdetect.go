// Package langdetect guesses the language a page is written in from its
// visible text, to sit next to the language the page declares.
//
// It is a pure function over a bounded sample of the text, built on
// github.com/abadojack/whatlanggo (trigram profiles, pure Go, its tables
// built once at start, about 2 MB). The services/parser README has the
// choice against lingua-go and the cost per page.
package langdetect

import (
	"unicode"
	"unicode/utf8"

	"github.com/abadojack/whatlanggo"
)

const (
	// SampleBytes is how much of the text is read: its first 2 KiB, cut
	// on a UTF-8 boundary. The detector's cost grows with the sample, and
	// 2 KiB is a few hundred words of running text, past most navigation.
	SampleBytes = 2 << 10

	// MinLetters is the fewest letters the sample must have for a guess:
	// below it (a login form, an image gallery, a redirect page) the
	// trigram statistics say little and Detect reports "".
	MinLetters = 40
)

// Detect reports the ISO 639-1 code (two lower-case letters) of the
// language text is written in, or "" when the text is too short (fewer
// than MinLetters letters in its first SampleBytes), when the detector is
// not confident (whatlanggo's IsReliable: confidence above 0.8), or when
// the language has no two-letter code. Chinese in Han script is "zh",
// whatever its variety. Safe for concurrent use; it allocates.
func Detect(text string) string {
	sample := cut(text, SampleBytes)
	if !enoughLetters(sample) {
		return ""
	}
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

func enoughLetters(s string) bool {
	letters := 0
	for _, r := range s {
		if unicode.IsLetter(r) {
			if letters++; letters >= MinLetters {
				return true
			}
		}
	}
	return false
}

func lower(c byte) bool { return c >= 'a' && c <= 'z' }
