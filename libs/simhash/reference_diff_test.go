package simhash

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// A text of one to three words has one shingle, and its simhash is that
// shingle's mixed hash, all 64 bits of it: short texts show any difference
// in how words are split, lower-cased and hashed. Long texts show
// differences in the counting (the byte lanes, their flushes, the
// majority), where one shingle's bits are outvoted.

// tricky lists inputs at the edges of Sum64: word splitting, case, runes
// of every UTF-8 length, invalid UTF-8, and shingle counts around the
// flush of the byte lanes (every 255 shingles).
func tricky() []struct{ name, text string } {
	words := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(f(i))
		}
		return b.String()
	}
	distinct := func(i int) string { return fmt.Sprintf("w%d", i) }
	same := func(int) string { return "same" }
	tests := []struct{ name, text string }{
		{"empty", ""},
		{"space", " "},
		{"punctuation only", " ,. !?;:-_()[]{}'\"/\\@#$%^&*+=<>|`~"},
		{"controls only", "\x00\x01\t\n\r\x1f\x7f"},
		{"one word", "word"},
		{"one letter", "x"},
		{"one digit", "7"},
		{"two words", "hello world"},
		{"exactly three words", "the quick fox"},
		{"four words", "the quick brown fox"},
		{"leading and trailing separators", "  ...the quick brown fox!!  "},
		{"digits", "2026 11 25 0 9 1234567890"},
		{"mixed case", "The QUICK bRoWn FoX JUMPS over THE lazy DOG"},
		{"every ASCII byte", func() string {
			var b strings.Builder
			for c := range utf8.RuneSelf {
				b.WriteByte(byte(c))
			}
			return b.String()
		}()},
		{"underscore apostrophe hyphen", "a_b don't well-known e.g. x/y"},
		{"latin-1 letters", "Ünïcödé wörds, ÉCOLE and école, ÀÖØÞßàöøþÿ × ÷"},
		{"one non-ascii word", "Ünïcödé"},
		{"two words second non-ascii", "plain Ünïcödé"},
		{"latin-1 non-letters", "a\u00a0b\u00adc\u00b2d\u00b9e\u00bdf\u00aag\u00b5h\u00bai"},
		{"greek sigma", "ΣΊΣΥΦΟΣ σίσυφος Σ σ ς"},
		{"cyrillic", "Москва МОСКВА москва Ёё Ѐ"},
		{"case changes to ascii", "\u212a \u212akelvin \u0130stanbul \u0131"},
		{"capital sharp s", "\u1e9e STRASSE stra\u00dfe"},
		{"roman numerals", "\u216b \u217b \u2160\u2161 x"},
		{"fullwidth", "ＡＢＣ１２３ ａｂｃ"},
		{"combining marks", "e\u0301cole cafe\u0301 n\u0303"},
		{"zero width", "a\u200bb\u200cc\u200dd\ufeffe"},
		{"curly quotes and dashes", "don’t “quote” — en–dash … ellipsis"},
		{"chinese", "中华民国是一个位于东亚的国家，首都是台北。他说：“你好！”"},
		{"han edges", "\u4dff\u4e00 \u9fff\u9fa5 \ua000 \u4e00\u4e01\u4e02 \u3400 \U00020000"},
		{"hangul", "안녕하세요 세계 \uac00\ud7a3 \ud7a4 \uabff\uac00"},
		{"japanese", "ひらがな カタカナ・ー゛゜ 漢字 ｶﾀｶﾅ"},
		{"supplementary letters", "\U00010400\U00010428 \U00010041 \U0001d400 \U0001f600"},
		{"emoji", "😀 👍🏽 👨‍👩‍👧 text 😀text"},
		{"replacement rune", "a\ufffdb \ufffd c"},
		{"invalid byte alone", "\xff"},
		{"invalid bytes between words", "abc\xffdef\x80ghi\xfejkl"},
		{"invalid bytes inside non-ascii", "Ün\xffïc\xc3ödé"},
		{"truncated han", "中国\xe4\xb8"},
		{"truncated han mid text", "中\xe4\xb8国 x"},
		{"overlong", "a\xc0\x80b \xe0\x80\x80c"},
		{"surrogate", "a\xed\xa0\x80b"},
		{"above max rune", "a\xf4\x90\x80\x80b"},
		{"lone continuation bytes", "\x80\x81\xbf"},
		{"very long word", strings.Repeat("a", 100_000)},
		{"very long upper word", strings.Repeat("Z", 70_000)},
		{"very long non-ascii word", strings.Repeat("é", 50_000)},
		{"very long han word", strings.Repeat("中", 40_000)},
		{"long words", words(50, func(i int) string { return strings.Repeat(string(rune('a'+i%26)), i*37) })},
	}
	// Shingles around the flushes: n words make n-2 shingles. With the same
	// word repeated every shingle is the same, so every set bit's count
	// reaches the number of shingles and overflows a byte past 255.
	for _, shingles := range []int{253, 254, 255, 256, 257, 509, 510, 511, 765, 766, 1000} {
		tests = append(tests,
			struct{ name, text string }{fmt.Sprintf("%d distinct shingles", shingles), words(shingles+2, distinct)},
			struct{ name, text string }{fmt.Sprintf("%d equal shingles", shingles), words(shingles+2, same)},
		)
	}
	tests = append(tests,
		struct{ name, text string }{"english-like 8 KB", englishLike(8 << 10)},
		struct{ name, text string }{"chinese 8 KB", chineseLike(8 << 10)},
		struct{ name, text string }{"russian 8 KB", russianLike(8 << 10)},
		struct{ name, text string }{"english-like 1 MB", englishLike(1 << 20)},
	)
	return tests
}

