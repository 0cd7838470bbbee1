package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestDisplayNote(t *testing.T) {
	snap := Snapshot{Fetched: 7, Lags: map[string]int64{"scheduler": 0, "fetcher": 1, "parser": 0}, Elapsed: 2 * time.Second}
	line := snap.Line()
	const note = "fetcher-0 exited (signal: killed) after 3s; restart 1 in 500ms"
	tests := []struct {
		name string
		tty  bool
		show bool // a progress line was shown before the note
		want string
	}{
		{"plain output: one line each", false, true, line + "\n" + note + "\n"},
		{"terminal: the note above, the progress line redrawn", true, true, "\r" + line + "\r" + note + "\n" + line},
		{"terminal before any progress", true, false, note + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			d := &Display{Out: &out, TTY: tt.tty}
			if tt.show {
				d.Show(snap)
			}
			d.Note(note)
			if got := out.String(); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSummaryRestarts(t *testing.T) {
	tests := []struct {
		name     string
		restarts map[string]int
		want     string // "" = no restarts line
	}{
		{"not given", nil, ""},
		{"every process, sorted", map[string]int{"scheduler": 0, "fetcher-0": 2, "parser": 0}, "  restarts    fetcher-0:2 parser:0 scheduler:0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			Summary{CrawlID: "c", Restarts: tt.restarts}.Print(&out)
			got := ""
			for _, l := range strings.SplitAfter(out.String(), "\n") {
				if strings.HasPrefix(l, "  restarts") {
					got = l
				}
			}
			if got != tt.want {
				t.Errorf("restarts line %q, want %q (summary %q)", got, tt.want, out.String())
			}
		})
	}
}

func TestSummaryJoined(t *testing.T) {
	tests := []struct {
		name   string
		joined []Joined
		want   string // the scope lines
	}{
		{"none", nil, ""},
		{"a seed's redirect and the next hop", []Joined{
			{From: "http://golang.org/", To: "https://go.dev/", Hops: 1, Site: "go.dev"},
			{From: "http://example.com/", To: "http://www.example.com/", Hops: 2, Site: "www.example.com"},
			{From: "http://www.example.com/", To: "http://b.example/", Hops: 3, Site: "b.example"},
		}, "  scope       seed http://golang.org/ redirected to https://go.dev/, go.dev joined the scope\n" +
			"  scope       http://example.com/ (1 redirect from a seed) redirected to http://www.example.com/, www.example.com joined the scope\n" +
			"  scope       http://www.example.com/ (2 redirects from a seed) redirected to http://b.example/, b.example joined the scope\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			Summary{CrawlID: "c", Joined: tt.joined}.Print(&out)
			got := ""
			for _, l := range strings.SplitAfter(out.String(), "\n") {
				if strings.HasPrefix(l, "  scope") {
					got += l
				}
			}
			if got != tt.want {
				t.Errorf("scope lines %q, want %q", got, tt.want)
			}
		})
	}
}
