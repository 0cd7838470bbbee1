package harvest_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/harvest"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

func names(es []proxylist.Entry) string {
	var out []string
	for _, e := range es {
		out = append(out, e.String())
	}
	return strings.Join(out, " ")
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file, format string
		want         string
		skipped      int
	}{
		{"plain.txt", "plain", "http://127.0.0.11:8080 http://127.0.0.12:3128 socks5://127.0.0.13:1080 http://127.0.0.14:80", 1},
		{"list.json", "json", "http://127.0.0.21:8080 socks5://127.0.0.22:1080", 2},
		{"objects.json", "json", "http://127.0.0.31:8080 socks5://127.0.0.32:1080", 2},
		{"table.html", "html", "http://127.0.0.41:8080 http://127.0.0.42:3128 http://127.0.0.46:8888 http://127.0.0.44:1080 http://127.0.0.45:8000", 1},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := harvest.Detect(body); got != tt.format {
				t.Errorf("Detect = %s, want %s", got, tt.format)
			}
			es, skipped, err := harvest.Parse("", body)
			if err != nil {
				t.Fatal(err)
			}
			if names(es) != tt.want || skipped != tt.skipped {
				t.Errorf("Parse = %q skipped %d, want %q skipped %d", names(es), skipped, tt.want, tt.skipped)
			}
		})
	}
}

func TestHarvestSources(t *testing.T) {
	srv := httptest.NewServer(http.FileServer(http.Dir("testdata")))
	defer srv.Close()
	h := harvest.New([]string{srv.URL + "/table.html", filepath.Join("testdata", "list.json"), srv.URL + "/missing", filepath.Join("testdata", "nope")}, 5*time.Second)
	res := h.Harvest(t.Context())
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	if res[0].Err != nil || len(res[0].Entries) != 5 || res[1].Err != nil || len(res[1].Entries) != 2 {
		t.Errorf("results %+v", res[:2])
	}
	if res[2].Err == nil || !strings.Contains(res[2].Err.Error(), "404") || res[3].Err == nil {
		t.Errorf("failing sources: %v, %v", res[2].Err, res[3].Err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"plain.txt", "list.json", "objects.json", "table.html"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		es, _, err := harvest.Parse("", body)
		if err != nil {
			return
		}
		for _, e := range es {
			if e.Port < 1 || e.Port > 65535 || e.Host == "" {
				t.Errorf("bad entry %v", e)
			}
		}
	})
}