func TestSum64MatchesReference(t *testing.T) {
	for _, tt := range tricky() {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := Sum64(tt.text), sum64Reference(tt.text); got != want {
				t.Errorf("Sum64 = %#016x, reference %#016x", got, want)
			}
		})
	}
}

// TestSum64MatchesReferenceEveryRune: each rune inside a word, and twice
// between words, hashes as the reference hashes it. The texts have one
// shingle, so its hash is compared in full. Every rune of the first two
// planes, where the letters of text are, and a sample of the others
// (TestWordRune checks them all against the unicode tables).
func TestSum64MatchesReferenceEveryRune(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0x20000 && r%61 != 0 || testing.Short() && r%7 != 0 {
			continue
		}
		s := string(r)
		for _, text := range [...]string{"a" + s + "b", "ab " + s + s + "\u212a d"} {
			if got, want := Sum64(text), sum64Reference(text); got != want {
				t.Fatalf("Sum64(%+q) = %#016x, reference %#016x", text, got, want)
			}
		}
	}
}

// TestSum64MatchesReferenceRandom compares Sum64 with the reference on
// random texts made of words, separators and bytes of every kind.
func TestSum64MatchesReferenceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(2026, 11))
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	for i := range n {
		// Mostly short texts, whose one or few shingles show in the
		// simhash; some long ones, past the byte lanes' flushes.
		tokens := rng.IntN(8)
		if i%50 == 0 {
			tokens = rng.IntN(2000)
		}
		text := randomText(rng, tokens)
		if got, want := Sum64(text), sum64Reference(text); got != want {
			t.Fatalf("Sum64(%+q) = %#016x, reference %#016x", text, got, want)
		}
	}
}

