package simhash

import (
	"fmt"
	"strings"
	"testing"
)

func TestSum64(t *testing.T) {
	var words []string
	for i := range 400 {
		words = append(words, fmt.Sprintf("word%d", i%97*7+i/97))
	}
	base := strings.Join(words, " ")
	edited := strings.Replace(base, "word14", "changed", 1)
	other := strings.Join(words[200:], " ") + " entirely different text about something else " + strings.Repeat("zz ", 50)
	tests := []struct {
		name    string
		a, b    string
		minDist int
		maxDist int
	}{
		{"identical", base, base, 0, 0},
		{"case and punctuation ignored", "Hello, World! Foo bar.", "hello world foo bar", 0, 0},
		{"one word edited", base, edited, 0, 8},
		{"different texts", base, "the quick brown fox jumps over the lazy dog again and again", 10, 64},
		{"half different", base, other, 9, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Distance(Sum64(tt.a), Sum64(tt.b))
			if d < tt.minDist || d > tt.maxDist {
				t.Errorf("distance %d, want in [%d, %d]", d, tt.minDist, tt.maxDist)
			}
		})
	}
	if Sum64("") != 0 || Sum64(" ,. ") != 0 {
		t.Error("empty text does not hash to 0")
	}
	if Sum64("short") == 0 {
		t.Error("one-word text hashes to 0")
	}
}

func BenchmarkSum64(b *testing.B) {
	text := strings.Repeat("lorem ipsum dolor sit amet consectetur ", 500)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Sum64(text)
	}
}
