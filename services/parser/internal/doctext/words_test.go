package doctext

import (
	"regexp"
	"strings"
	"unicode"
)

// words splits text into lower-case words: runs of letters and digits,
// and every Han, kana or Hangul character on its own (those scripts put no
// spaces between words).
func words(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			flush()
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

// wordShare is the share of ref's words (counted with repeats) found in
// got.
func wordShare(ref, got []string) float64 {
	if len(ref) == 0 {
		return 1
	}
	have := map[string]int{}
	for _, w := range got {
		have[w]++
	}
	n := 0
	for _, w := range ref {
		if have[w] > 0 {
			have[w]--
			n++
		}
	}
	return float64(n) / float64(len(ref))
}

// bigramShare is the share of ref's pairs of adjacent words found, as
// adjacent words in the same order, in got: the reading order kept.
func bigramShare(ref, got []string) float64 {
	if len(ref) < 2 {
		return 1
	}
	have := map[[2]string]int{}
	for i := 1; i < len(got); i++ {
		have[[2]string{got[i-1], got[i]}]++
	}
	n := 0
	for i := 1; i < len(ref); i++ {
		k := [2]string{ref[i-1], ref[i]}
		if have[k] > 0 {
			have[k]--
			n++
		}
	}
	return float64(n) / float64(len(ref)-1)
}

var (
	tagRE    = regexp.MustCompile(`<[^>]*>`)
	blockEnd = regexp.MustCompile(`</(p|h[1-6]|td|th|tr|text:p|text:h|title)>|<text:line-break/>`)
)

// sourceText is the text of an HTML or flat ODF source: tags stripped,
// the part before the body left out.
func sourceText(src string) string {
	if i := strings.Index(src, "<body>"); i >= 0 {
		src = src[i:]
	}
	if i := strings.Index(src, "<office:body>"); i >= 0 {
		src = src[i:]
	}
	src = blockEnd.ReplaceAllString(src, "$0\n")
	return tagRE.ReplaceAllString(src, " ")
}