// randomText returns n random tokens: words of ASCII, non-ASCII or mixed
// letters and digits, separators, and invalid UTF-8, mostly with a
// separator between them and sometimes run together.
func randomText(rng *rand.Rand, n int) string {
	pools := [...][]rune{
		[]rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
		[]rune(" \t\n\r.,;:!?-_'\"()[]{}/\\@#$%&*+=<>|~^`\x00\x7f"),
		[]rune("ÀÉÎÕÜßàéîõüÿØøÞþµªº²³¹¼½¾\u00a0\u00ad×÷"),
		[]rune("ΣσςΑαΩωЖжЁёЀѐ\u0130\u0131\u212a\u1e9eǅǆǄ\u216b\u217bⒶⓐＡａ１"),
		[]rune("中华民国一丁七万丈三上下不与龥\u4dff\u4e00\u9fff\ua000\u3400㐀"),
		[]rune("가각간갇\uac00\ud7a3\ud7a4\uabf9\uabffひカー・゛"),
		[]rune("\U00010400\U00010428\U00010041\U0001d400\U0001f600\U00020000\U0010ffff"),
		[]rune("—–“”’…•\u200b\u200d\ufeff\ufffd\u0301\u0303"),
	}
	var b strings.Builder
	for range n {
		switch k := rng.IntN(20); k {
		case 0: // raw bytes, mostly invalid UTF-8
			for range 1 + rng.IntN(4) {
				b.WriteByte(byte(0x80 + rng.IntN(0x80)))
			}
		case 1: // a prefix of a multi-byte rune
			s := string(pools[4+rng.IntN(3)][rng.IntN(7)])
			b.WriteString(s[:1+rng.IntN(len(s)-1)])
		default:
			word := pools[0]
			if k < 8 {
				word = pools[rng.IntN(len(pools))]
			}
			for range 1 + rng.IntN(12) {
				if rng.IntN(8) == 0 {
					word = pools[rng.IntN(len(pools))]
				}
				b.WriteRune(word[rng.IntN(len(word))])
			}
		}
		if rng.IntN(6) != 0 {
			sep := pools[1]
			if rng.IntN(8) == 0 {
				sep = pools[7]
			}
			b.WriteRune(sep[rng.IntN(len(sep))])
		}
	}
	return b.String()
}

// FuzzSum64 checks that Sum64 returns the reference's simhash for every
// input, valid UTF-8 or not, and never panics: Sum64(text) ==
// sum64Reference(text).
func FuzzSum64(f *testing.F) {
	for _, tt := range tricky() {
		if len(tt.text) <= 4<<10 {
			f.Add(tt.text)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		f.Add(randomText(rng, 1+rng.IntN(20)))
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := Sum64(text), sum64Reference(text); got != want {
			t.Errorf("Sum64(%+q) = %#016x, reference %#016x", text, got, want)
		}
	})
}

// TestDecode3 checks decode3 against utf8.DecodeRuneInString on every
// sequence of three bytes and on the shorter ones: when it decodes, it
// decodes the same rune, three bytes long.
func TestDecode3(t *testing.T) {
	var b [3]byte
	for c0 := range 256 {
		for c1 := range 256 {
			for _, n := range []int{1, 2} {
				b[0], b[1] = byte(c0), byte(c1)
				if r, ok := decode3(string(b[:n])); ok {
					t.Fatalf("decode3(%+q) = %U, true, want false", b[:n], r)
				}
			}
			for c2 := range 256 {
				b[0], b[1], b[2] = byte(c0), byte(c1), byte(c2)
				r, ok := decode3(string(b[:]))
				if !ok {
					continue
				}
				if want, size := utf8.DecodeRuneInString(string(b[:])); r != want || size != 3 {
					t.Fatalf("decode3(%+q) = %U, want %U of %d bytes", b, r, want, size)
				}
			}
		}
	}
}

// TestWordRune checks the bitmaps, and wordRune past them, against the
// unicode functions that the reference calls, on every non-ASCII rune.
func TestWordRune(t *testing.T) {
	runes := bmpRunes()
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		got, ok := runes.wordRune(r)
		wantOK := unicode.IsLetter(r) || unicode.IsNumber(r)
		if ok != wantOK || ok && got != unicode.ToLower(r) {
			t.Fatalf("wordRune(%U) = %U, %t; want %U, %t", r, got, ok, unicode.ToLower(r), wantOK)
		}
	}
}

