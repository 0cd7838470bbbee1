package envflag

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestEnvName(t *testing.T) {
	tests := []struct{ flag, want string }{
		{"clickhouse-addr", "CRAWLER_CLICKHOUSE_ADDR"},
		{"log-level", "CRAWLER_LOG_LEVEL"},
		{"workers", "CRAWLER_WORKERS"},
		{"kafka.brokers", "CRAWLER_KAFKA_BROKERS"},
		{"Already_Upper9", "CRAWLER_ALREADY_UPPER9"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			if got := EnvName(tt.flag); got != tt.want {
				t.Errorf("EnvName(%q) = %q, want %q", tt.flag, got, tt.want)
			}
		})
	}
}

type config struct {
	addr    string
	workers int
	delay   time.Duration
	verbose bool
}

func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "clickhouse-addr", "127.0.0.1:9000", "")
	fs.IntVar(&c.workers, "workers", 10, "")
	fs.DurationVar(&c.delay, "host-delay", time.Second, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	return fs
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

func TestParse(t *testing.T) {
	defaults := config{addr: "127.0.0.1:9000", workers: 10, delay: time.Second}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string // substring of the error; "" for none
	}{
		{name: "defaults", want: defaults},
		{
			name: "env over default",
			env:  map[string]string{"CRAWLER_CLICKHOUSE_ADDR": "ch:9000", "CRAWLER_WORKERS": "50", "CRAWLER_HOST_DELAY": "2s", "CRAWLER_VERBOSE": "true"},
			want: config{addr: "ch:9000", workers: 50, delay: 2 * time.Second, verbose: true},
		},
		{
			name: "flag over env",
			args: []string{"-workers", "3", "-clickhouse-addr=cli:1"},
			env:  map[string]string{"CRAWLER_CLICKHOUSE_ADDR": "env:2", "CRAWLER_WORKERS": "50"},
			want: config{addr: "cli:1", workers: 3, delay: time.Second},
		},
		{
			name: "flag set to its default still wins",
			args: []string{"-workers=10"},
			env:  map[string]string{"CRAWLER_WORKERS": "50"},
			want: defaults,
		},
		{
			name: "mixed",
			args: []string{"-verbose"},
			env:  map[string]string{"CRAWLER_VERBOSE": "false", "CRAWLER_HOST_DELAY": "250ms"},
			want: config{addr: "127.0.0.1:9000", workers: 10, delay: 250 * time.Millisecond, verbose: true},
		},
		{
			name: "empty env value is a value",
			env:  map[string]string{"CRAWLER_CLICKHOUSE_ADDR": ""},
			want: config{workers: 10, delay: time.Second},
		},
		{
			name: "unrelated and unprefixed variables ignored",
			env:  map[string]string{"WORKERS": "7", "CLICKHOUSE_ADDR": "x", "CRAWLER_UNKNOWN": "1"},
			want: defaults,
		},
		{
			name:    "invalid env names the variable",
			env:     map[string]string{"CRAWLER_WORKERS": "many"},
			wantErr: "CRAWLER_WORKERS",
		},
		{
			name:    "invalid env duration",
			env:     map[string]string{"CRAWLER_HOST_DELAY": "soon"},
			wantErr: "CRAWLER_HOST_DELAY",
		},
		{
			name: "invalid env ignored when flag given",
			args: []string{"-workers", "4"},
			env:  map[string]string{"CRAWLER_WORKERS": "many"},
			want: config{addr: "127.0.0.1:9000", workers: 4, delay: time.Second},
		},
		{
			name:    "invalid flag",
			args:    []string{"-workers", "x"},
			wantErr: "workers",
		},
		{
			name:    "unknown flag",
			args:    []string{"-nope"},
			wantErr: "nope",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c config
			fs := newFlagSet(&c)
			err := Parse(fs, tt.args, lookup(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if c != tt.want {
				t.Fatalf("config = %+v, want %+v", c, tt.want)
			}
		})
	}
}

func TestParseHelp(t *testing.T) {
	var c config
	err := Parse(newFlagSet(&c), []string{"-h"}, lookup(nil))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Parse(-h) error = %v, want flag.ErrHelp", err)
	}
}

func TestParseKeepsPositionalArgs(t *testing.T) {
	var c config
	fs := newFlagSet(&c)
	if err := Parse(fs, []string{"-workers=2", "seed1", "seed2"}, lookup(map[string]string{"CRAWLER_WORKERS": "9"})); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(fs.Args(), ","); got != "seed1,seed2" || c.workers != 2 {
		t.Fatalf("args %q workers %d", got, c.workers)
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{name: "repeated flag", args: []string{"-seed", "a", "-seed", "b"}, want: []string{"a", "b"}},
		{name: "environment", env: map[string]string{"CRAWLER_SEED": "c"}, want: []string{"c"}},
		{name: "flag wins", args: []string{"-seed", "a"}, env: map[string]string{"CRAWLER_SEED": "c"}, want: []string{"a"}},
		{name: "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Strings
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.Var(&got, "seed", "seed URL (repeatable)")
			if err := Parse(fs, tt.args, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }); err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if s := got.String(); s != strings.Join(tt.want, " ") {
				t.Errorf("String() = %q", s)
			}
		})
	}
}
