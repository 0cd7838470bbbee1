package pages_test

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestConfigFlags: the defaults validate, near-duplicate detection is off
// unless asked for (it costs ClickHouse CPU), in-links are counted unless
// turned off, and out-of-range values are refused by name.
func TestConfigFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{args: nil},
		{args: []string{"-near-duplicate-distance", "3"}},
		{args: []string{"-near-duplicate-distance", "4"}, wantErr: "near-duplicate-distance 4"},
		{args: []string{"-near-duplicate-distance", "-1"}, wantErr: "near-duplicate-distance -1"},
		{args: []string{"-batch-size", "0"}, wantErr: "batch-size 0"},
		{args: []string{"-recent-links", "-1"}, wantErr: "recent-links -1"},
		{args: []string{"-in-links=false"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var c pages.Config
			fs := flag.NewFlagSet("parser", flag.ContinueOnError)
			c.RegisterFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if tt.args == nil && c.NearDistance != 0 {
				t.Errorf("default near-duplicate-distance %d, want 0 (off)", c.NearDistance)
			}
			if want := !slices.Contains(tt.args, "-in-links=false"); c.InLinks != want {
				t.Errorf("in-links %v, want %v", c.InLinks, want)
			}
			err := c.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}
