package langdetect

import "unicode"

// script is a writing system, as far as the language is concerned: the
// scripts before scriptSingle are written in several languages told
// apart by trigrams, the others each name one language (singleLang).
type script uint8

const (
	scriptNone script = iota // not a letter, or a script no language below is told by
	scriptLatin
	scriptCyrillic
	scriptArabic
	scriptDevanagari
	scriptHebrew
	scriptEthiopic
	scriptSingle // marks the end of the scripts scored by trigrams
	scriptGreek
	scriptArmenian
	scriptGeorgian
	scriptBengali
	scriptGurmukhi
	scriptGujarati
	scriptOriya
	scriptTamil
	scriptTelugu
	scriptKannada
	scriptMalayalam
	scriptSinhala
	scriptThai
	scriptLao
	scriptMyanmar
	scriptKhmer
	scriptHangul
	scriptHan
	scriptKana // Hiragana and Katakana
	numScripts
)

// singleLang is the language of each script only one language (of
// those whatlanggo knows, plus Armenian and Lao) is written in. Han
// and kana are decided together (see decideCJK).
var singleLang = [numScripts]string{
	scriptGreek:     "el",
	scriptArmenian:  "hy",
	scriptGeorgian:  "ka",
	scriptBengali:   "bn",
	scriptGurmukhi:  "pa",
	scriptGujarati:  "gu",
	scriptOriya:     "or",
	scriptTamil:     "ta",
	scriptTelugu:    "te",
	scriptKannada:   "kn",
	scriptMalayalam: "ml",
	scriptSinhala:   "si",
	scriptThai:      "th",
	scriptLao:       "lo",
	scriptMyanmar:   "my",
	scriptKhmer:     "km",
	scriptHangul:    "ko",
}

// lowTable covers the runes below lowRunes (ASCII to the Greek
// Extended block: every alphabet scored by trigrams but for a few
// presentation forms), so the common rune costs one load.
const lowRunes = 0x2000

// runeInfo is what the detector needs of a rune: its script if it is a
// letter, and the rune it stands for in a trigram: lower-cased, or ' '
// for whatlanggo's stop characters (space, punctuation, digits and
// symbols).
type runeInfo struct {
	norm   uint16
	script script
	letter bool
}

// scriptTables are the Unicode script tables behind each script.
var scriptTables = []struct {
	s script
	t *unicode.RangeTable
}{
	{scriptLatin, unicode.Latin},
	{scriptCyrillic, unicode.Cyrillic},
	{scriptArabic, unicode.Arabic},
	{scriptDevanagari, unicode.Devanagari},
	{scriptHebrew, unicode.Hebrew},
	{scriptEthiopic, unicode.Ethiopic},
	{scriptGreek, unicode.Greek},
	{scriptArmenian, unicode.Armenian},
	{scriptGeorgian, unicode.Georgian},
	{scriptBengali, unicode.Bengali},
	{scriptGurmukhi, unicode.Gurmukhi},
	{scriptGujarati, unicode.Gujarati},
	{scriptOriya, unicode.Oriya},
	{scriptTamil, unicode.Tamil},
	{scriptTelugu, unicode.Telugu},
	{scriptKannada, unicode.Kannada},
	{scriptMalayalam, unicode.Malayalam},
	{scriptSinhala, unicode.Sinhala},
	{scriptThai, unicode.Thai},
	{scriptLao, unicode.Lao},
	{scriptMyanmar, unicode.Myanmar},
	{scriptKhmer, unicode.Khmer},
	{scriptHangul, unicode.Hangul},
	{scriptHan, unicode.Han},
	{scriptKana, unicode.Hiragana},
	{scriptKana, unicode.Katakana},
}

func buildLowTable() *[lowRunes]runeInfo {
	var t [lowRunes]runeInfo
	for r := rune(0); r < lowRunes; r++ {
		t[r] = slowInfo(r)
	}
	return &t
}

// slowInfo classifies any rune by the Unicode tables.
func slowInfo(r rune) runeInfo {
	if stopChar(r) {
		return runeInfo{norm: ' '}
	}
	info := runeInfo{norm: uint16(r), letter: unicode.IsLetter(r)}
	if l := unicode.ToLower(r); l < 0x10000 {
		info.norm = uint16(l)
	}
	if r >= 0x10000 {
		info.norm = 0xFFFD // outside every profile; Han beyond the BMP is scored by script alone
	}
	if info.letter {
		for _, st := range scriptTables {
			if unicode.Is(st.t, r) {
				info.script = st.s
				break
			}
		}
	}
	return info
}

// stopChar is whatlanggo's isStopChar: these runes are a space in a
// trigram.
func stopChar(r rune) bool {
	return unicode.IsSymbol(r) || unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsDigit(r)
}

// highInfo classifies a rune at or above lowRunes: the CJK and Hangul
// blocks by their ranges (a Chinese or Japanese sample is hundreds of
// them), the rest by the Unicode tables.
func highInfo(r rune) runeInfo {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0xF900 && r <= 0xFAFF,
		r >= 0x20000 && r <= 0x323AF, r == 0x3005, r == 0x3007:
		return runeInfo{norm: uint16(min(r, 0xFFFD)), script: scriptHan, letter: true}
	case r >= 0x3041 && r <= 0x3096, r >= 0x309D && r <= 0x309F, r >= 0x30A1 && r <= 0x30FA,
		r >= 0x30FC && r <= 0x30FF, r >= 0x31F0 && r <= 0x31FF, r >= 0xFF66 && r <= 0xFF9D:
		return runeInfo{norm: uint16(r), script: scriptKana, letter: true}
	case r >= 0xAC00 && r <= 0xD7A3, r >= 0x3131 && r <= 0x318E:
		return runeInfo{norm: uint16(r), script: scriptHangul, letter: true}
	case r >= 0x2000 && r <= 0x206F, r >= 0x3000 && r <= 0x3004, r >= 0x3008 && r <= 0x303F, r >= 0xFF01 && r <= 0xFF20:
		return runeInfo{norm: ' '} // general and CJK punctuation, fullwidth digits and signs
	}
	return slowInfo(r)
}

func (m *model) info(r rune) runeInfo {
	if r < lowRunes {
		return m.low[r]
	}
	return highInfo(r)
}
