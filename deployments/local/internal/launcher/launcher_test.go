package launcher

import (
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
)

func TestRestartFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want Config // AutoRestart and Restart compared
	}{
		{"defaults", []string{"--demo"}, Config{AutoRestart: true, Restart: supervise.DefaultPolicy()}},
		{"off", []string{"--demo", "--restart=false", "--restart-max", "0"},
			Config{AutoRestart: false, Restart: supervise.Policy{Backoff: 500 * time.Millisecond, MaxBackoff: 30 * time.Second, Window: 2 * time.Minute}}},
		{"tuned", []string{"--demo", "--restart-backoff", "1s", "--restart-max-backoff", "1m", "--restart-max", "10", "--restart-window", "10m"},
			Config{AutoRestart: true, Restart: supervise.Policy{Backoff: time.Second, MaxBackoff: time.Minute, MaxRestarts: 10, Window: 10 * time.Minute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(t, tt.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AutoRestart != tt.want.AutoRestart || cfg.Restart != tt.want.Restart {
				t.Errorf("restart %v %+v, want %v %+v", cfg.AutoRestart, cfg.Restart, tt.want.AutoRestart, tt.want.Restart)
			}
		})
	}
}

// TestWebFlags: the generated web's flags become the websim command's.
func TestWebFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", []string{"--web"}, []string{"--hosts", "200", "--articles", "50", "--trap-every", "25"}},
		{"no trap", []string{"--web", "--web-hosts", "3", "--web-articles", "7", "--web-trap-every", "-1"},
			[]string{"--hosts", "3", "--articles", "7", "--trap-every", "-1"}},
		{"grid", []string{"--web", "--web-trap-every", "4", "--web-trap-grid"},
			[]string{"--hosts", "200", "--articles", "50", "--trap-every", "4", "--trap-grid"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(t, tt.args, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.webArgs(); !slices.Equal(got, tt.want) {
				t.Errorf("websim args %q, want %q", got, tt.want)
			}
		})
	}
}
