package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
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

// TestWebTrapFlagsReachWebsim runs the websim command as the launcher
// does and reads its calendar trap: the trap flags reach the process,
// and its stats count the requests past the trap's second hop.
func TestWebTrapFlagsReachWebsim(t *testing.T) {
	root, err := supervise.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := supervise.BuildTools(t.Context(), root, t.TempDir(), []string{"websim"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		links     int // links of the entry month's page; 0: no trap (404)
		trapDeep  int // after requesting 2026/11 and 2027/11
		trapPages int
	}{
		{"line", []string{"--web-trap-every", "1"}, 3, 1, 2},
		{"grid", []string{"--web-trap-every", "1", "--web-trap-grid"}, 5, 0, 2},
		{"none", []string{"--web-trap-every", "-1"}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parse(t, append([]string{"--web", "--web-hosts", "1", "--web-articles", "2"}, tt.args...), nil)
			if err != nil {
				t.Fatal(err)
			}
			site, err := startWeb(t.Context(), bins["websim"], "", cfg.webArgs(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = site.proc.Stop(10 * time.Second) }()
			status, body := httpGet(t, site.ready.Seeds[0]+"cal/2026/11")
			switch {
			case tt.links == 0 && status != http.StatusNotFound:
				t.Errorf("entry month: status %d, want 404 without a trap", status)
			case tt.links > 0 && status != http.StatusOK:
				t.Errorf("entry month: status %d, want 200", status)
			case tt.links > 0 && strings.Count(body, "<a href=") != tt.links:
				t.Errorf("entry month links %d pages, want %d:\n%s", strings.Count(body, "<a href="), tt.links, body)
			}
			httpGet(t, site.ready.Seeds[0]+"cal/2027/11")
			s, err := site.stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if s.Trap != tt.trapPages || s.TrapDeep != tt.trapDeep {
				t.Errorf("trap %d, trap_deep %d; want %d and %d", s.Trap, s.TrapDeep, tt.trapPages, tt.trapDeep)
			}
		})
	}
}

// httpGet returns the status and body of GET u.
func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestBenchMostLinked: on a best-deep web the benchmark prints how many
// of its most linked pages the crawl holds, with the page budget and the
// crawl order, and writes them to the JSON figures.
func TestBenchMostLinked(t *testing.T) {
	b := Bench{WebHosts: 20, MaxPages: 2120, Order: "breadth-first",
		Web: &websim.Stats{Requests: 2180, Pages: 2120, PagesTotal: 10600, MostLinked: 53, MostLinkedTotal: 1060}}
	var out bytes.Buffer
	b.Print(&out)
	want := "most-linked pages held: 53 of 1060 (5.0 %) with a budget of 2120 pages (20 % of the web's 10600), breadth-first; 2180 requests"
	if !strings.Contains(out.String(), want) {
		t.Errorf("bench output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	Bench{Web: &websim.Stats{Requests: 10}}.Print(&out)
	if strings.Contains(out.String(), "most-linked") {
		t.Errorf("a web without a most linked set prints a most-linked line:\n%s", out.String())
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
		MaxPages uint64 `json:"max_pages"`
		Order    string `json:"order"`
		Web      struct {
			MostLinked      int `json:"most_linked"`
			MostLinkedTotal int `json:"most_linked_total"`
		} `json:"web"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.MaxPages != 2120 || v.Order != "breadth-first" || v.Web.MostLinked != 53 || v.Web.MostLinkedTotal != 1060 {
		t.Errorf("bench JSON: %+v", v)
	}
}

// TestWebBestDeepReachesWebsim runs the websim command as the launcher
// does with --web-best-deep: it serves the best-deep sites, and its stats
// count a fetched page of the most linked set.
func TestWebBestDeepReachesWebsim(t *testing.T) {
	root, err := supervise.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := supervise.BuildTools(t.Context(), root, t.TempDir(), []string{"websim"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parse(t, []string{"--web", "--web-hosts", "2", "--web-best-deep", "--max-pages", "212"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	site, err := startWeb(t.Context(), bins["websim"], "", cfg.webArgs(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = site.proc.Stop(10 * time.Second) }()
	if site.ready.Pages != 2*530 {
		t.Errorf("%d content pages, want 2 × 530", site.ready.Pages)
	}
	if status, _ := httpGet(t, site.ready.Seeds[0]+"top/0.html"); status != http.StatusOK {
		t.Errorf("a popular page: status %d, want 200", status)
	}
	s, err := site.stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.MostLinked != 1 || s.MostLinkedTotal != 106 {
		t.Errorf("most linked %d of %d, want 1 of 106", s.MostLinked, s.MostLinkedTotal)
	}
}