// englishLike returns about size bytes of English-like page text: common
// words with a skewed frequency, capitalized sentences, commas, numbers,
// paragraphs, and now and then typographic quotes and dashes (non-ASCII
// separators) and an accented word, as extracted page text has.
func englishLike(size int) string {
	vocab := strings.Fields(`the of and to a in is that for it as was with be by on not
		he this are or his from at which but have an they you were their one all we
		can her has there been if more when will would who so no she other its may
		these two about then them than only into out some could time new first page
		crawler search results news world people years state government market city
		company information service report university system program development
		research policy international security technology community national public
		according including between during through however because without another
		website content published updated comments privacy contact subscribe share`)
	odd := []string{"café", "naïve", "résumé", "don’t", "“quoted”", "—", "…", "São", "Zürich"}
	rng := rand.New(rand.NewPCG(8, 8))
	var b strings.Builder
	for b.Len() < size {
		n := 5 + rng.IntN(20)
		for i := range n {
			var w string
			switch k := rng.IntN(100); {
			case k < 2:
				w = odd[rng.IntN(len(odd))]
			case k < 5:
				w = fmt.Sprint(rng.IntN(3000))
			default:
				u := rng.Float64()
				w = vocab[int(u*u*u*float64(len(vocab)))] // skewed to the first words
			}
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			switch {
			case i == n-1:
				b.WriteString(". ")
				if rng.IntN(5) == 0 {
					b.WriteString("\n\n")
				}
			case rng.IntN(10) == 0:
				b.WriteString(", ")
			default:
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}

// chineseLike returns about size bytes of Chinese-like page text: clauses
// of common Han characters between full-width punctuation, with some
// numbers and Latin words.
func chineseLike(size int) string {
	han := []rune(`的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切`)
	punct := []string{"，", "。", "、", "：", "；", "“", "”", "！", "？", "（", "）"}
	rng := rand.New(rand.NewPCG(9, 9))
	var b strings.Builder
	for b.Len() < size {
		for range 2 + rng.IntN(12) {
			b.WriteRune(han[rng.IntN(len(han))])
		}
		switch rng.IntN(20) {
		case 0:
			fmt.Fprintf(&b, " %d ", rng.IntN(3000))
		case 1:
			b.WriteString(" Google ")
		default:
			b.WriteString(punct[rng.IntN(len(punct))])
		}
	}
	return b.String()
}

// russianLike returns about size bytes of Russian-like page text: words
// of Cyrillic letters, two bytes each, capitalized sentences.
func russianLike(size int) string {
	vocab := strings.Fields(`и в не на я что он с как а то это по к но они мы из у за
		от же так было для все она при мне вот уже еще или бы быть если время
		когда год работы после город страница новости поиск результаты компания`)
	rng := rand.New(rand.NewPCG(10, 10))
	var b strings.Builder
	for b.Len() < size {
		n := 5 + rng.IntN(15)
		for i := range n {
			w := vocab[rng.IntN(len(vocab))]
			if i == 0 {
				r, size := utf8.DecodeRuneInString(w)
				w = string(unicode.ToUpper(r)) + w[size:]
			}
			b.WriteString(w)
			if i == n-1 {
				b.WriteString(". ")
			} else {
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}

func BenchmarkSum64English(b *testing.B) {
	benchmarkSum64(b, englishLike(8<<10))
}

func BenchmarkSum64Chinese(b *testing.B) {
	benchmarkSum64(b, chineseLike(8<<10))
}

func BenchmarkSum64Russian(b *testing.B) {
	benchmarkSum64(b, russianLike(8<<10))
}

func benchmarkSum64(b *testing.B, text string) {
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Sum64(text)
	}
}
