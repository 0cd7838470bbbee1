package langdetect_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trawl-crawler/trawl/services/parser/internal/langdetect"
)

// article is testdata/<lang>.txt: one paragraph of a local news story
// written in that language (the Chinese and Japanese ones in their own
// scripts, as a GBK or Shift_JIS page reaches the parser: UTF-8).
func article(t testing.TB, lang string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", lang+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string
	}{
		{"english", article(t, "en"), "en"},
		{"german", article(t, "de"), "de"},
		{"french", article(t, "fr"), "fr"},
		{"spanish", article(t, "es"), "es"},
		{"russian", article(t, "ru"), "ru"},
		{"chinese", article(t, "zh"), "zh"},
		{"japanese", article(t, "ja"), "ja"},
		// The sample is the text's first SampleBytes: a German article
		// followed by much English is German.
		{"german then english", article(t, "de") + " " + article(t, "de") + " " + article(t, "de") + " " + strings.Repeat(article(t, "en")+" ", 20), "de"},
		{"empty", "", ""},
		{"short", "Willkommen auf unserer Seite", ""},
		{"numbers and punctuation", strings.Repeat("12.50 € — 3/4 (2021) ... ", 40), ""},
		// A sentence of each: no language has the trigrams to itself.
		{"mixed", "The council met on Tuesday. Der Stadtrat hat am Dienstag beraten. Le conseil s'est réuni mardi. El ayuntamiento se reunió el martes.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := langdetect.Detect(tt.text); got != tt.want {
				t.Errorf("Detect = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDetectSampleCut checks that a text cut inside a multi-byte rune
// is still read: the sample ends before the rune.
func TestDetectSampleCut(t *testing.T) {
	ru := article(t, "ru") // two bytes a letter
	text := " " + strings.Repeat(ru+" ", 1+langdetect.SampleBytes/len(ru))
	if got := langdetect.Detect(text); got != "ru" {
		t.Errorf("Detect = %q, want ru", got)
	}
}

// FuzzDetect feeds arbitrary bytes. Invariants: Detect never panics,
// reports "" or two lower-case ASCII letters, reads only the text's
// first SampleBytes (the answer for the text is the answer for that
// prefix), and answers the same twice.
func FuzzDetect(f *testing.F) {
	for _, l := range []string{"en", "de", "fr", "es", "ru", "zh", "ja"} {
		f.Add(article(f, l))
	}
	for _, cl := range loadCorpus(f) {
		f.Add(cl.paragraphs[0])
	}
	f.Add("")
	f.Add("\xff\xfe\xfd" + strings.Repeat("a", 100))
	f.Add(strings.Repeat("日本語", 300))
	f.Fuzz(func(t *testing.T, text string) {
		got := langdetect.Detect(text)
		if again := langdetect.Detect(text); again != got {
			t.Fatalf("Detect(%q) = %q, then %q", text, got, again)
		}
		if prefix := langdetect.Detect(langdetect.Cut(text, langdetect.SampleBytes)); prefix != got {
			t.Fatalf("Detect(%q) = %q, but %q for its first SampleBytes", text, got, prefix)
		}
		if got == "" {
			return
		}
		if len(got) != 2 || got[0] < 'a' || got[0] > 'z' || got[1] < 'a' || got[1] > 'z' {
			t.Fatalf("Detect(%q) = %q: not \"\" nor two lower-case letters", text, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid output %q", got)
		}
	})
}

// BenchmarkDetect detects the language of a 20 KB article (its first
// SampleBytes are read), per language: Latin-script languages are
// scored against 48 trigram profiles, Cyrillic ones against 8, Han and
// kana by script alone. BenchmarkDetectCorpus has every language.
func BenchmarkDetect(b *testing.B) {
	for _, l := range []string{"en", "de", "ru", "zh"} {
		a := article(b, l)
		text := strings.Repeat(a+"\n", 1+20000/len(a))
		b.Run(l, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if got := langdetect.Detect(text); got != l {
					b.Fatalf("Detect = %q, want %q", got, l)
				}
			}
		})
	}
}
