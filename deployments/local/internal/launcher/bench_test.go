package launcher

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// TestBenchTrapDeep: the benchmark prints the calendar requests past
// their second hop next to the trap's, as a share of all requests, and
// writes them to the JSON figures.
func TestBenchTrapDeep(t *testing.T) {
	b := Bench{WebHosts: 4, Web: &websim.Stats{Requests: 200, Trap: 12, TrapDeep: 9}}
	var out bytes.Buffer
	b.Print(&out)
	if want := "calendar trap pages 12, 9 past their second hop = 4.5% of requests"; !strings.Contains(out.String(), want) {
		t.Errorf("bench output lacks %q:\n%s", want, out.String())
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := b.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Web struct {
			Trap     int `json:"trap"`
			TrapDeep int `json:"trap_deep"`
		} `json:"web"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Web.Trap != 12 || v.Web.TrapDeep != 9 {
		t.Errorf("bench JSON web trap %d, trap_deep %d; want 12 and 9", v.Web.Trap, v.Web.TrapDeep)
	}
}
