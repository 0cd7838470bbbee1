package simhash

import "testing"

// TestSum64Golden pins Sum64 to the values of the reference implementation
// (unicode.IsLetter, IsNumber and ToLower on every rune) for texts that mix
// ASCII, which takes a faster path, with other letters, digits,
// punctuation and case: the stored simhashes of earlier crawls stay
// comparable.
func TestSum64Golden(t *testing.T) {
	tests := []struct {
		text string
		want uint64
	}{
		{"The quick brown fox jumps over the lazy dog", 0xd1ed17f0aee61bd4},
		{"THE QUICK BROWN FOX jumps over THE lazy DOG!!", 0xd1ed17f0aee61bd4},
		{"crawler fetches pages, 42 hosts; robots.txt said: Disallow /private/", 0x101903d0381b11},
		{"Ünïcödé wörds, ÉCOLE and école, straße and STRASSE", 0x20002a66601e1230},
		{"中华民国 是 一个 位于 东亚 的 国家 mixed with English 2026", 0x6a56c2276c418ac7},
		{"a_b-c.d'e\tf\ng  h\x00i\x7fj", 0xf000390c0ee00b80},
		{"x", 0x3b2093dffc5f6ef0},
		{"", 0x0},
	}
	for _, tt := range tests {
		if got := Sum64(tt.text); got != tt.want {
			t.Errorf("Sum64(%q) = %#x, want %#x", tt.text, got, tt.want)
		}
	}
}
