package config

import (
	"flag"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/envflag"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // substring; "" = valid
		depth   uint   // expected MaxDepth when valid
	}{
		{name: "defaults", depth: 16},
		{name: "max depth from env", env: map[string]string{"CRAWLER_MAX_DEPTH": "3"}, depth: 3},
		{name: "flag wins over env", args: []string{"--max-depth=4"}, env: map[string]string{"CRAWLER_MAX_DEPTH": "3"}, depth: 4},
		{name: "negative max pages", args: []string{"--max-pages=-1"}, wantErr: "max-pages"},
		{name: "depth beyond uint16", args: []string{"--max-depth=70000"}, wantErr: "max-depth"},
		{name: "batch above in-flight", args: []string{"--max-batch=500", "--max-in-flight=100"}, wantErr: "max-in-flight"},
		{name: "zero refresh", env: map[string]string{"CRAWLER_BUDGET_REFRESH": "0s"}, wantErr: "budget-refresh"},
		{name: "admit factor below one", args: []string{"--budget-admit-factor=0.5"}, wantErr: "budget-admit-factor"},
		{name: "admit factor not a number", args: []string{"--budget-admit-factor=NaN"}, wantErr: "budget-admit-factor"},
		{name: "zero revisit tick", args: []string{"--revisit-tick=0s"}, wantErr: "revisit-tick"},
		{name: "zero seen flush", env: map[string]string{"CRAWLER_SEEN_FLUSH_INTERVAL": "0s"}, wantErr: "seen-flush-interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg Config
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			cfg.RegisterFlags(fs)
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			if err := envflag.Parse(fs, tt.args, lookup); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want error mentioning %q", err, tt.wantErr)
			}
			if tt.wantErr == "" && cfg.MaxDepth != tt.depth {
				t.Fatalf("MaxDepth = %d, want %d", cfg.MaxDepth, tt.depth)
			}
		})
	}
}

func TestAdmitCeiling(t *testing.T) {
	tests := []struct {
		pages  int64
		factor float64
		want   int64
	}{
		{0, 2, 0},
		{10, 2, 20},
		{10, 1, 10},
		{3, 1.5, 5},
		{1 << 62, 1000, 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := AdmitCeiling(tt.pages, tt.factor); got != tt.want {
			t.Errorf("AdmitCeiling(%d, %v) = %d, want %d", tt.pages, tt.factor, got, tt.want)
		}
	}
}
