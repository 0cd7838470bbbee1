package pages_test

import (
	"flag"
	"testing"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestDetectLanguageFlag: language detection is on unless turned off.
func TestDetectLanguageFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"-detect-language=false"}, false},
	} {
		var c pages.Config
		fs := flag.NewFlagSet("parser", flag.ContinueOnError)
		c.RegisterFlags(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if c.DetectLanguage != tt.want {
			t.Errorf("%v: detect-language %v, want %v", tt.args, c.DetectLanguage, tt.want)
		}
	}
}
